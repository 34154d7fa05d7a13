"""Positional encodings: the sinusoidal table of the Transformer paper and learned position embeddings (chapter 7).

The sinusoidal encoding of position ``pos`` in ``d_model`` dimensions interleaves sines and cosines,

    PE[pos, 2i]     = sin(pos * w_i),
    PE[pos, 2i + 1] = cos(pos * w_i),      w_i = 1 / base^(2i / d_model),  base = 10000,

so that each pair of columns (2i, 2i + 1) is a point on a circle that turns at its own frequency w_i.
A shift by k positions turns every circle by k * w_i, whatever pos is: PE[pos + k] = PE[pos] @ M_k
with M_k block-diagonal (``shift_matrix``). The concatenated variant puts all sines first and all
cosines after them; it is the same table with its columns permuted.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import positive_int

__all__ = ["frequencies", "sinusoidal_encoding", "shift_matrix", "PositionalEncoding", "LearnedPositionalEmbedding"]

BASE = 10_000.0


def _even_d_model(d_model: object) -> int:
    positive_int("d_model", d_model)
    if d_model % 2:  # type: ignore[operator]  # an int: positive_int raised otherwise
        raise ValueError(f"d_model must be even (sines and cosines come in pairs), got {d_model}")
    return d_model  # type: ignore[return-value]  # as above


def frequencies(d_model: int, base: float = BASE) -> Tensor:
    """(d_model / 2,) float64 angular frequencies w_i = base^(-2i / d_model), from 1 down to nearly 1 / base."""
    _even_d_model(d_model)
    if not base > 1:
        raise ValueError(f"the base must be greater than 1, got {base!r}")
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 0, 2, 4, ..., d_model - 2
    return base ** (-two_i / d_model)


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = BASE, interleaved: bool = True, dtype: torch.dtype | None = None
) -> Tensor:
    """(n_positions, d_model) table of sinusoidal encodings for positions 0 .. n_positions - 1.

    interleaved=True (the paper): sines in the even columns, cosines in the odd ones.
    interleaved=False (the concatenated variant): the d_model / 2 sines, then the d_model / 2 cosines.
    Computed in float64, returned in ``dtype`` (default: torch's default dtype).
    """
    positive_int("n_positions", n_positions)
    w = frequencies(d_model, base)  # (d_model / 2,)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * w[None, :]  # (n_positions, d_model / 2)
    if interleaved:
        pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # columns sin_0, cos_0, sin_1, cos_1, ...
    else:
        pe = torch.cat([angles.sin(), angles.cos()], dim=-1)  # columns sin_0 .. sin_{d/2-1}, cos_0 .. cos_{d/2-1}
    return pe.to(dtype or torch.get_default_dtype())


def shift_matrix(k: int, d_model: int, base: float = BASE, dtype: torch.dtype | None = None) -> Tensor:
    """(d_model, d_model) matrix M_k with PE[pos + k] = PE[pos] @ M_k for every pos (interleaved encoding).

    Block-diagonal: the block of columns (2i, 2i + 1) is [[cos k w_i, -sin k w_i], [sin k w_i, cos k w_i]],
    a rotation by the angle k w_i acting on row vectors (sin, cos). k may be negative.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"the shift k must be an int, got {k!r}")
    angle = k * frequencies(d_model, base)  # (d_model / 2,)
    c, s = angle.cos(), angle.sin()
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (d_model / 2, 2, 2)
    return torch.block_diag(*blocks).to(dtype or torch.get_default_dtype())


def _check_input(x: Tensor, d_model: int, offset: int, max_len: int | None) -> None:
    if not isinstance(x, Tensor) or x.dim() < 2 or x.shape[-1] != d_model:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"x must be a tensor of shape (..., T, d_model={d_model}), got {shape}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    if max_len is not None and offset + x.shape[-2] > max_len:
        raise ValueError(
            f"positions {offset} to {offset + x.shape[-2] - 1} are needed, but the table only has max_len={max_len} positions"
        )


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding of positions offset, offset + 1, ... to a batch of embeddings, then dropout.

    x: (B, T, d_model) -> (B, T, d_model). The table is a buffer (not a parameter, not saved in the state dict),
    computed and kept in float64 (unless the module is cast, e.g. by .float()) and cast to x's dtype when added.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len = _even_d_model(d_model), positive_int("max_len", max_len)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "pe", sinusoidal_encoding(max_len, d_model, dtype=torch.float64), persistent=False
        )  # (max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_input(x, self.d_model, offset, self.max_len)
        t = x.shape[-2]
        # (T, d_model) broadcasts over the batch. pe: the buffer registered above, which torch types Tensor | Module.
        return self.dropout(x + self.pe[offset : offset + t].to(x.dtype))  # type: ignore[index]


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position (an nn.Embedding over positions 0 .. max_len - 1), then dropout.

    x: (B, T, d_model) -> (B, T, d_model). Positions at or beyond max_len have no vector: a clear error.
    """

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len = positive_int("d_model", d_model), positive_int("max_len", max_len)
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_input(x, self.d_model, offset, self.max_len)
        positions = torch.arange(offset, offset + x.shape[-2], device=x.device)  # (T,)
        return self.dropout(x + self.embedding(positions))
