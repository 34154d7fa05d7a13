"""Chapter 10 exercises: one step of learning byte-pair encoding, the language model's loss with shifted targets
and a loss mask, the distribution that temperature, top-k and nucleus sampling draw from, a smoothed bigram
table, perplexities per token and per word, and an experiment: the temperature at which a bigram model's samples
are as probable, to the model, as real sentences.

Exercise 10.1's words are a dict {word: count} with the word's symbols separated by spaces ("l o w": 5), as in
Sennrich et al.'s code: the grader sends inputs and outputs as data, whose dicts have string keys.
Exercise 10.6 is judged: the expected log-likelihood of the samples at the student's temperature is computed
exactly, by dynamic programming over the model's states.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data import bpe_step
from ..decoding import sampling as ref_sampling
from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register, size

NOTEBOOK = "10_language_models.ipynb"
PAD, BOS, EOS = 0, 1, 2


def _differs(a, b) -> bool:
    return registry.compare(a, b, 1e-9, 1e-9) is not None


def _output(mistake, args):
    try:
        return mistake(*args)
    except Exception as exc:  # noqa: BLE001 - a mistake may fail anyhow
        return type(exc).__name__


def _redraw(label: str, draw, reference, mistakes, want=None) -> Case:
    """Draw the arguments until every mistake of ``mistakes`` gives another output than the reference (and
    ``want(args)`` holds): the case then catches those mistakes on every seed."""
    for _ in range(500):
        args = draw()
        expected = reference(*args)
        if (want is None or want(args, expected)) and all(_differs(expected, _output(m, args)) for m in mistakes):
            return Case(label, args)
    raise RuntimeError(f"no case found for {label!r}")  # pragma: no cover - the draws above always find one


# 10.1 one step of learning BPE -------------------------------------------------------------------------------


def _symbols(word: str) -> list[str]:
    return word.split(" ")


_merged = bpe_step.merge_pair  # the reference's own merge of one word


def _pair_counts(words: dict[str, int], weighted: bool = True) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for word, n in words.items():
        s = _symbols(word)
        for pair in zip(s, s[1:]):
            counts[pair] = counts.get(pair, 0) + (n if weighted else 1)
    return counts


def _best(counts: dict[tuple[str, str], int]) -> tuple[str, str]:
    return min(counts, key=lambda p: (-counts[p], p))


def _apply(words: dict[str, int], pair: tuple[str, str], merge=_merged) -> dict[str, int]:
    out: dict[str, int] = {}
    for word, n in words.items():
        new = " ".join(merge(_symbols(word), pair))
        out[new] = out.get(new, 0) + n
    return out


def _merge_unweighted(words):
    pair = _best(_pair_counts(words, weighted=False))
    return pair, _apply(words, pair)


def _merge_overlapping(words):
    # the index moves on by one after a merge, not two: "a a a" becomes "aa aa a", and "x a b" becomes "x ab b"
    def merge(s, pair):
        return [s[i] + s[i + 1] if i + 1 < len(s) and (s[i], s[i + 1]) == pair else s[i] for i in range(len(s))]

    pair = _best(_pair_counts(words))
    return pair, _apply(words, pair, merge)


def _merge_right_to_left(words):
    pair = _best(_pair_counts(words))
    return pair, _apply(words, pair, _right)


def _right(s, pair):
    out, i = [], len(s) - 1
    while i >= 0:
        if i > 0 and (s[i - 1], s[i]) == pair:
            out.insert(0, s[i - 1] + s[i])
            i -= 2
        else:
            out.insert(0, s[i])
            i -= 1
    return out


def _merge_first_only(words):
    def merge(s, pair):
        for i in range(len(s) - 1):
            if (s[i], s[i + 1]) == pair:
                return s[:i] + [s[i] + s[i + 1]] + s[i + 2 :]
        return s

    pair = _best(_pair_counts(words))
    return pair, _apply(words, pair, merge)


def _merge_across_words(words):
    # the words read as one sequence: the last symbol of a word and the first of the next make a pair too
    counts = _pair_counts(words)
    keys = list(words)
    for before, after in zip(keys, keys[1:]):
        pair = (_symbols(before)[-1], _symbols(after)[0])
        counts[pair] = counts.get(pair, 0) + words[after]
    pair = _best(counts)
    return pair, _apply(words, pair)


def _merge_counted_once(words):
    # pairs counted with str.count, which does not count overlapping occurrences: "a a a" holds "a a" once
    counts: dict[tuple[str, str], int] = {}
    for word, n in words.items():
        s = _symbols(word)
        for pair in set(zip(s, s[1:])):
            counts[pair] = counts.get(pair, 0) + n * f" {word} ".count(f" {pair[0]} {pair[1]} ")
    pair = _best(counts)
    return pair, _apply(words, pair)


def _merge_first_seen(words):
    # max over the counts in the order the pairs were first seen (Counter.most_common's tie rule)
    counts = _pair_counts(words)
    pair = max(counts, key=lambda p: counts[p])
    return pair, _apply(words, pair)


def _merge_largest(words):
    counts = _pair_counts(words)
    pair = max(counts, key=lambda p: (counts[p], p))
    return pair, _apply(words, pair)


def _merge_joined(words):
    # a tie broken on the pair written as one string: ("ab", "c") before ("a", "bd"), as "abc" < "abd"
    counts = _pair_counts(words)
    pair = min(counts, key=lambda p: (-counts[p], p[0] + p[1]))
    return pair, _apply(words, pair)


def _merge_replace(words):
    # the text replaced without regard to the symbols' edges: ("e", "s") also merges the end of "ne" with "s"
    pair = _best(_pair_counts(words))
    out: dict[str, int] = {}
    for word, n in words.items():
        new = word.replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1])
        out[new] = out.get(new, 0) + n
    return pair, out


_MERGE_MISTAKES = (
    _merge_unweighted,
    _merge_overlapping,
    _merge_right_to_left,
    _merge_first_only,
    _merge_across_words,
    _merge_counted_once,
    _merge_first_seen,
    _merge_largest,
    _merge_replace,
    _merge_joined,
)

_LETTERS = "abcdeilnorstw"


def _merge_cases(g: torch.Generator) -> list[Case]:
    def letters(n: int) -> str:
        return "".join(_LETTERS[i] for i in torch.randperm(len(_LETTERS), generator=g)[:n].tolist())

    def word(alphabet: str, low: int, high: int) -> list[str]:
        return [alphabet[i] for i in torch.randint(len(alphabet), (size(g, low, high),), generator=g).tolist()]

    def words(n: int, alphabet: str, low: int, high: int, most: int, merges: int = 0) -> dict[str, int]:
        out: dict[str, int] = {}
        while len(out) < n:
            out[" ".join(word(alphabet, low, high))] = size(g, 1, most)
        for _ in range(merges):  # a state in the middle of learning: some symbols of several letters
            out = bpe_step.merge_step(out)[1]
        return out

    def no_collision(args, expected):  # no two words become one: the counts need no adding up
        return len(expected[1]) == len(args[0])

    def own_outputs(args, expected):  # and the mistakes that fail here fail each its own way: its own hint
        wrong = [o for o in (_output(m, args) for m in _MERGE_MISTAKES) if _differs(expected, o)]
        return no_collision(args, expected) and all(_differs(a, b) for i, a in enumerate(wrong) for b in wrong[i + 1 :])

    def redraw(label, draw, mistakes):  # each failing mistake its own output where the draws allow it (they do on
        # the public seed, which the self-check's hints are tested on), else as the case requires
        try:
            return _redraw(label, draw, bpe_step.merge_step, mistakes, own_outputs)
        except RuntimeError:
            return _redraw(label, draw, bpe_step.merge_step, mistakes, no_collision)

    n = size(g, 5, 8)
    general = redraw(
        f"{n} words of 2 to 6 letters, counts 1 to 9",
        lambda: (words(n, letters(size(g, 4, 5)), 2, 6, 9),),
        (_merge_unweighted, _merge_overlapping, _merge_first_only, _merge_across_words),
    )

    def with_run():
        alphabet = letters(size(g, 3, 4))
        w = words(size(g, 3, 5), alphabet, 2, 4, 3)
        w[" ".join(alphabet[0] * size(g, 3, 5))] = size(g, 3, 6)  # "a a a": two overlapping pairs
        return (w,)

    run = _redraw(
        "a word that repeats one letter ('a a a' ...), whose pairs overlap",
        with_run,
        bpe_step.merge_step,
        (_merge_overlapping, _merge_right_to_left, _merge_counted_once),
        no_collision,
    )
    n = size(g, 4, 6)
    tie = redraw(
        f"{n} words; two pairs tie for the highest count",
        lambda: (words(n, letters(4), 2, 4, 4),),
        (_merge_first_seen, _merge_largest),
    )
    n, m = size(g, 6, 9), size(g, 2, 4)
    pieces = _redraw(
        f"{n} words of 3 to 7 letters after {m} merges: some symbols have several letters",
        lambda: (words(n, letters(4), 3, 7, 6, merges=m),),
        bpe_step.merge_step,
        (_merge_replace,),
        no_collision,
    )

    def joined_tie():  # (xy, z) and (x, yw) tie, z < w: the pairs' order and their joined strings' disagree
        x, y, z, w, *rest = letters(8)
        z, w = min(z, w), max(z, w)
        top = size(g, 3, 6)
        out = {f"{x}{y} {z}": top, f"{x} {y}{w}": top}  # the pair seen first is the wrong one too
        out.update(words(size(g, 2, 3), "".join(rest), 2, 4, 1))  # other words, each once
        return (out,)

    joined = _redraw(
        "two pairs of several-letter symbols tie, ('ab', 'c') against ('a', 'bd') ...",
        joined_tie,
        bpe_step.merge_step,
        (_merge_joined,),
        no_collision,
    )
    return [general, run, tie, pieces, joined]


# 10.2 the language model's loss ------------------------------------------------------------------------------


def lm_loss(logits: torch.Tensor, ids: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of predicting ids[:, t + 1] from logits[:, t], over the targets where loss_mask
    (B, T), aligned with ids, is True: ``lm_loss.shift_targets``' targets, as ``next_token_loss`` counts them."""
    targets, counted = ids[:, 1:], loss_mask[:, 1:]  # (B, T - 1): aligned with logits[:, :-1]
    return torch.nn.functional.cross_entropy(logits[:, :-1][counted], targets[counted])


