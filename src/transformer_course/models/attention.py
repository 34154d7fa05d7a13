"""Scaled dot-product attention, its masks, and a single-head self-attention layer (chapter 5).

Conventions used across the course:
  * tensors are batch-first; any number of leading batch dimensions ``...`` is allowed;
  * masks are boolean and ``True`` means "may attend"; a mask broadcasts against the
    score matrix of shape ``(..., T_q, T_k)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._checks import positive_int, require_tensor

__all__ = [
    "attention_scores",
    "causal_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "SelfAttention",
]


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """Scaled scores ``q @ k^T / sqrt(d_k)``.

    q: (..., T_q, d_k), k: (..., T_k, d_k) -> (..., T_q, T_k)
    """
    require_tensor("q", q, min_dim=2)
    require_tensor("k", k, min_dim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)


def causal_mask(t: int, device: torch.device | str | None = None) -> Tensor:
    """(t, t) boolean mask, True on and below the diagonal: position i may attend to j <= i."""
    positive_int("the sequence length", t)
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor, t: int) -> Tensor:
    """Key padding mask from sequence lengths.

    lengths: (B,) integers in [1, t] -> (B, 1, t) boolean, True at the real (non-padding) keys.
    The middle dimension lets it broadcast over the query axis of scores (B, T_q, t).
    """
    require_tensor("lengths", lengths, min_dim=1)
    if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor, got {lengths.dtype} of shape {tuple(lengths.shape)}")
    if len(lengths) and (int(lengths.min()) < 1 or int(lengths.max()) > t):
        raise ValueError(f"every length must be between 1 and t={t}, got {lengths.tolist()}")
    positions = torch.arange(t, device=lengths.device)  # (t,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (B, 1, t)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask (True = may attend).

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v), mask broadcastable to (..., T_q, T_k)
    returns (output (..., T_q, d_v), weights (..., T_q, T_k)).

    A query whose keys are all masked has no distribution to take: its row of weights is NaN,
    exactly as in torch.nn.functional.scaled_dot_product_attention.
    """
    require_tensor("v", v, min_dim=2)
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length T_k, got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    scores = attention_scores(q, k)  # (..., T_q, T_k)
    if mask is not None:
        require_tensor("mask", mask, min_dim=1)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores.shape)}"
            ) from None
        # -inf before the softmax gives those keys exactly zero weight, and the other weights still sum to one.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # normalise over the keys
    return weights @ v, weights


class SelfAttention(nn.Module):
    """One head of self-attention: queries, keys and values are learned projections of the same input.

    x: (B, T, d_model) -> output (B, T, d_v), weights (B, T, T)
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None) -> None:
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
        return scaled_dot_product_attention(q, k, v, mask)
