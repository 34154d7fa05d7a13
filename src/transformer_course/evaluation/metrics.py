"""Evaluation: corpus BLEU through sacrebleu (detokenised text, every reference), and exact-match accuracy."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["bleu_by_length", "char_accuracy", "corpus_bleu", "exact_match", "length_buckets"]


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU (0-100) of detokenised hypotheses, each with one or more detokenised references.

    ``references[i]`` is the list of every reference translation of sentence i; the lists may have
    different lengths (sacrebleu's standard 13a tokenisation is applied to both sides).
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} lists of references")
    if not hypotheses:
        raise ValueError("BLEU of an empty corpus is undefined")
    if any(len(r) == 0 for r in references):
        raise ValueError("every hypothesis needs at least one reference")
    n_refs = max(len(r) for r in references)
    # sacrebleu wants one stream per reference index; None marks a sentence with fewer references.
    streams = [[r[k] if k < len(r) else None for r in references] for k in range(n_refs)]
    return sacrebleu.corpus_bleu(list(hypotheses), streams).score  # type: ignore[arg-type]  # None as said above


def exact_match(predictions: Sequence[str], targets: Sequence[str | Sequence[str]]) -> float:
    """Fraction (0-1) of predictions equal to their target (or to one of their targets)."""
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} predictions but {len(targets)} targets")
    if not predictions:
        raise ValueError("accuracy of an empty set is undefined")
    hits = sum(p == t if isinstance(t, str) else p in t for p, t in zip(predictions, targets))
    return hits / len(predictions)


def length_buckets(lengths: Sequence[int], edges: Sequence[int]) -> list[list[int]]:
    """Indices grouped by length: bucket k holds edges[k] <= length < edges[k+1]."""
    buckets: list[list[int]] = [[] for _ in range(len(edges) - 1)]
    for i, n in enumerate(lengths):
        for k in range(len(edges) - 1):
            if edges[k] <= n < edges[k + 1]:
                buckets[k].append(i)
                break
    return buckets


def bleu_by_length(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    lengths: Sequence[int],
    edges: Sequence[int],
    metric: Callable = corpus_bleu,
) -> list[tuple[int, int, int, float | None]]:
    """(low, high, count, score) for each length bucket; the score is None for an empty bucket."""
    out = []
    for k, idx in enumerate(length_buckets(lengths, edges)):
        score = metric([hypotheses[i] for i in idx], [references[i] for i in idx]) if idx else None
        out.append((edges[k], edges[k + 1], len(idx), score))
    return out


def char_accuracy(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Mean over pairs of the fraction of target characters predicted at the right position (0-1)."""
    if len(predictions) != len(targets) or not targets:
        raise ValueError("need as many predictions as targets, and at least one")
    return sum(sum(a == b for a, b in zip(p, t)) / max(len(t), 1) for p, t in zip(predictions, targets)) / len(targets)
