"""Chapter 10 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points. The cells use
only what the notebook's setup cell imports (math, torch).
"""

_MERGE = "def merge_step(words):\n"
# counts: the pair counts, weighted by the words' counts (the solution's), then `best` chosen
_COUNTS = """    counts = {}
    for word, n in words.items():
        symbols = word.split(" ")
        for pair in zip(symbols, symbols[1:]):
            counts[pair] = counts.get(pair, 0) + n
"""
_BEST = "    best = min(counts, key=lambda pair: (-counts[pair], pair))\n"
# the solution's merge, left to right without overlap; `{step}` is how far the scan moves after a merge
_MERGE_WORDS = """    new_words = {{}}
    for word, n in words.items():
        symbols, out, i = word.split(" "), [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                out.append(symbols[i] + symbols[i + 1])
                i += {step}
            else:
                out.append(symbols[i])
                i += 1
        merged = " ".join(out)
        new_words[merged] = new_words.get(merged, 0) + n
    return best, new_words
"""

_LOSS = "def lm_loss(logits, ids, loss_mask):\n"
_NLL = """    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
    nll = -log_probs.gather(-1, ids[:, 1:, None]).squeeze(-1)
"""

_FILTER = "def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):\n"
_TOP_K = """    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
"""
_SORTED = """    sorted_probs = probs.sort(dim=-1, descending=True).values
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
"""

# The solution's filter after its temperature line: top-k, then the nucleus (answers wrong only before it share it)
_RIGHT_AFTER_TEMPERATURE = (
    _TOP_K
    + "    probs = torch.softmax(logits, dim=-1)\n"
    + "    if top_p is not None and top_p < 1:\n"
    + _SORTED.replace("    ", "        ", 2).replace("\n    before", "\n        before")
    + "        last = (before < top_p - 1e-9).sum(dim=-1, keepdim=True) - 1\n"
    + "        probs = probs.masked_fill(probs < sorted_probs.gather(-1, last), 0.0)\n"
    + "        probs = probs / probs.sum(dim=-1, keepdim=True)\n"
    + "    return probs\n"
)

_BIGRAM = """def bigram_log_probs(sequences, vocab_size, k):
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
"""
_PAIRS = """    for sentence in sequences:
        for a, b in zip(sentence, sentence[1:]):
            counts[a, b] += 1
    smoothed = counts + k
"""

_PPL = "def perplexities(nll_sum, n_tokens, n_words):\n"

_TEMP = "def calibrated_temperature(log_table, valid, max_len):\n"
# the solution's exact NLL of the samples at temperature t; `{scale}` is how the logits meet the temperature
_SAMPLES = """    def samples_nll(t):
        q = torch.softmax(log_table {scale}, dim=-1)
        step = -(q * log_table).sum(dim=-1)
        alive = torch.zeros(len(log_table), dtype=torch.float64)
        alive[1] = 1.0
        total = tokens = 0.0
        for _ in range(max_len):
            total += float(alive @ step)
            tokens += float(alive.sum())
            alive = alive @ q
            alive[2] = 0.0
        return total / tokens

    nll = sum(-log_table[s[:-1], s[1:]].sum().item() for s in map(torch.tensor, valid))
"""
_BISECT = """    low, high = math.log(0.02), math.log(50.0)
    for _ in range(40):
        mid = (low + high) / 2
        if samples_nll(math.exp(mid)) < target:
            low = mid
        else:
            high = mid
    return math.exp((low + high) / 2)
"""
# <eos> left out of the validation sentences' predicted tokens
_NO_EOS = """    kept = [(a, b) for s in valid for a, b in zip(s, s[1:]) if b != 2]
    target = sum(-log_table[a, b].item() for a, b in kept) / len(kept)
"""


def _temp(scale="/ t", count="len(s) - 1", target=None) -> str:
    target = target or f"    target = nll / sum({count} for s in valid)\n"
    return _TEMP + _SAMPLES.format(scale=scale) + target + _BISECT


