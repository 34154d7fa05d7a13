"""Chapter 3 submissions for the grader tests: plausible wrong answers, one per exercise and round."""

_ENCODER = """class Encoder(nn.Module):
    def __init__(self, vocab_size, d_emb, d_hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)

    def forward(self, src, src_mask):
"""

_STEP = """class DecoderStep(nn.Module):
    def __init__(self, vocab_size, d_emb, d_hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.cell = nn.GRUCell(d_emb, d_hidden)
        self.out = nn.Linear(d_hidden, vocab_size)

    def forward(self, y_prev, h):
"""

WRONG_ROUNDS = [
    {
        "3.1": _ENCODER
        + "        states, _ = self.rnn(self.embedding(src))\n        return states, states[:, -1]\n",  # padding
        "3.2": _STEP
        + "        h_new = self.cell(self.embedding(y_prev), h)\n        return self.out(h), h_new\n",  # old state
        "3.3": (  # teacher forcing with unshifted targets
            "def teacher_forcing(step, h0, targets, bos_id):\n"
            "    h, out = h0, []\n"
            "    for t in range(targets.shape[1]):\n"
            "        logits, h = step(targets[:, t], h)\n"
            "        out.append(logits)\n"
            "    return torch.stack(out, dim=1)\n"
        ),
        "3.4": (  # always feeds <bos>
            "def greedy_decode(step, h0, bos_id, max_len):\n"
            "    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)\n"
            "    h, out = h0, []\n"
            "    for _ in range(max_len):\n"
            "        logits, h = step(y, h)\n"
            "        out.append(logits)\n"
            "    return torch.stack(out, dim=1)\n"
        ),
    },
    {
        "3.3": (  # feeds back its own predictions instead of the true tokens
            "def teacher_forcing(step, h0, targets, bos_id):\n"
            "    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)\n"
            "    h, out = h0, []\n"
            "    for t in range(targets.shape[1]):\n"
            "        logits, h = step(y, h)\n"
            "        y = logits.argmax(-1)\n"
            "        out.append(logits)\n"
            "    return torch.stack(out, dim=1)\n"
        ),
        "3.4": (  # the state is not carried from step to step
            "def greedy_decode(step, h0, bos_id, max_len):\n"
            "    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)\n"
            "    out = []\n"
            "    for _ in range(max_len):\n"
            "        logits, _ = step(y, h0)\n"
            "        y = logits.argmax(-1)\n"
            "        out.append(logits)\n"
            "    return torch.stack(out, dim=1)\n"
        ),
    },
]
