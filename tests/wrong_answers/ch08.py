"""Chapter 8 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points. A wrong
8.1 or 8.2 fails its check, so the notebook binds the reference in its place, and 8.3 (built on them) keeps
its points.
"""

_ENCODER = """class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ff_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
"""

_DECODER = """class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn_norm = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ff_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
"""

_FORWARD = """class Transformer(TransformerBase):
    def forward(self, src, src_mask, tgt):
        B, T = tgt.shape
        memory_mask = src_mask[:, None, None, :]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
"""

_DECODE = "        return self.decode(tgt_in, self.encode(src, memory_mask), self_mask, memory_mask)\n"
_SHIFTED = "        tgt_in = torch.cat([torch.full((B, 1), self.bos_id), tgt[:, :-1]], dim=1)\n"

_LOSS = """def label_smoothed_loss(logits, targets, mask, smoothing):
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
"""

_SCHEDULE = "def noam_lr(step, d_model, warmup, factor=1.0):\n"

_COPY = """def train_copy_model(seed):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = Transformer(COPY_VOCAB, COPY_VOCAB, d_model=32, n_heads=4, n_encoder_layers=1,
                        n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    model.train()
"""
_COPY_BATCH = "        src, src_mask, tgt = copy_batch(128, generator)\n"
_COPY_WARMUP = """        for group in optimizer.param_groups:
            group["lr"] = noam_lr(torch.tensor(step, dtype=torch.float64), 32, 30, factor=0.5).item()
"""
_COPY_DECODE = """        memory_mask = src_mask[:, None, None, :]
        logits = model.decode(tgt_in, model.encode(src, memory_mask), self_mask, memory_mask)
"""
_COPY_STEP = """        loss = label_smoothed_loss(logits, tgt, tgt != PAD, 0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return dict(model.state_dict())
"""

WRONG_ROUNDS = [
    {
        "8.1": _ENCODER
        + (  # the residual added after the norm, in the wrong place
            "        x = self.self_attn_norm(x) + self.dropout(self.self_attn(x, x, x, mask)[0])\n"
            "        return self.ff_norm(x) + self.dropout(self.ff(x))\n"
        ),
        "8.2": _DECODER
        + (  # no causal mask in the self-attention
            "        y = self.self_attn_norm(y + self.self_attn(y, y, y)[0])\n"
            "        y = self.cross_attn_norm(y + self.cross_attn(y, memory, memory, memory_mask)[0])\n"
            "        return self.ff_norm(y + self.ff(y))\n"
        ),
        "8.3": _FORWARD
        + (  # targets not shifted
            "        tgt_in = tgt\n        self_mask = causal & (tgt_in != self.pad_id)[:, None, None, :]\n" + _DECODE
        ),
        "8.4": _LOSS
        + (  # smoothing spread over the V - 1 wrong tokens only
            "    others = (-log_probs.sum(-1) - nll) / (logits.shape[-1] - 1)\n"
            "    loss = (1 - smoothing) * nll + smoothing * others\n"
            "    return (loss * mask).sum() / mask.sum()\n"
        ),
        "8.5": _SCHEDULE
        + (  # the warm-up inverted
            "    return factor * d_model ** -0.5 * torch.maximum(step ** -0.5, step * warmup ** -1.5)\n"
        ),
        "8.6": _COPY
        + "    for step in range(1, 161):\n"
        + _COPY_BATCH
        + _COPY_WARMUP
        + (  # trained without the causal mask: the decoder sees the token it must predict
            "        tgt_in = torch.cat([torch.full((len(tgt), 1), BOS), tgt[:, :-1]], dim=1)\n"
            "        self_mask = (tgt_in != PAD)[:, None, None, :]\n"
        )
        + _COPY_DECODE
        + _COPY_STEP,
    },
    {
        "8.1": _ENCODER
        + (  # pre-norm where post-norm was asked for
            "        x = x + self.dropout(self.self_attn(*(3 * [self.self_attn_norm(x)]), mask)[0])\n"
            "        return x + self.dropout(self.ff(self.ff_norm(x)))\n"
        ),
        "8.2": _DECODER
        + (  # the encoder's output used as the queries of the cross-attention
            "        y = self.self_attn_norm(y + self.self_attn(y, y, y, self_mask)[0])\n"
            "        y = self.cross_attn_norm(y + self.cross_attn(memory, y, y, memory_mask)[0])\n"
            "        return self.ff_norm(y + self.ff(y))\n"
        ),
        "8.3": _FORWARD
        + _SHIFTED
        + (  # the causal mask missing
            "        self_mask = (tgt_in != self.pad_id)[:, None, None, :]\n" + _DECODE
        ),
        "8.4": _LOSS
        + (  # averaged over the padding positions too
            "    loss = (1 - smoothing) * nll - smoothing * log_probs.mean(-1)\n    return loss.mean()\n"
        ),
        "8.5": _SCHEDULE
        + (  # the factor d_model^-0.5 left out
            "    return factor * torch.minimum(step ** -0.5, step * warmup ** -1.5)\n"
        ),
        "8.6": _COPY
        + "    for step in range(1, 161):\n"
        + _COPY_BATCH
        + _COPY_WARMUP
        + (  # the targets not shifted: the decoder reads the token it must predict
            "        tgt_in = tgt\n"
            "        causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).tril()\n"
            "        self_mask = causal & (tgt_in != PAD)[:, None, None, :]\n"
        )
        + _COPY_DECODE
        + _COPY_STEP,
    },
    {
        "8.3": _FORWARD
        + _SHIFTED
        + (  # the padding mask taken from the unshifted targets
            "        self_mask = causal & (tgt != self.pad_id)[:, None, None, :]\n" + _DECODE
        ),
        "8.5": _SCHEDULE
        + (  # one step late: a loop that counts from 0 (the rate of step s - 1 at step s)
            "    s = step - 1\n    return factor * d_model ** -0.5 * torch.minimum(s ** -0.5, s * warmup ** -1.5)\n"
        ),
        "8.4": "def label_smoothed_loss(logits, targets, mask, smoothing):\n"  # PyTorch's loss: refused
        "    return F.cross_entropy(logits[mask], targets[mask], label_smoothing=smoothing)\n",
        "8.6": _COPY
        + "    for step in range(1, 21):\n"  # near miss: the right loop, far too short a run to learn the task
        + _COPY_BATCH
        + _COPY_WARMUP
        + "        logits = model(src, src_mask, tgt)\n"
        + _COPY_STEP,
    },
]
