"""One step of learning byte-pair encoding, on words as strings of symbols (chapter 10, exercise 10.1's reference).

``bpe.learn_merges`` learns every merge at once on ids, keeping its pair counts up to date; this is the same step
written plainly, on Sennrich et al.'s format (each word its symbols separated by spaces, with its count), so that
it can be read, checked one merge at a time against ``learn_merges``, and asked for in an exercise.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["merge_pair", "merge_step"]


def merge_step(words: dict[str, int]) -> tuple[tuple[str, str], dict[str, int]]:
    """One step of learning BPE on words written as symbols separated by spaces (Sennrich et al.'s format):
    ``{"l o w": 5, "l o w e r": 2}`` -> (the merged pair, the words after the merge).

    Every adjacent pair of symbols is counted, weighted by its word's count (the two overlapping pairs of
    "a a a" count twice, as in ``learn_merges``); the pair of highest count is merged; on a tie, the smallest
    pair, left symbol first (``learn_merges`` takes the smallest ids, and its base symbols have their ids in the
    order of their characters). In each word the pair's occurrences are replaced left to right without overlap
    ("a a a" becomes "aa a"); two words that become one add their counts."""
    pairs: Counter[tuple[str, str]] = Counter()
    for word, n in words.items():
        symbols = word.split(" ")
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] += n
    if not pairs:
        raise ValueError("no word has two symbols: there is no pair to merge")
    best = min(pairs, key=lambda p: (-pairs[p], p))
    merged: Counter[str] = Counter()
    for word, n in words.items():
        merged[" ".join(merge_pair(word.split(" "), best))] += n
    return best, dict(merged)


def merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """The symbols of one word with each occurrence of ``pair`` glued into one, left to right, without overlap."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2  # both symbols of the pair are used up
        else:
            out.append(symbols[i])
            i += 1
    return out