def _ce(logits, targets, counted, reduction="mean"):
    return torch.nn.functional.cross_entropy(logits[counted], targets[counted], reduction=reduction)


def _loss_no_shift(logits, ids, loss_mask):
    return _ce(logits, ids, loss_mask)


def _loss_shift_backwards(logits, ids, loss_mask):
    return _ce(logits[:, 1:], ids[:, :-1], loss_mask[:, :-1])


def _loss_mask_not_shifted(logits, ids, loss_mask):
    return _ce(logits[:, :-1], ids[:, 1:], loss_mask[:, :-1])


def _loss_all_positions(logits, ids, loss_mask):
    per = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    return (per * loss_mask[:, 1:]).sum() / per.numel()


def _loss_sum(logits, ids, loss_mask):
    return _ce(logits[:, :-1], ids[:, 1:], loss_mask[:, 1:], reduction="sum")


def _loss_per_sequence(logits, ids, loss_mask):
    per = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    mask = loss_mask[:, 1:].to(per.dtype)
    return ((per * mask).sum(dim=1) / mask.sum(dim=1)).mean()


def _loss_unmasked(logits, ids, loss_mask):
    return _ce(logits[:, :-1], ids[:, 1:], torch.ones_like(loss_mask[:, 1:]))


_LOSS_MISTAKES = (
    _loss_no_shift,
    _loss_shift_backwards,
    _loss_mask_not_shifted,
    _loss_all_positions,
    _loss_sum,
    _loss_per_sequence,
    _loss_unmasked,
)


