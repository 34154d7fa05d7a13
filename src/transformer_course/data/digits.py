"""A synthetic task with long inputs, to measure the fixed-size bottleneck: repeat a string of digits.

Every digit of the input has to reach the output, so a decoder that sees the input only through one
final state must pack all of them into it; a decoder with attention can look each one up.
"""

from __future__ import annotations

import random

from .dates import CharVocab

__all__ = ["copy_task", "digit_vocab", "make_digit_pairs"]


def make_digit_pairs(n: int, min_len: int, max_len: int, seed: int = 0) -> list[tuple[str, str]]:
    """n pairs (digits, the same digits), the lengths drawn uniformly from [min_len, max_len]."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len} and {max_len}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = "".join(rng.choice("0123456789") for _ in range(rng.randint(min_len, max_len)))
        pairs.append((s, s))
    return pairs


def digit_vocab() -> CharVocab:
    return CharVocab("0123456789")


def copy_task(max_tokens: int, seed: int):
    """The trainer's quick task (``--data copy``): (vocabulary, batches of 4,000 training pairs of 3 to 12 digits,
    200 test pairs drawn with another seed). Its data takes no time to make."""
    from .batching import token_batches

    vocab = digit_vocab()
    train = make_digit_pairs(4000, 3, 12, seed=seed)
    test = make_digit_pairs(200, 3, 12, seed=seed + 1000)
    sources, targets = [vocab.encode(a) for a, _ in train], [vocab.encode(b) for _, b in train]
    batches = token_batches(sources, targets, max_tokens, vocab.pad_id, vocab.eos_id, seed=seed)
    return vocab, batches, test
