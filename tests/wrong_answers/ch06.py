"""Chapter 6 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points. A wrong
6.1 or 6.2 fails its check, so the notebook binds the reference in its place, and 6.3 keeps its points.
"""

_INIT = """class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
"""

_PROJECT = (
    "        q = split_heads(self.w_q(query), self.n_heads)\n"
    "        k = split_heads(self.w_k(key), self.n_heads)\n"
    "        v = split_heads(self.w_v(value), self.n_heads)\n"
    "        if mask is not None and mask.dim() == 3:\n"
    "            mask = mask.unsqueeze(1)\n"
)


def _split(body: str) -> str:
    return "def split_heads(x, n_heads):\n    B, T, d_model = x.shape\n    d_k = d_model // n_heads\n" + body


def _merge(body: str) -> str:
    return "def merge_heads(x):\n    B, h, T, d_k = x.shape\n" + body


def _heads(head_0: str, head_1: str, scale: str = "10 * math.sqrt(T)") -> str:
    return (
        "def two_heads(T):\n"
        f"    scale = {scale}\n"
        "    w_q, w_k = torch.zeros(2 * T, 2 * T), torch.zeros(2 * T, 2 * T)\n"
        f"    w_q[:T, :T] = scale * {head_0}\n"
        f"    w_q[T:, :T] = scale * {head_1}\n"
        "    w_k[:T, :T] = torch.eye(T)\n"
        "    w_k[T:, :T] = torch.eye(T)\n"
        "    return w_q, w_k\n"
    )


PREVIOUS = "torch.diag(torch.ones(T - 1), 1)"  # column t has its entry in row t - 1: query t asks for key t - 1
ITSELF = "torch.eye(T)"


WRONG_ROUNDS = [
    {
        "6.1": _split("    return x.reshape(B, n_heads, T, d_k)\n"),  # heads split along the wrong axis
        "6.2": _merge("    return x.reshape(B, T, h * d_k)\n"),  # merged without moving the head axis back
        "6.3": _INIT
        + _PROJECT
        + (  # no W_O
            "        out, weights = attention(q, k, v, mask)\n        return merge_heads(out), weights\n"
        ),
        "6.4": _heads(ITSELF, PREVIOUS),  # the heads swapped
    },
    {
        "6.1": _split("    return x.reshape(B, T, d_k, n_heads).permute(0, 3, 1, 2)\n"),  # every h-th feature per head
        "6.2": _merge("    return x.sum(dim=1)\n"),  # heads summed, not concatenated
        "6.3": _INIT
        + _PROJECT
        + (  # d_model used where d_k belongs
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)\n"
            "        if mask is not None:\n"
            "            scores = scores.masked_fill(~mask, float('-inf'))\n"
            "        weights = torch.softmax(scores, dim=-1)\n"
            "        return self.w_o(merge_heads(weights @ v)), weights\n"
        ),
        "6.4": _heads("torch.diag(torch.ones(T - 1), -1)", ITSELF),  # head 0 attends to the next position
    },
    {
        "6.1": _split("    return x.reshape(B, T, n_heads, d_k)\n"),  # head axis left after the time axis
        "6.2": _merge("    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)\n"),  # heads interleaved
        "6.3": _INIT
        + (  # heads split along the wrong axis inside the layer
            "        B, T_q, T_k, h, d_k = query.shape[0], query.shape[1], key.shape[1], self.n_heads, self.d_k\n"
            "        q = self.w_q(query).reshape(B, h, T_q, d_k)\n"
            "        k = self.w_k(key).reshape(B, h, T_k, d_k)\n"
            "        v = self.w_v(value).reshape(B, h, T_k, d_k)\n"
            "        if mask is not None and mask.dim() == 3:\n"
            "            mask = mask.unsqueeze(1)\n"
            "        out, weights = attention(q, k, v, mask)\n"
            "        return self.w_o(merge_heads(out)), weights\n"
        ),
        "6.4": _heads(PREVIOUS, ITSELF, scale="10.0"),  # near miss: too soft once sqrt(d_k) = sqrt(T) grows
    },
]

# Wrong splitting and merging alone: the correct layer (6.3) and heads (6.4) keep their points, graded with the
# course's split_heads and merge_heads in place of the failed ones (what the notebook's text for 6.3 promises).
WRONG_ROUNDS.append({"6.1": WRONG_ROUNDS[0]["6.1"], "6.2": WRONG_ROUNDS[0]["6.2"]})