def _loss_cases(g: torch.Generator) -> list[Case]:
    def draw(b: int, t: int, v: int, prompt: bool, padding: bool):
        ids = torch.randint(3, v, (b, t), generator=g)
        ids[:, 0] = BOS
        mask = torch.ones(b, t, dtype=torch.bool)
        for row in range(b):
            end = size(g, max(t - 3, 3), t) if padding else t  # real tokens 0 .. end - 1, then <pad>
            start = size(g, 1, max(end - 2, 1)) if prompt else 1  # the first target that counts
            ids[row, end - 1] = EOS
            ids[row, end:] = PAD
            mask[row, :start] = False
            mask[row, end:] = False
        return randn(g, b, t, v, scale=2.0), ids, mask

    def case(label, b, t, v, prompt, padding, mistakes):
        return _redraw(label, lambda: draw(b, t, v, prompt, padding), lm_loss, mistakes)

    b, t, v = size(g, 3, 4), size(g, 7, 10), size(g, 6, 11)
    translation = case(
        f"B = {b}, T = {t}, V = {v}: a prompt that does not count, then targets, then padding",
        b, t, v, True, True, _LOSS_MISTAKES,
    )  # fmt: skip
    b, t, v = size(g, 2, 3), size(g, 5, 8), size(g, 6, 11)
    plain = case(f"B = {b}, T = {t}, V = {v}: every target counts", b, t, v, False, False, _LOSS_MISTAKES[:2])
    b, t, v = size(g, 2, 4), size(g, 6, 9), size(g, 6, 11)
    padded = case(f"B = {b}, T = {t}, V = {v}: padding at the end of the rows", b, t, v, False, True, ())
    return [translation, plain, padded]


# 10.3 temperature, top-k and nucleus sampling ----------------------------------------------------------------


def _filter_temperature_multiplies(logits, temperature, top_k, top_p):
    return ref_sampling.filter_logits(logits * temperature**2, temperature, top_k, top_p)


