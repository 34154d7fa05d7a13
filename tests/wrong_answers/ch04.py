"""Chapter 4 submissions for the grader tests: plausible wrong answers, one per exercise and round."""

_STEP = """class AttentionDecoderStep(nn.Module):
    def __init__(self, vocab_size, d_emb, d_hidden, d_enc, d_att):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.W = nn.Linear(d_hidden, d_att, bias=False)
        self.U = nn.Linear(d_enc, d_att, bias=False)
        self.v = nn.Linear(d_att, 1, bias=False)
        self.cell = nn.GRUCell(d_emb + d_enc, d_hidden)
        self.out = nn.Linear(d_hidden + d_enc, vocab_size)

    def forward(self, y_prev, s, h, mask=None):
        scores = additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])
"""

_STEER = """def steer_attention(h, W, U, v, j):
    s = torch.zeros(1, W.shape[1], dtype=h.dtype, requires_grad=True)
    optimizer = torch.optim.Adam([s], lr=0.1)
    for _ in range(200):
"""
_STEER_LOG_WEIGHT = """        _, weights = attention_context(additive_score(s, h, W, U, v), h)
        loss = -torch.log(weights[0, {target}])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            s.clamp_(-1, 1)
    return {result}
"""

WRONG_ROUNDS = [
    {
        "4.1": "def additive_score(s, h, W, U, v):\n    return ((s @ W.T)[:, None, :] + h @ U.T) @ v\n",  # no tanh
        "4.2": (  # softmax over the batch axis
            "def attention_context(scores, h, mask=None):\n"
            "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=0)\n"
            "    return (weights[:, :, None] * h).sum(1), weights\n"
        ),
        "4.3": _STEP
        + (  # context from the last state only
            "        _, weights = attention_context(scores, h, mask)\n"
            "        context = h[:, -1]\n"
            "        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)\n"
            "        return self.out(torch.cat([s_new, context], -1)), s_new, weights\n"
        ),
        "4.4": _STEER
        + (  # climbs the raw score of j, without the bound: the state leaves [-1, 1]
            "        loss = -additive_score(s, h, W, U, v)[0, j]\n"
            "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"
            "    return s.detach()\n"
        ),
    },
    {
        "4.1": "def additive_score(s, h, W, U, v):\n    return torch.tanh((s @ U.T)[:, None, :] + h @ W.T) @ v\n",  # W, U swapped
        "4.2": (  # context from the last state only
            "def attention_context(scores, h, mask=None):\n"
            "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=-1)\n"
            "    return h[:, -1], weights\n"
        ),
        "4.3": _STEP
        + (  # mask not passed on
            "        context, weights = attention_context(scores, h)\n"
            "        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)\n"
            "        return self.out(torch.cat([s_new, context], -1)), s_new, weights\n"
        ),
        # near miss: the right search, but the state comes back as a vector (H,), not one row (1, H)
        "4.4": _STEER + _STEER_LOG_WEIGHT.format(target="j", result="s.detach()[0]"),
    },
    {
        "4.2": (  # mask ignored
            "def attention_context(scores, h, mask=None):\n"
            "    weights = torch.softmax(scores, dim=-1)\n"
            "    return (weights[:, :, None] * h).sum(1), weights\n"
        ),
        # near miss: the right search, with j counted from 1 as in the equations
        "4.4": _STEER + _STEER_LOG_WEIGHT.format(target="j - 1", result="s.detach()"),
    },
]
