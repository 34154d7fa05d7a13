"""The diagrams' argument checks: a bad size or an empty sentence is a ValueError that says what was expected."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence


def count(name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int from ``low`` to ``high``; the upper bound is what fits the book's column legibly."""
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)  # type: ignore[arg-type]  # any value: TypeError if not an int
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not low <= n <= high:
        why = " (more do not fit the page's width legibly)" if n > high else ""
        raise ValueError(f"{name} must be from {low} to {high}, got {n}{why}")
    return n


def tokens(name: str, value: object, most: int) -> list[str]:
    """A sentence as a list of tokens: a list (or tuple) of strings, or a string split at spaces."""
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, Sequence) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{name} must be a list of token strings, got {value!r}")
    found = [t for t in value]
    if not found or any(not t.strip() for t in found):
        raise ValueError(f"{name} must be a non-empty list of non-empty tokens, got {value!r}")
    if len(found) > most:
        raise ValueError(f"{name} has {len(found)} tokens: at most {most} fit the page's width legibly")
    return found


def choice(name: str, value: object, options: Sequence[str]) -> str:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}")
    return value  # type: ignore[return-value]


def distribution(name: str, value: object, n: int) -> list[float]:
    """``n`` weights from 0 to 1 that sum to 1 (a list, or a 1-D tensor or array: anything iterable of numbers)."""
    try:
        weights = [float(w) for w in value]  # type: ignore[attr-defined]  # any value: TypeError if not
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {n} numbers (one attention row), got {value!r}") from None
    if len(weights) != n:
        raise ValueError(f"{name} has {len(weights)} weights for {n} source tokens: give one per token")
    if any(not math.isfinite(w) or w < 0 for w in weights) or abs(sum(weights) - 1) > 1e-3:
        raise ValueError(f"{name} must be non-negative and sum to 1 (a softmax's output), got {weights}")
    return weights