def _filter_crossing_excluded(logits, temperature, top_k, top_p):
    # nucleus: only tokens whose mass, themselves included, stays within p (and the most probable one)
    probs = ref_sampling.filter_logits(logits, temperature, top_k, None)
    if top_p is None:
        return probs
    sorted_probs = probs.sort(dim=-1, descending=True).values
    within = sorted_probs.cumsum(dim=-1) <= top_p + 1e-9
    within[..., 0] = True
    threshold = sorted_probs.gather(-1, within.sum(dim=-1, keepdim=True) - 1)
    probs = probs.masked_fill(probs < threshold, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


def _filter_not_renormalised(logits, temperature, top_k, top_p):
    probs = ref_sampling.filter_logits(logits, temperature, top_k, None)
    kept = ref_sampling.filter_logits(logits, temperature, top_k, top_p) > 0
    return probs * kept


def _filter_unsorted(logits, temperature, top_k, top_p):
    # the running mass taken in the vocabulary's order, not from the most probable token down
    probs = ref_sampling.filter_logits(logits, temperature, top_k, None)
    if top_p is None:
        return probs
    before = probs.cumsum(dim=-1) - probs
    probs = probs.masked_fill(before >= top_p - 1e-9, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


def _filter_logits_returned(logits, temperature, top_k, top_p):
    probs = ref_sampling.filter_logits(logits, temperature, top_k, top_p)
    return (logits / temperature).masked_fill(probs == 0, -math.inf)


def _filter_ties_dropped(logits, temperature, top_k, top_p):
    # top-k by the indices that topk returns: exactly k tokens, a token tied with the k-th left out
    scaled = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, scaled.topk(top_k, dim=-1).indices, True)
        scaled = scaled.masked_fill(~keep, -math.inf)
    return ref_sampling.filter_logits(scaled, 1.0, None, top_p)


def _filter_nucleus_ties_dropped(logits, temperature, top_k, top_p):
    # the nucleus by sorted position: exactly the tokens needed, a token as probable as the last one left out
    probs = ref_sampling.filter_logits(logits, temperature, top_k, None)
    if top_p is None:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    needed = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p - 1e-9
    needed[..., 0] = True
    probs = probs * torch.zeros_like(needed).scatter(-1, order, needed)
    return probs / probs.sum(dim=-1, keepdim=True)


def _filter_p_before_k(logits, temperature, top_k, top_p):
    probs = ref_sampling.filter_logits(logits, temperature, None, top_p)
    return ref_sampling.filter_logits(probs.log(), 1.0, top_k, None)


_FILTER_MISTAKES = (
    _filter_temperature_multiplies,
    _filter_crossing_excluded,
    _filter_not_renormalised,
    _filter_unsorted,
    _filter_logits_returned,
    _filter_ties_dropped,
    _filter_p_before_k,
    _filter_nucleus_ties_dropped,
)


def _filter_cases(g: torch.Generator) -> list[Case]:
    def tied(b: int, v: int):  # logits on a coarse grid: ties everywhere, the k-th tied with its neighbour
        return torch.randint(-4, 4, (b, v), generator=g).to(torch.float64) * 0.5

    b, v = size(g, 2, 4), size(g, 8, 12)
    general = _redraw(
        f"B = {b} rows, V = {v}: temperature 0.8, top_k = 5, top_p = 0.7",
        lambda: (randn(g, b, v, scale=1.5), 0.8, 5, 0.7),
        ref_sampling.filter_logits,
        tuple(m for m in _FILTER_MISTAKES if m not in (_filter_ties_dropped, _filter_nucleus_ties_dropped)),
    )
    b, v = size(g, 2, 3), size(g, 6, 10)
    ties = _redraw(
        f"B = {b} rows, V = {v}, logits with ties: temperature 1.5, top_k = 3, top_p = 0.9",
        lambda: (tied(b, v), 1.5, 3, 0.9),
        ref_sampling.filter_logits,
        (_filter_ties_dropped,),
    )
    v = size(g, 6, 10)

    def exact():  # probabilities 1/2, 1/4, 1/8, ...: the first two reach p = 0.75 exactly
        probs = torch.tensor([2.0**-i for i in range(1, v)] + [2.0 ** -(v - 1)], dtype=torch.float64)
        rows = torch.stack([probs[torch.randperm(v, generator=g)] for _ in range(2)])
        return rows.log() + randn(g, 2, 1), 1.0, None, 0.75

    reached = _redraw(
        f"B = 2 rows, V = {v}: probabilities 1/2, 1/4, 1/8, ...; top_p = 0.75 is reached exactly by two tokens",
        exact,
        ref_sampling.filter_logits,
        (_filter_unsorted,),
    )
    a, b, v = size(g, 2, 3), size(g, 2, 3), size(g, 6, 12)
    temperature = _redraw(
        f"logits of shape ({a}, {b}, {v}): temperature 0.5 only (top_k and top_p None)",
        lambda: (randn(g, a, b, v), 0.5, None, None),
        ref_sampling.filter_logits,
        (_filter_temperature_multiplies,),
    )
    b, v = size(g, 2, 3), size(g, 6, 10)
    edge = _redraw(
        f"B = {b} rows, V = {v}, logits with ties: top_p = 0.6 ends on a token tied with the next",
        lambda: (tied(b, v), 1.0, None, 0.6),
        ref_sampling.filter_logits,
        (_filter_nucleus_ties_dropped,),
    )
    b, v = size(g, 2, 3), size(g, 4, 8)
    every = Case(
        f"B = {b} rows, V = {v}: top_k = {v + 2}, more than V: every token stays", (randn(g, b, v), 1.2, v + 2, None)
    )
    return [general, ties, reached, temperature, edge, every]


# 10.4 a smoothed bigram table --------------------------------------------------------------------------------


def bigram_log_probs(sequences: list[list[int]], vocab_size: int, k: float) -> torch.Tensor:
    """(V, V) float64, row a: log P(b | a) = log (c(a, b) + k) / (c(a) + k V), with c(a, b) the transitions
    a -> b within each sentence and c(a) the transitions out of a: ``lm_baselines.BigramLM``'s table."""
    pairs = [pair for s in sequences for pair in zip(s, s[1:])]  # every transition, sentence by sentence
    a, b = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T  # (N,) each
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    # at once, not pair by pair: the chapter fits it on a million pairs (where a failed 10.4 falls back on it)
    counts.index_put_((a, b), torch.ones(len(a), dtype=torch.float64), accumulate=True)
    smoothed = counts + k
    return (smoothed / smoothed.sum(dim=1, keepdim=True)).log()


def _counts(sequences, vocab_size):
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    for s in sequences:
        for a, b in zip(s, s[1:]):
            counts[a, b] += 1
    return counts


def _bigram_columns(sequences, vocab_size, k):
    smoothed = _counts(sequences, vocab_size) + k
    return (smoothed / smoothed.sum(dim=0, keepdim=True)).log()


def _bigram_k_missing(sequences, vocab_size, k):
    counts = _counts(sequences, vocab_size)
    return ((counts + k) / counts.sum(dim=1, keepdim=True).clamp(min=1)).log()


def _bigram_k_once(sequences, vocab_size, k):
    # k added once to the denominator, as to each count: c(a) + k, not c(a) + k V
    counts = _counts(sequences, vocab_size)
    return ((counts + k) / (counts.sum(dim=1, keepdim=True) + k)).log()


def _bigram_across(sequences, vocab_size, k):
    joined = [t for s in sequences for t in s]
    return bigram_log_probs([joined], vocab_size, k)


def _bigram_probabilities(sequences, vocab_size, k):
    return bigram_log_probs(sequences, vocab_size, k).exp()


def _bigram_unigram_counts(sequences, vocab_size, k):
    # c(a) counted as every occurrence of a, the last token of each sentence (<eos>) included
    unigrams = torch.zeros(vocab_size, dtype=torch.float64)
    for s in sequences:
        for t in s:
            unigrams[t] += 1
    return ((_counts(sequences, vocab_size) + k) / (unigrams[:, None] + k * vocab_size)).log()


_BIGRAM_MISTAKES = (
    _bigram_columns,
    _bigram_k_missing,
    _bigram_k_once,
    _bigram_across,
    _bigram_probabilities,
    _bigram_unigram_counts,
)


def _bigram_cases(g: torch.Generator) -> list[Case]:
    def sentences(n: int, v: int, longest: int) -> list[list[int]]:
        return [[BOS] + torch.randint(3, v, (size(g, 1, longest),), generator=g).tolist() + [EOS] for _ in range(n)]

    def case(k: float):
        n, v = size(g, 4, 10), size(g, 6, 12)
        return _redraw(
            f"{n} sentences of 1 to 6 words, V = {v}, k = {k}",
            lambda: (sentences(n, v, 6), v, k),
            bigram_log_probs,
            _BIGRAM_MISTAKES,
        )

    return [case(1.0), case(0.5), case(0.1)]


# 10.5 perplexity per token and per word ----------------------------------------------------------------------


def perplexities(nll_sum: float, n_tokens: int, n_words: int) -> tuple[float, float]:
    """(exp(nll_sum / n_tokens), exp(nll_sum / n_words)): nll_sum in nats, the total over the predicted tokens."""
    return math.exp(nll_sum / n_tokens), math.exp(nll_sum / n_words)


def _ppl_exp_sum(nll_sum, n_tokens, n_words):
    return math.exp(nll_sum) / n_tokens, math.exp(nll_sum) / n_words


def _ppl_base_two(nll_sum, n_tokens, n_words):
    return 2 ** (nll_sum / n_tokens), 2 ** (nll_sum / n_words)


def _ppl_words_by_tokens(nll_sum, n_tokens, n_words):
    return math.exp(nll_sum / n_tokens), math.exp(nll_sum / n_tokens)


def _ppl_ratio_inverted(nll_sum, n_tokens, n_words):
    per_token = math.exp(nll_sum / n_tokens)
    return per_token, per_token ** (n_words / n_tokens)


def _ppl_multiplied(nll_sum, n_tokens, n_words):
    per_token = math.exp(nll_sum / n_tokens)
    return per_token, per_token * n_tokens / n_words


def _ppl_no_exp(nll_sum, n_tokens, n_words):
    return nll_sum / n_tokens, nll_sum / n_words


_PPL_MISTAKES = (_ppl_exp_sum, _ppl_base_two, _ppl_words_by_tokens, _ppl_ratio_inverted, _ppl_multiplied, _ppl_no_exp)


def _ppl_cases(g: torch.Generator) -> list[Case]:
    def draw(low: int, high: int):
        n_tokens = size(g, low, high)
        n_words = max(1, round(n_tokens / (1.1 + 0.7 * float(torch.rand(1, generator=g)))))
        nll = n_tokens * (1.5 + 3 * float(torch.rand(1, generator=g)))
        return nll, n_tokens, n_words

    short = _redraw("a short text: 8 to 15 tokens", lambda: draw(8, 15), perplexities, _PPL_MISTAKES)
    n = size(g, 2000, 9000)
    return [
        short,
        _redraw(f"a corpus of about {n} tokens", lambda: draw(n, n + 50), perplexities, _PPL_MISTAKES[1:]),
        Case("as many words as tokens", (30.0, 20, 20)),
    ]


# 10.6 an experiment: the temperature whose samples are as probable as real sentences -------------------------

TOLERANCE = 0.05  # nats per token: how far the samples' NLL may be from the validation sentences'
_MARGIN = 0.1  # nats: the known mistakes a case is drawn for miss the target by at least this
_T_LOW, _T_HIGH = 0.02, 50.0  # the bisection's bracket


def sample_nll(log_table: torch.Tensor, temperature: float, max_len: int, tempered: bool = False) -> float:
    """The mean negative log-likelihood per token, under the model at temperature 1 (``log_table``), of the
    sentences sampled at ``temperature`` from <bos> until <eos> or ``max_len`` tokens: E[total NLL] / E[tokens],
    exactly, by dynamic programming over the distribution of the last token. With ``tempered``, the NLL is
    measured under the tempered model instead (a known mistake's). In NumPy: tiny arrays, many steps."""
    table = log_table.detach().double().cpu().numpy()
    scaled = table / temperature
    scaled = scaled - scaled.max(axis=-1, keepdims=True)
    log_q = scaled - np.log(np.exp(scaled).sum(axis=-1, keepdims=True))  # (V, V): the sampler's rows, as logs
    q = np.exp(log_q)
    scored = log_q if tempered else table
    step = -np.where(q > 0, q * scored, 0.0).sum(axis=-1)  # (V,): expected NLL of the next token after a
    alive = np.zeros(log_q.shape[0])  # P(the sentence goes on after t tokens, its last token a)
    alive[BOS] = 1.0
    total = tokens = 0.0
    for _ in range(max_len):
        total += float(alive @ step)
        tokens += float(alive.sum())
        alive = alive @ q
        alive[EOS] = 0.0
    return total / tokens


def validation_nll(log_table: torch.Tensor, valid: list[list[int]]) -> float:
    """The validation sentences' mean negative log-likelihood per predicted token (<eos> predicted, <bos> not)."""
    total = sum(-float(log_table[s[:-1], s[1:]].sum()) for s in map(torch.tensor, valid))
    return total / sum(len(s) - 1 for s in valid)


def _bisect(fun, target: float) -> float:
    """The temperature in [_T_LOW, _T_HIGH] at which the increasing ``fun`` reaches ``target``, on log T."""
    low, high = math.log(_T_LOW), math.log(_T_HIGH)
    for _ in range(45):  # the bracket's width in log T, 7.8, halved 45 times: far below any tolerance
        mid = (low + high) / 2
        low, high = (mid, high) if fun(math.exp(mid)) < target else (low, mid)
    return math.exp((low + high) / 2)


def calibrated_temperature(log_table: torch.Tensor, valid: list[list[int]], max_len: int) -> float:
    """The temperature at which the samples' NLL per token under the model equals the validation sentences':
    bisection on the exact ``sample_nll``, which grows with the temperature (the samples stray from the model's
    favourite tokens). Sampling a few thousand sentences per temperature and bisecting on that estimate works too."""
    target = validation_nll(log_table, valid)
    return _bisect(lambda t: sample_nll(log_table, t, max_len), target)


def _temp_one(log_table, valid, max_len):
    return 1.0


def _temp_tempered(log_table, valid, max_len):
    target = validation_nll(log_table, valid)
    return _bisect(lambda t: sample_nll(log_table, t, max_len, tempered=True), target)


def _temp_bos_counted(log_table, valid, max_len):
    total = validation_nll(log_table, valid) * sum(len(s) - 1 for s in valid)
    return _bisect(lambda t: sample_nll(log_table, t, max_len), total / sum(len(s) for s in valid))


def _temp_eos_left_out(log_table, valid, max_len):
    kept = [(a, b) for s in valid for a, b in zip(s, s[1:]) if b != EOS]
    target = sum(-float(log_table[a, b]) for a, b in kept) / len(kept)
    return _bisect(lambda t: sample_nll(log_table, t, max_len), target)


def _temp_per_sentence(log_table, valid, max_len):
    target = sum(validation_nll(log_table, [s]) for s in valid) / len(valid)
    return _bisect(lambda t: sample_nll(log_table, t, max_len), target)


def _temp_inverted(log_table, valid, max_len):
    return 1 / calibrated_temperature(log_table, valid, max_len)


_TEMP_MISTAKES = (_temp_one, _temp_tempered, _temp_bos_counted, _temp_eos_left_out, _temp_per_sentence, _temp_inverted)


def _sentences(g: torch.Generator, log_table: torch.Tensor, n: int, max_len: int) -> list[list[int]] | None:
    """n sentences sampled from the table, each <bos> ... <eos> of at most max_len tokens after <bos> (longer
    ones are drawn again), all rows at once."""
    out: list[list[int]] = []
    for _ in range(10):
        rows, probs = torch.full((4 * n, 1), BOS, dtype=torch.long), log_table.exp()
        for _ in range(max_len):
            rows = torch.cat([rows, torch.multinomial(probs[rows[:, -1]], 1, generator=g)], dim=1)
        for row in rows.tolist():
            if EOS in row:
                out.append(row[: row.index(EOS) + 1])
                if len(out) == n:
                    return out
    return None


def _reachable(log_table, valid, max_len) -> bool:
    """The target lies well inside the samples' range of NLL, above its value at the bracket's low end, where
    one root only can be: the NLL first dips (near-greedy samples that run long are not the most probable per
    token), then grows with T; it must grow on the whole grid from its lowest point."""
    grid = [sample_nll(log_table, math.exp(x), max_len) for x in torch.linspace(-3.9, 3.9, 40).tolist()]
    lowest = grid.index(min(grid))
    target = validation_nll(log_table, valid)
    increasing = all(b > a for a, b in zip(grid[lowest:], grid[lowest + 1 :]))
    return increasing and grid[0] + 0.2 < target < grid[-1] - 0.2


def _temp_case(
    g: torch.Generator, label: str, vocab: int, max_len: int, sharpen: tuple[float, float], mistakes: tuple
) -> Case:
    """Draw a model and validation sentences from another table (the model's, sharpened or flattened, and
    perturbed) until the answer exists and each of ``mistakes`` misses it by _MARGIN."""
    for _ in range(200):
        raw = randn(g, vocab, vocab, scale=1.5)
        raw[:, EOS] += 1.0 + float(torch.rand(1, generator=g))  # sentences end
        raw[:, BOS] -= 4.0  # <bos> rarely follows anything
        raw[:, PAD] -= 4.0
        log_table = torch.log_softmax(raw, dim=-1)
        power = sharpen[0] + (sharpen[1] - sharpen[0]) * float(torch.rand(1, generator=g))
        truth = torch.log_softmax(raw * power + randn(g, vocab, vocab, scale=0.3), dim=-1)
        valid = _sentences(g, truth, size(g, 150, 250), max_len)
        if valid is None or not _reachable(log_table, valid, max_len):
            continue
        args = (log_table, valid, max_len)
        target = validation_nll(log_table, valid)
        if all(abs(sample_nll(log_table, m(*args), max_len) - target) > _MARGIN for m in mistakes):
            return Case(label, args)
    raise RuntimeError(f"no case found for {label!r}")  # pragma: no cover - the draws above always find one


def _temp_cases(g: torch.Generator) -> list[Case]:
    # The first case catches every known mistake; the second asks for a temperature below 1, the third for one
    # a little above.
    v, n = size(g, 25, 40), size(g, 25, 40)
    label = f"V = {v}, at most {n} tokens; the real sentences are more random than the model's"
    flatter = _temp_case(g, label, v, n, (0.5, 0.7), _TEMP_MISTAKES)
    v, n = size(g, 12, 20), size(g, 20, 30)
    label = f"V = {v}, at most {n} tokens; the real sentences are less random than the model's"
    sharper = _temp_case(g, label, v, n, (1.2, 1.6), (_temp_one, _temp_inverted))
    v, n = size(g, 15, 25), size(g, 20, 30)
    label = f"V = {v}, at most {n} tokens; the real sentences are a little more random than the model's"
    near = _temp_case(g, label, v, n, (0.8, 0.9), (_temp_inverted,))
    return [flatter, sharper, near]


def _judge_temperature(case: Case, answer) -> str | None:
    log_table, valid, max_len = case.args
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            return f"the answer should be one number (a float), got {registry.describe(answer)}"
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return f"the answer should be a temperature, a float > 0, got {registry.describe(answer)}"
    temperature = float(answer)
    if not math.isfinite(temperature) or temperature <= 0:
        return f"the temperature must be a finite number > 0, got {temperature!r}"
    samples, target = sample_nll(log_table, temperature, max_len), validation_nll(log_table, valid)
    if not math.isfinite(samples):
        return f"at T = {temperature:.4g} the samples' NLL per token cannot be computed (got {samples}); try another T"
    if abs(samples - target) > TOLERANCE:
        side = "more" if samples < target else "less"
        return (
            f"at T = {temperature:.4g} the samples' NLL per token under the model is {samples:.3f} nats, the "
            f"validation sentences' {target:.3f}: a difference of {abs(samples - target):.3f} nats, more than "
            f"{TOLERANCE:g} (the samples are {side} probable than real sentences)"
        )
    return None


register(
    Exercise(
        id="10.1",
        title="one step of learning BPE",
        idea=(
            "count how often each pair of neighbouring symbols occurs in the corpus, each word as often as it "
            "occurs; glue the most frequent pair into one symbol wherever it stands, left to right."
        ),
        points=3,
        name="merge_step",
        kind="function",
        parts={(0,): "the merged pair", (1,): "the new words"},
        reference=bpe_step.merge_step,
        make_cases=_merge_cases,
        mistakes=(
            Mistake(
                "each word's pairs are counted once: weight them by the word's count, the number of times the "
                "word occurs in the corpus.",
                _merge_unweighted,
            ),
            Mistake(
                "after a merge the scan moves on by one symbol, so the second symbol of the merged pair is kept "
                "(or merged again): skip both symbols of a merged pair, 'a a a' becomes 'aa a'.",
                _merge_overlapping,
            ),
            Mistake(
                "the occurrences are merged from the right: 'a a a' becomes 'a aa'; merge left to right, as "
                "the learner and the encoder do.",
                _merge_right_to_left,
            ),
            Mistake(
                "only the first occurrence of the pair in each word is merged: merge every one, left to right.",
                _merge_first_only,
            ),
            Mistake(
                "pairs are counted across words: the last symbol of one word and the first of the next are not "
                "neighbours; count pairs within each word only.",
                _merge_across_words,
            ),
            Mistake(
                "overlapping occurrences are counted once (as str.count does): 'a a a' holds the pair (a, a) "
                "twice, at positions 0 and 1; count every adjacent pair.",
                _merge_counted_once,
            ),
            Mistake(
                "on a tie the pair seen first wins: take the smallest pair (compare the left symbols, then the "
                "right ones), whatever the order of the words.",
                _merge_first_seen,
            ),
            Mistake(
                "on a tie the largest pair wins: take the smallest pair, left symbol first.",
                _merge_largest,
            ),
            Mistake(
                "on a tie the pairs are compared as joined strings ('ab' + 'c' against 'a' + 'bd'): compare them "
                "as pairs, the left symbols first, then the right ones.",
                _merge_joined,
            ),
            Mistake(
                "the pair is replaced in the word's text without regard to the symbols' edges: with the pair "
                "(e, s), 'ne s' must stay as it is (its symbol is 'ne', not 'e'). Compare whole symbols.",
                _merge_replace,
            ),
        ),
    ),
    Exercise(
        id="10.2",
        title="the language model's loss",
        idea=(
            "the output at position t predicts the token at position t + 1; the targets that count are those the "
            "loss mask marks, and the loss is their average."
        ),
        points=3,
        name="lm_loss",
        kind="function",
        reference=lm_loss,
        make_cases=_loss_cases,
        mistakes=(
            Mistake(
                "the targets are not shifted: the output at position t predicts the token at t + 1, so pair the "
                "logits of positions 0 .. T - 2 with the ids of positions 1 .. T - 1.",
                _loss_no_shift,
            ),
            Mistake(
                "the shift goes the wrong way: the logits of position t + 1 are asked for the token at t; the "
                "logits of position t predict the token at t + 1.",
                _loss_shift_backwards,
            ),
            Mistake(
                "the loss mask is not shifted with the targets: it is aligned with ids, so the target at t + 1 "
                "counts where the mask at t + 1 is True.",
                _loss_mask_not_shifted,
            ),
            Mistake(
                "the masked-out positions are averaged in (as zeros): divide by the number of targets that count.",
                _loss_all_positions,
            ),
            Mistake("this is the sum of the losses: return their mean over the targets that count.", _loss_sum),
            Mistake(
                "this averages each sequence's mean: every counted target weighs the same, so divide the total "
                "by the number of counted targets of the whole batch.",
                _loss_per_sequence,
            ),
            Mistake("the loss mask is ignored: only the targets it marks count.", _loss_unmasked),
        ),
        atol=1e-10,
        rtol=1e-10,
    ),
    Exercise(
        id="10.3",
        title="temperature, top-k and nucleus sampling",
        idea=(
            "divide the logits by the temperature; keep the k best tokens and their ties; of those, keep the most "
            "probable until their mass reaches p, the token that reaches it included; renormalise what is kept."
        ),
        points=4,
        name="filter_logits",
        kind="function",
        reference=ref_sampling.filter_logits,
        make_cases=_filter_cases,
        mistakes=(
            Mistake(
                "the logits are multiplied by the temperature: divide them, so that a temperature below 1 "
                "sharpens the distribution.",
                _filter_temperature_multiplies,
            ),
            Mistake(
                "the token whose mass crosses p is left out: the nucleus is the smallest set whose mass reaches p, "
                "so keep a token while the mass of the tokens before it is below p.",
                _filter_crossing_excluded,
            ),
            Mistake("the kept probabilities are not renormalised: they must sum to 1.", _filter_not_renormalised),
            Mistake(
                "the running mass is taken in the vocabulary's order: sort the probabilities, most probable first.",
                _filter_unsorted,
            ),
            Mistake(
                "this returns (filtered) logits: return the probabilities that are sampled from, zero for the "
                "tokens filtered out.",
                _filter_logits_returned,
            ),
            Mistake(
                "exactly k tokens are kept: every token whose logit equals the k-th largest stays too.",
                _filter_ties_dropped,
            ),
            Mistake(
                "a token exactly as probable as the last one the nucleus needs is left out: keep every token at "
                "least as probable as that one, as top-k keeps the ties with the k-th.",
                _filter_nucleus_ties_dropped,
            ),
            Mistake(
                "the nucleus is taken before top-k: apply the temperature, then top-k, then top-p on what is left "
                "(renormalised).",
                _filter_p_before_k,
            ),
        ),
        atol=1e-10,
        rtol=1e-10,
    ),
    Exercise(
        id="10.4",
        title="a bigram model with add-k smoothing",
        idea=(
            "count how often each token follows each other token within a sentence; a row's probabilities are its "
            "counts plus k, divided by the row's total plus k for every token of the vocabulary."
        ),
        points=2,
        name="bigram_log_probs",
        kind="function",
        reference=bigram_log_probs,
        make_cases=_bigram_cases,
        mistakes=(
            Mistake(
                "the columns are normalised: row a is the distribution of the next token after a, so each row "
                "must sum to 1 (as probabilities).",
                _bigram_columns,
            ),
            Mistake(
                "k is missing from the denominator: add k once for each of the V tokens, c(a) + k V.",
                _bigram_k_missing,
            ),
            Mistake(
                "k is added to the denominator once: it was added to each of the row's V counts, so the row's "
                "total is c(a) + k V, and each row must sum to 1.",
                _bigram_k_once,
            ),
            Mistake(
                "pairs are counted across sentences (<eos> followed by the next <bos>): count within each "
                "sentence only.",
                _bigram_across,
            ),
            Mistake("the table holds probabilities: return their natural logarithms.", _bigram_probabilities),
            Mistake(
                "c(a) counts every occurrence of a, the last token of a sentence included: count only the pairs "
                "that start with a, so that each row sums to 1.",
                _bigram_unigram_counts,
            ),
        ),
        atol=1e-10,
        rtol=1e-10,
    ),
    Exercise(
        id="10.5",
        title="perplexity per token and per word",
        idea=(
            "perplexity is the exponential of the mean negative log-likelihood; per token the total is divided by "
            "the tokens, per word by the words, so that models with different tokenizers can be compared."
        ),
        points=2,
        name="perplexities",
        kind="function",
        reference=perplexities,
        make_cases=_ppl_cases,
        parts={(0,): "the perplexity per token", (1,): "the perplexity per word"},
        mistakes=(
            Mistake("exp of the total, then divided: take exp of the mean, the total divided first.", _ppl_exp_sum),
            Mistake(
                "2 ** (mean NLL) reads the NLL as bits: it is in nats (natural logarithms), so take exp.",
                _ppl_base_two,
            ),
            Mistake("the per-word perplexity divides the total by the words, not by the tokens.", _ppl_words_by_tokens),
            Mistake(
                "the exponent is inverted: per word = (per token) ** (tokens per word), tokens / words, not "
                "words / tokens.",
                _ppl_ratio_inverted,
            ),
            Mistake(
                "the per-word perplexity is a power of the per-token one, not a multiple: "
                "(per token) ** (tokens / words).",
                _ppl_multiplied,
            ),
            Mistake("these are mean NLLs: a perplexity is their exponential.", _ppl_no_exp),
        ),
        atol=1e-9,
        rtol=1e-9,
    ),
    Exercise(
        id="10.6",
        title="a temperature as probable as real sentences",
        idea=(
            "the samples' negative log-likelihood per token, measured by the model at temperature 1, grows with "
            "the temperature; find the temperature where it equals that of the validation sentences."
        ),
        points=3,
        name="calibrated_temperature",
        kind="function",
        reference=calibrated_temperature,
        make_cases=_temp_cases,
        judge=_judge_temperature,
        mistakes=(
            Mistake(
                "T = 1 samples the model as it is, but the model is not the source of the validation sentences: "
                "measure the samples' NLL at several temperatures and find where it meets the validation NLL.",
                _temp_one,
            ),
            Mistake(
                "the samples are scored by the tempered model: score them (and the validation sentences) with the "
                "model at temperature 1, log_table itself.",
                _temp_tempered,
            ),
            Mistake(
                "<bos> is counted as a predicted token: a sentence of n tokens after <bos> has n predictions.",
                _temp_bos_counted,
            ),
            Mistake(
                "the prediction of <eos> is left out: it is a predicted token, in the validation sentences as in "
                "the samples.",
                _temp_eos_left_out,
            ),
            Mistake(
                "this averages each sentence's mean: the mean per token is the total NLL divided by the total "
                "number of predicted tokens.",
                _temp_per_sentence,
            ),
            Mistake(
                "the temperature is inverted: the logits are divided by T (multiplying them by T gives 1 / T's "
                "samples).",
                _temp_inverted,
            ),
        ),
        atol=1e-3,
        rtol=1e-3,
    ),
)
