"""Chapter 7 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points. A wrong
7.1 fails its check, so the layer of 7.3 is built on the reference table. Chapter 7 has fewer rounds than
exercise 7.4 needs wrong answers, so its third wrong answer has a round of its own.
"""


def _table(angles: str, even: str, odd: str) -> str:
    return (
        "def sinusoidal_encoding(n_positions, d_model):\n"
        "    position = torch.arange(n_positions)[:, None]\n"
        "    two_i = torch.arange(0, d_model, 2)\n"
        f"    angles = {angles}\n"
        "    pe = torch.zeros(n_positions, d_model)\n"
        f"    pe[:, 0::2] = {even}\n"
        f"    pe[:, 1::2] = {odd}\n"
        "    return pe\n"
    )


def _shift(theta: str, upper: str, lower: str) -> str:
    return (
        "def shift_matrix(k, d_model):\n"
        "    two_i = torch.arange(0, d_model, 2)\n"
        f"    theta = {theta}\n"
        "    m = torch.zeros(d_model, d_model)\n"
        "    m[two_i, two_i] = torch.cos(theta)\n"
        f"    m[two_i, two_i + 1] = {upper}\n"
        f"    m[two_i + 1, two_i] = {lower}\n"
        "    m[two_i + 1, two_i + 1] = torch.cos(theta)\n"
        "    return m\n"
    )


def _layer(forward: str) -> str:
    return (
        "class PositionalEncoding(nn.Module):\n"
        "    def __init__(self, d_model, max_len=5000, dropout=0.0):\n"
        "        super().__init__()\n"
        "        self.d_model, self.max_len = d_model, max_len\n"
        "        self.dropout = nn.Dropout(dropout)\n"
        "        self.register_buffer('pe', sinusoidal_encoding(max_len + 1, d_model), persistent=False)\n"
        "\n"
        "    def forward(self, x, offset=0):\n"
        "        T = x.shape[1]\n"
        f"        {forward}\n"
    )


def _sentences(body: str) -> str:
    return (
        "def indistinguishable_sentences(embedding, w_q, w_k, w_v, n):\n"
        "    a = torch.arange(n) % embedding.shape[0]\n"
        f"{body}"
    )


PAPER_ANGLES = "position / 10000 ** (two_i / d_model)"
PAPER_THETA = "k / 10000 ** (two_i / d_model)"

WRONG_ROUNDS = [
    {
        "7.1": _table(PAPER_ANGLES, "torch.cos(angles)", "torch.sin(angles)"),  # sine and cosine swapped
        "7.2": _shift(PAPER_THETA, "torch.sin(theta)", "-torch.sin(theta)"),  # the transpose: a shift by -k
        "7.3": _layer("return self.dropout(x + self.pe[:T])"),  # offset ignored
        # 7.4: one token replaced, so the two sentences hold different words: told apart without positions
        "7.4": _sentences("    b = a.clone()\n    b[0] = (b[0] + 1) % embedding.shape[0]\n    return a, b\n"),
    },
    {
        "7.1": _table("position / 1000 ** (two_i / d_model)", "torch.sin(angles)", "torch.cos(angles)"),  # base 1000
        "7.2": _shift("k / 1000 ** (two_i / d_model)", "-torch.sin(theta)", "torch.sin(theta)"),  # base 1000
        "7.3": _layer("return self.dropout(x + self.pe[offset + 1 : offset + 1 + T])"),  # positions start at 1
        "7.4": _sentences("    return a, a.flip(0)\n"),  # near miss: 0 1 0 reversed is the same sentence
    },
    {
        # ids from 0 to n - 1, whatever the vocabulary: beyond V - 1 when the sentence is longer than it
        "7.4": "def indistinguishable_sentences(embedding, w_q, w_k, w_v, n):\n    a = torch.arange(n)\n"
        "    return a, a.roll(1)\n",
        # right values, but the caller's embeddings changed in place (issue 57): told so, by both checks
        "7.3": _layer("x += self.pe[offset : offset + T]\n        return self.dropout(x)"),
    },
]
