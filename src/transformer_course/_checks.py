"""Argument checks shared by the chapter modules: a wrong argument gets a message that names it and says
what was expected, before any computation can fail deep inside with a traceback.

Internal: no chapter teaches these, and every chapter module may import them (this module imports nothing
of the package).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

# A model whose parts are read by name (model.generate, model.decoder.layers, model.max_len): one of the course's
# models, or any module with the same parts (chapter 9's bigram table is one). Any to the type checker: torch types
# every attribute of a module Tensor | Module, which has none of these parts.
Model = Any


def positive_int(name: str, value: object) -> int:
    """``value`` if it is an int >= 1 (a bool is not), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_heads(d_model: object, n_heads: object, dropout: object = None) -> int:
    """d_k = d_model / n_heads, for positive ints d_model divisible by n_heads (and a dropout in [0, 1) if given)."""
    positive_int("d_model", d_model)
    positive_int("n_heads", n_heads)
    if d_model % n_heads:  # type: ignore[operator]  # positive_int raised unless both are ints
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: each head gets d_model / n_heads dimensions"
        )
    if dropout is not None and not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    return d_model // n_heads  # type: ignore[operator]  # as above


def require_tensor(name: str, x: object, dim: int | None = None, min_dim: int | None = None) -> Tensor:
    """``x`` if it is a tensor with exactly ``dim`` dimensions (or at least ``min_dim``), else TypeError or ValueError."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if dim is not None and x.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimension{'s' if dim > 1 else ''}, got shape {tuple(x.shape)}")
    if min_dim is not None and x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}")
    return x


def check_ids(name: str, ids: object, mask: object, mask_name: str, max_len: int) -> None:
    """Token ids (B, T) and their boolean mask: types and shapes, checked before anything runs."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        what = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be an int64 tensor of token ids (B, T), got {what}")
    if ids.dim() != 2 or 0 in ids.shape:
        raise ValueError(f"{name} must have shape (B, T) with B, T >= 1, got {tuple(ids.shape)}")
    if ids.shape[1] > max_len:
        raise ValueError(f"{name} has {ids.shape[1]} positions, more than the model's max_len={max_len}")
    if mask is None:
        return
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        what = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{mask_name} must be a boolean tensor (True = real token), got {what}")
    if mask.shape != ids.shape:
        raise ValueError(f"{mask_name} must have the shape of {name}, {tuple(ids.shape)}, got {tuple(mask.shape)}")


def check_values(ids: list[tuple[str, Tensor, int]], masks: Sequence[tuple[str, Tensor]] = ()) -> None:
    """Token ids in [0, V), and at least one real token in every row of each mask: one transfer for all checks."""
    if torch.compiler.is_compiling():
        return  # a compiled training step (the trainer's --compile): its batches are the course's own data, checked
        # eagerly where they are made; reading values back here would break the compiled graph in two
    stats = [s for _, x, _ in ids for s in (x.min(), x.max())] + [m.any(dim=1).all().long() for _, m in masks]
    values = torch.stack(stats).tolist()
    for i, (name, _, vocab) in enumerate(ids):
        low, high = values[2 * i], values[2 * i + 1]
        if low < 0 or high >= vocab:
            raise ValueError(f"{name} holds token ids from {low} to {high}, outside the vocabulary 0 .. {vocab - 1}")
    for (name, _), nonempty in zip(masks, values[2 * len(ids) :]):
        if not nonempty:
            raise ValueError(f"every sequence needs at least one real token, but a row of {name} is all False")
