"""BLEU built from its parts (chapter 3): clipped n-gram precision, their geometric mean and the brevity penalty.

The course scores translations with sacrebleu (``metrics.corpus_bleu``); this module is the same computation
written out, the reference of exercise 3.5, and agrees with sacrebleu's corpus BLEU (13a tokenisation, no
smoothing) to rounding. It works on text already cut into tokens, so that the tokenisation, which sacrebleu
fixes by a standard, stays apart from the metric.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

__all__ = ["bleu", "bleu_statistics", "closest_reference_length", "ngrams", "tokenize_13a"]

MAX_ORDER = 4


def tokenize_13a(text: str) -> list[str]:
    """sacrebleu's standard ('13a') tokenisation: punctuation split from words, then cut at spaces."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()(text).split()


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """How often each run of n consecutive tokens occurs: ('a', 'b') -> 2, ..."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def closest_reference_length(hypothesis_length: int, reference_lengths: Sequence[int]) -> int:
    """The reference length nearest the hypothesis's; of two equally near, the shorter (as sacrebleu does)."""
    return min(reference_lengths, key=lambda r: (abs(r - hypothesis_length), r))


def _check(hypotheses, references) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} lists of references")
    if not hypotheses:
        raise ValueError("BLEU of an empty corpus is undefined")
    for i, (hypothesis, refs) in enumerate(zip(hypotheses, references)):
        if isinstance(hypothesis, str) or any(isinstance(r, str) for r in refs):
            raise ValueError(
                f"sentence {i}: give token lists, not strings (cut them with tokenize_13a), and a list of references"
            )
        if len(refs) == 0:
            raise ValueError(f"sentence {i} has no reference: every hypothesis needs at least one")


def bleu_statistics(hypotheses, references, max_order: int = MAX_ORDER, clip: bool = True):
    """The corpus's sufficient statistics: matches[n-1] and totals[n-1] for n = 1..max_order, and the
    hypothesis and reference lengths summed over sentences.

    hypotheses: N token lists; references: N lists of token lists (one or more references per sentence).
    """
    _check(hypotheses, references)
    matches, totals = [0] * max_order, [0] * max_order
    hyp_length = ref_length = 0
    for hypothesis, refs in zip(hypotheses, references):
        hyp_length += len(hypothesis)
        ref_length += closest_reference_length(len(hypothesis), [len(r) for r in refs])
        for n in range(1, max_order + 1):
            counts = ngrams(hypothesis, n)
            # An n-gram is credited at most as often as it occurs in any single reference (the clip).
            most: Counter = Counter()
            for r in refs:
                most |= ngrams(r, n)  # Counter union: the maximum of the two counts
            if clip:
                matches[n - 1] += sum(min(c, most[g]) for g, c in counts.items())
            else:
                matches[n - 1] += sum(c for g, c in counts.items() if g in most)
            totals[n - 1] += sum(counts.values())
    return matches, totals, hyp_length, ref_length


def bleu(hypotheses, references, max_order: int = MAX_ORDER) -> float:
    """Corpus BLEU (0-100) of tokenised hypotheses against one or more tokenised references each.

    BLEU = BP * exp(mean over n of log p_n) * 100, where p_n = clipped n-gram matches / hypothesis n-grams,
    summed over the whole corpus before dividing, and BP = exp(1 - r / c) when the hypotheses' total length c
    is below r, the sum of each sentence's closest reference length (1 otherwise). Without smoothing: 0 when
    some order has no match at all.
    """
    matches, totals, c, r = bleu_statistics(hypotheses, references, max_order)
    if c == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_order
    brevity = math.exp(1 - r / c) if c < r else 1.0
    return 100 * brevity * math.exp(log_precision)