WRONG_ROUNDS = [
    {
        # each word's pairs counted once, whatever the word's count
        "10.1": _MERGE
        + _COUNTS.replace("counts.get(pair, 0) + n", "counts.get(pair, 0) + 1")
        + _BEST
        + _MERGE_WORDS.format(step=2),
        # the targets not shifted: the output at t asked for the token at t
        "10.2": _LOSS
        + (
            "    log_probs = torch.log_softmax(logits, dim=-1)\n"
            "    nll = -log_probs.gather(-1, ids[..., None]).squeeze(-1)\n"
            "    return nll[loss_mask].mean()\n"
        ),
        # the temperature multiplies the logits
        "10.3": _FILTER + "    logits = logits * temperature\n" + _RIGHT_AFTER_TEMPERATURE,
        # the columns normalised instead of the rows
        "10.4": _BIGRAM + _PAIRS + "    return torch.log(smoothed / smoothed.sum(dim=0, keepdim=True))\n",
        # exp of the total, then divided
        "10.5": _PPL + "    return math.exp(nll_sum) / n_tokens, math.exp(nll_sum) / n_words\n",
        # the model's own temperature: not calibrated at all
        "10.6": _TEMP + "    return 1.0\n",
    },
    {
        # the scan moves on by one after a merge: "a a a" becomes "aa aa a"
        "10.1": _MERGE + _COUNTS + _BEST + _MERGE_WORDS.format(step=1),
        # the loss mask taken unshifted, at the positions of the logits
        "10.2": _LOSS + _NLL + "    return nll[loss_mask[:, :-1]].mean()\n",
        # the token that crosses p left out of the nucleus
        "10.3": _FILTER
        + "    logits = logits / temperature\n"
        + _TOP_K
        + "    probs = torch.softmax(logits, dim=-1)\n"
        + (
            "    if top_p is not None and top_p < 1:\n"
            "        sorted_probs = probs.sort(dim=-1, descending=True).values\n"
            "        within = sorted_probs.cumsum(dim=-1) <= top_p\n"
            "        last = (within.sum(dim=-1, keepdim=True) - 1).clamp(min=0)\n"
            "        probs = probs.masked_fill(probs < sorted_probs.gather(-1, last), 0.0)\n"
            "        probs = probs / probs.sum(dim=-1, keepdim=True)\n"
            "    return probs\n"
        ),
        # the sentences run together: <eos> followed by the next sentence's <bos> counted as a pair
        "10.4": _BIGRAM
        + (
            "    text = [t for sentence in sequences for t in sentence]\n"
            "    for a, b in zip(text, text[1:]):\n"
            "        counts[a, b] += 1\n"
            "    smoothed = counts + k\n"
            "    return torch.log(smoothed / smoothed.sum(dim=1, keepdim=True))\n"
        ),
        # the NLL read as bits
        "10.5": _PPL + "    return 2 ** (nll_sum / n_tokens), 2 ** (nll_sum / n_words)\n",
        # the logits multiplied by the temperature: the answer is 1 / T
        "10.6": _temp(scale="* t"),
    },
    {
        # on a tie, the pair seen first (dict order) wins
        "10.1": _MERGE
        + _COUNTS
        + "    best = max(counts, key=lambda pair: counts[pair])\n"
        + _MERGE_WORDS.format(step=2),
        # each sequence's mean, then their mean
        "10.2": _LOSS
        + _NLL
        + (
            "    counted = loss_mask[:, 1:].to(nll.dtype)\n"
            "    return ((nll * counted).sum(dim=1) / counted.sum(dim=1)).mean()\n"
        ),
        # top-p's kept probabilities not renormalised
        "10.3": _FILTER
        + "    logits = logits / temperature\n"
        + _TOP_K
        + "    probs = torch.softmax(logits, dim=-1)\n"
        + (
            "    if top_p is not None and top_p < 1:\n"
            "        sorted_probs = probs.sort(dim=-1, descending=True).values\n"
            "        before = sorted_probs.cumsum(dim=-1) - sorted_probs\n"
            "        last = (before < top_p - 1e-9).sum(dim=-1, keepdim=True) - 1\n"
            "        probs = probs.masked_fill(probs < sorted_probs.gather(-1, last), 0.0)\n"
            "    return probs\n"
        ),
        # probabilities, not their logarithms
        "10.4": _BIGRAM + _PAIRS + "    return smoothed / smoothed.sum(dim=1, keepdim=True)\n",
        # the exponent inverted: words per token
        "10.5": _PPL
        + "    per_token = math.exp(nll_sum / n_tokens)\n"
        + "    return per_token, per_token ** (n_words / n_tokens)\n",
        # <bos> counted among the predicted tokens of the validation sentences
        "10.6": _temp(count="len(s)"),
    },
    {
        # the pair replaced in the text: ("e", "s") also glues the end of "ne" to "s"
        "10.1": _MERGE
        + _COUNTS
        + _BEST
        + (
            "    new_words = {}\n"
            "    for word, n in words.items():\n"
            "        merged = word.replace(best[0] + ' ' + best[1], best[0] + best[1])\n"
            "        new_words[merged] = new_words.get(merged, 0) + n\n"
            "    return best, new_words\n"
        ),
        # the sum of the losses, not their mean
        "10.2": _LOSS + _NLL + "    return nll[loss_mask[:, 1:]].sum()\n",
        # top-k by topk's indices: exactly k tokens, ties with the k-th dropped
        "10.3": _FILTER
        + "    logits = logits / temperature\n"
        + (
            "    if top_k is not None and top_k < logits.shape[-1]:\n"
            "        index = logits.topk(top_k, dim=-1).indices\n"
            "        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, True)\n"
            "        logits = logits.masked_fill(~keep, -math.inf)\n"
            "    probs = torch.softmax(logits, dim=-1)\n"
            "    if top_p is not None and top_p < 1:\n"
            "        sorted_probs = probs.sort(dim=-1, descending=True).values\n"
            "        before = sorted_probs.cumsum(dim=-1) - sorted_probs\n"
            "        last = (before < top_p - 1e-9).sum(dim=-1, keepdim=True) - 1\n"
            "        probs = probs.masked_fill(probs < sorted_probs.gather(-1, last), 0.0)\n"
            "        probs = probs / probs.sum(dim=-1, keepdim=True)\n"
            "    return probs\n"
        ),
        # k missing from the denominator
        "10.4": _BIGRAM + _PAIRS + "    return torch.log(smoothed / counts.sum(dim=1, keepdim=True).clamp(min=1))\n",
        # a shortcut through the course's reference package: refused
        "10.5": _PPL
        + "    from transformer_course.exercises.ch10 import perplexities as course\n"
        + "    return course(nll_sum, n_tokens, n_words)\n",
        # the prediction of <eos> left out of the validation sentences' NLL
        "10.6": _temp(target=_NO_EOS),
    },
    {
        # right values, but the caller's logits divided in place (issue 57): told so, by the self-check and the grader
        "10.3": _FILTER + "    logits /= temperature\n" + _RIGHT_AFTER_TEMPERATURE,
        # k added to the denominator once, not once per token: c(a) + k instead of c(a) + k V
        "10.4": _BIGRAM + _PAIRS + "    return torch.log(smoothed / (counts.sum(dim=1, keepdim=True) + k))\n",
        # a tie broken on the pair written as one string: ("ab", "c") wins over ("a", "bd")
        "10.1": _MERGE
        + _COUNTS
        + "    best = min(counts, key=lambda pair: (-counts[pair], pair[0] + pair[1]))\n"
        + _MERGE_WORDS.format(step=2),
    },
    {
        # the nucleus kept by sorted position: a token as probable as the last one needed is dropped
        "10.3": _FILTER
        + "    logits = logits / temperature\n"
        + _TOP_K
        + "    probs = torch.softmax(logits, dim=-1)\n"
        + "    if top_p is not None and top_p < 1:\n"
        + "        sorted_probs, order = probs.sort(dim=-1, descending=True)\n"
        + "        needed = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p - 1e-9\n"
        + "        needed[..., 0] = True\n"
        + "        probs = probs * torch.zeros_like(needed).scatter(-1, order, needed)\n"
        + "        probs = probs / probs.sum(dim=-1, keepdim=True)\n"
        + "    return probs\n",
    },
    {
        # top-k without its guard: topk(k) of a row shorter than k raises (the task keeps every token then)
        "10.3": _FILTER
        + "    logits = logits / temperature\n"
        + "    if top_k is not None:\n"
        + "        kth = logits.topk(top_k, dim=-1).values[..., -1:]\n"
        + "        logits = logits.masked_fill(logits < kth, -math.inf)\n"
        + _RIGHT_AFTER_TEMPERATURE.replace(_TOP_K, ""),
    },
]
