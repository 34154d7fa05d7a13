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

_BLEU = """def bleu(hypotheses, references):
    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for hyp, refs in zip(hypotheses, references):
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda n: (abs(n - len(hyp)), n))
        for n in range(1, 5):
            counts = ngrams(hyp, n)
            most = Counter()
            for x in refs:
                most |= ngrams(x, n)
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
        "3.5": _BLEU  # no clipping: a repeated word is credited every time
        + "            matches[n - 1] += sum(k for g, k in counts.items() if g in most)\n"
        + "            totals[n - 1] += sum(counts.values())\n"
        + "    if min(matches) == 0:\n        return 0.0\n"
        + "    p = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4\n"
        + "    return 100 * math.exp(p) * (math.exp(1 - r / c) if c < r else 1.0)\n",
        # the reference itself: every version of BLEU gives it 100, so nothing is fooled
        "3.6": "def fool_bleu(references):\n    return list(references[0]), list(references[0])\n",
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
        "3.5": _BLEU  # the arithmetic mean of the four precisions
        + "            matches[n - 1] += sum(min(k, most[g]) for g, k in counts.items())\n"
        + "            totals[n - 1] += sum(counts.values())\n"
        + "    p = sum(m / t for m, t in zip(matches, totals)) / 4\n"
        + "    return 100 * p * (math.exp(1 - r / c) if c < r else 1.0)\n",
        # the near miss: the right first trick, but a hypothesis one word short loses little to the penalty
        "3.6": (
            "def fool_bleu(references):\n"
            "    shortest = min(references, key=len)\n"
            "    return list(shortest[:4]) * 5, list(shortest[:-1])\n"
        ),
    },
    {
        "3.5": _BLEU  # the mean of sentence-level scores instead of one corpus score
        + "            matches[n - 1] += sum(min(k, most[g]) for g, k in counts.items())\n"
        + "            totals[n - 1] += sum(counts.values())\n"
        + "    scores = []\n"
        + "    for hyp, refs in zip(hypotheses, references):\n"
        + "        m, t = [0] * 4, [0] * 4\n"
        + "        for n in range(1, 5):\n"
        + "            counts, most = ngrams(hyp, n), Counter()\n"
        + "            for x in refs:\n"
        + "                most |= ngrams(x, n)\n"
        + "            m[n - 1] = sum(min(k, most[g]) for g, k in counts.items())\n"
        + "            t[n - 1] = sum(counts.values())\n"
        + "        rr = min((len(x) for x in refs), key=lambda n: (abs(n - len(hyp)), n))\n"
        + "        if min(m) == 0:\n"
        + "            scores.append(0.0)\n"
        + "            continue\n"
        + "        bp = math.exp(1 - rr / len(hyp)) if len(hyp) < rr else 1.0\n"
        + "        scores.append(100 * bp * math.exp(sum(math.log(a / b) for a, b in zip(m, t)) / 4))\n"
        + "    return sum(scores) / len(scores)\n",
        # one word repeated and a three-word prefix: no 4-gram matches, so every version gives 0
        "3.6": (
            "def fool_bleu(references):\n"
            "    shortest = min(references, key=len)\n"
            "    return [shortest[0]] * 20, list(shortest[:3])\n"
        ),
    },
]
