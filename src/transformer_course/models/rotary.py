"""Rotary position embedding, RoPE (RoFormer, Su et al. 2021) (chapter 11).

Chapter 7 adds a position's sinusoidal encoding to the token's embedding. RoPE instead rotates the queries and
the keys, inside every attention layer: each pair of dimensions (2i, 2i + 1) of a vector at position p is turned
by the angle p * theta_i, with theta_i = base^(-2i / d) the frequencies of chapter 7's table,

    x'_{2i}     = x_{2i} cos(p theta_i) - x_{2i+1} sin(p theta_i)
    x'_{2i + 1} = x_{2i} sin(p theta_i) + x_{2i+1} cos(p theta_i).

A rotation by a and one by b leave a dot product turned by b - a only: rotate(q, m) . rotate(k, n) depends on
m - n and not on m or n themselves. Attention scores then see relative positions, nothing is added to the
values, and a rotation keeps every vector's length.

Shapes: ... any leading dimensions (batch, heads), t positions, d = d_head (even).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import positive_int, require_tensor
from .positional import BASE, frequencies

__all__ = ["rotary_angles", "rotate"]


def rotary_angles(positions: Tensor, d_head: int, base: float = BASE) -> Tensor:
    """The angles p * theta_i, float64: positions (...,) -> (..., d_head / 2), theta_i = base^(-2i / d_head)."""
    positive_int("d_head", d_head)
    if d_head % 2:
        raise ValueError(f"d_head must be even (RoPE rotates pairs of dimensions), got {d_head}")
    require_tensor("positions", positions, min_dim=1)
    if positions.dtype == torch.bool or positions.is_complex():
        raise ValueError(f"positions must be a real-valued tensor, got {positions.dtype}")
    theta = frequencies(d_head, base).to(positions.device)  # (d_head / 2,) from 1 down to nearly 1 / base
    return positions.to(torch.float64)[..., None] * theta  # (..., d_head / 2)


def rotate(x: Tensor, positions: Tensor | None = None, base: float = BASE) -> Tensor:
    """x rotated pair by pair by its positions' angles: x (..., t, d_head) -> (..., t, d_head), same dtype.

    positions: (t,) or broadcastable to x.shape[:-1], the position of each row of x (default 0 .. t - 1); a
    cache that holds positions 0 .. s - 1 gives its new rows positions s, s + 1, .... Position 0 leaves x as it is.
    The angles are computed in float64 so that long positions keep their precision; cos and sin take x's dtype.
    """
    require_tensor("x", x, min_dim=2)
    d_head, t = x.shape[-1], x.shape[-2]
    if positions is None:
        positions = torch.arange(t, device=x.device)
    require_tensor("positions", positions, min_dim=1)
    if positions.shape[-1] != t:
        raise ValueError(
            f"positions must have t={t} entries in their last dimension, got shape {tuple(positions.shape)}"
        )
    angles = rotary_angles(positions, d_head, base)  # (..., t, d_head / 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., t, d_head / 2): the two coordinates of each pair
    # Each pair (even, odd) is a point in the plane, turned by its angle; stacking and flattening interleaves them back.
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
