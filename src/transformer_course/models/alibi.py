"""ALiBi, attention with linear biases (Press et al. 2022) (chapter 11).

No position is added to the tokens at all: each head adds -m * (i - j) to the score of query i for key j, a
penalty that grows linearly with the distance, and m (the head's slope) differs from head to head so that some
heads look far back and others near. The paper's slopes for n heads form a geometric sequence that starts at
2^(-8/n) and has that same ratio: 1/2, 1/4, ..., 1/256 for 8 heads.

When n is not a power of two, the authors' rule (in the code released with the paper): take the 2^k slopes of
the largest power of two 2^k below n, then fill up the remaining n - 2^k with every other slope of the sequence
for 2^(k+1) heads (its 1st, 3rd, 5th, ...): the geometric means of 1 and the first slope, of the first and the
second, and so on, the slopes that the paper's interpolation from 2^k to 2^(k+1) heads adds.

Shapes: h heads, t_q queries, t_k keys. The bias is added to the scores (h, t_q, t_k) before the softmax.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import positive_int

__all__ = ["alibi_slopes", "alibi_bias"]


def _geometric_slopes(n: int) -> list[float]:
    """The n slopes 2^(-8/n), 2^(-16/n), ..., 2^(-8): ratio and first term both 2^(-8/n)."""
    return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]


def alibi_slopes(n_heads: int) -> Tensor:
    """(n_heads,) float64 slopes, one per head, following the paper's rule (see the module's docstring)."""
    positive_int("n_heads", n_heads)
    power = 1 << (n_heads.bit_length() - 1)  # the largest power of two <= n_heads
    slopes = _geometric_slopes(power)
    if power < n_heads:
        slopes += _geometric_slopes(2 * power)[0::2][: n_heads - power]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(n_heads: int, t_q: int, t_k: int, q_offset: int | None = None) -> Tensor:
    """(n_heads, t_q, t_k) float64 bias -slope_h * |i - j| for query position i and key position j.

    Keys sit at positions 0 .. t_k - 1; query row r at position q_offset + r, with q_offset defaulting to
    t_k - t_q (the queries are the last positions, as when new tokens attend to a cache). For the keys a causal
    model may see (j <= i) this is the paper's -m (i - j); later keys get the same penalty by distance, which
    matters only for a model without a causal mask.
    """
    for name, value in (("t_q", t_q), ("t_k", t_k)):
        positive_int(name, value)
    offset = t_k - t_q if q_offset is None else q_offset
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise ValueError(f"q_offset must be an int, got {q_offset!r}")
    i = torch.arange(t_q, dtype=torch.float64)[:, None] + offset  # (t_q, 1) query positions
    j = torch.arange(t_k, dtype=torch.float64)[None, :]  # (1, t_k) key positions
    distance = (i - j).abs()  # (t_q, t_k)
    return -alibi_slopes(n_heads)[:, None, None] * distance  # (n_heads, t_q, t_k)
