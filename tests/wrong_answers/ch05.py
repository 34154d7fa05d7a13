"""Chapter 5 submissions for the grader tests: plausible wrong answers and hostile cells, as exercise-cell code.

Each chapter has a module like this one; test_grader.py finds WRONG_ROUNDS in every one of them.
"""

_INIT = """class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x, mask=None):
"""


def _sdpa(body: str) -> str:
    return "def scaled_dot_product_attention(q, k, v, mask=None):\n" + body


def _layer(body: str) -> str:
    return _INIT + body


def _mask(body: str) -> str:
    return (
        "def decoder_mask(lengths, t):\n"
        "    keys = torch.arange(t)\n"
        "    real = keys[None, :] < lengths[:, None]  # (B, t)\n"
        "    causal = keys[None, :] <= keys[:, None]  # (t, t)\n" + body
    )


def _bugs(body: str) -> str:
    return (
        "def catch_every_bug(t, d_k):\n"
        "    g = torch.Generator().manual_seed(3)\n"
        "    q, k = torch.randn(t, d_k, generator=g), torch.randn(t, d_k, generator=g)\n" + body
    )


# Each round holds one wrong answer per exercise, so that a round costs one kernel run and shows that
# a mistake in one exercise costs that exercise's points and no other's.
WRONG_ROUNDS = [
    {
        "5.1": "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1)\n",  # no 1/sqrt(d_k)
        "5.2": _mask("    return real[:, None, :] | causal\n"),  # 'or' where both must hold
        # nothing masked: the masking bugs agree with the right answer
        "5.5": _bugs("    return q, k, torch.randn(t, d_k, generator=g), torch.ones(t, t, dtype=torch.bool)\n"),
        "5.3": _sdpa(  # mask ignored
            "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)\n"
            "    return weights @ v, weights\n"
        ),
        "5.4": _layer("        return scaled_dot_product_attention(self.w_k(x), self.w_q(x), self.w_v(x), mask)\n"),
    },
    {
        "5.1": "def attention_scores(q, k):\n    return k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])\n",  # transposed keys
        "5.2": _mask("    return real[:, :, None] & causal\n"),  # padding hides queries (rows), not keys
        # a causal mask but d_v = d_k and moderate scores: the two scalings agree, and nothing overflows
        "5.5": _bugs("    return q, k, torch.randn(t, d_k, generator=g), torch.ones(t, t, dtype=torch.bool).tril()\n"),
        "5.3": _sdpa(  # softmax over the wrong axis
            "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
            "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=-2)\n    return weights @ v, weights\n"
        ),
        "5.4": _layer("        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), x, mask)\n"),
    },
    {
        "5.1": "def attention_scores(q, k):\n    return q @ k.transpose(-2, -1) / q.shape[-1]\n",  # 1/d_k
        "5.2": _mask("    return real[:, None, :].expand(-1, t, t)\n"),  # the future is visible
        # the near miss: d_v != d_k and a huge score, but in every row, so the scaling bugs vanish
        "5.5": _bugs(
            "    v = torch.randn(t, d_k + 1, generator=g)\n"
            "    return 1000 * q, k, v, torch.ones(t, t, dtype=torch.bool).tril()\n"
        ),
        "5.3": _sdpa(  # mask inverted
            "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
            "    if mask is not None:\n        scores = scores.masked_fill(mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights\n"
        ),
        "5.4": _layer(
            "        out, w = scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x))\n        return out, w\n"
        ),
    },
    {
        "5.3": _sdpa(  # mask applied after the softmax
            "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)\n"
            "    if mask is not None:\n        weights = weights * mask\n"
            "    return weights @ v, weights\n"
        ),
    },
    {
        # a query that sees no key: the right attention itself has no answer there, so nothing is caught
        "5.5": _bugs(
            "    v = torch.randn(t, d_k + 1, generator=g)\n"
            "    mask = torch.ones(t, t, dtype=torch.bool).tril()\n"
            "    mask[0] = False\n"
            "    q[-1] = 1000.0\n"
            "    return q, k, v, mask\n"
        ),
        "5.3": _sdpa(  # no 1/sqrt(d_k)
            "    scores = q @ k.transpose(-2, -1)\n"
            "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
            "    weights = torch.softmax(scores, dim=-1)\n    return weights @ v, weights\n"
        ),
    },
]

# Shortcuts that must earn nothing: the reference package, PyTorch's built-in, and a forged probe result.
HOSTILE = {
    "5.1": "from transformer_course.models.attention import attention_scores\n",
    "5.2": (
        "def decoder_mask(lengths, t):\n"
        "    from IPython.display import publish_display_data\n"
        "    publish_display_data({'application/vnd.transformer-course.probe+json': {'nonce': 'guess', 'exercise': '5.2',"
        " 'results': []}})\n"
        "    keys = torch.arange(t)\n"
        "    return (keys[None, None, :] < lengths[:, None, None]) & (keys[None, :] >= keys[:, None])\n"
    ),
    "5.3": (
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
        "    return out, None\n"
    ),
    "5.4": _INIT + '        return check.__globals__["registry"].get("5.4").reference.forward(self, x, mask)\n',
    "5.5": "from transformer_course.exercises.ch05 import catch_every_bug\n",
}

INFINITE_LOOP = "def attention_scores(q, k):\n    while True:\n        pass\n"
KILLS_KERNEL = "import os\nos._exit(1)\n"
