"""Grouped-query attention: fewer key/value heads than query heads, a smaller cache (chapter 11).

When a decoder generates, it keeps every layer's keys and values for every past token (chapter 9's cache):
2 x layers x heads x d_head numbers per token. Multi-query attention (Shazeer 2019) keeps a single key/value
head that all query heads share; grouped-query attention (Ainslie et al. 2023) keeps n_kv_heads of them, each
shared by a group of n_heads / n_kv_heads consecutive query heads. One layer covers the three cases:

    n_kv_heads == n_heads       chapter 6's multi-head attention
    1 < n_kv_heads < n_heads    grouped-query attention
    n_kv_heads == 1             multi-query attention

Query head i reads key/value head i // (n_heads / n_kv_heads), the grouping of
``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``. The keys are not copied per query
head: the query heads get a group axis, (B, g, n_heads / g, T, d_k), against which one key head per group
broadcasts.

Shapes: B batch, T_q queries, T_k keys, d = d_model, h = n_heads, g = n_kv_heads, r = h / g query heads per
key/value head, d_k = d / h. Masks are boolean, True = may attend, as in ``multihead``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import check_heads, positive_int, require_tensor
from .attention import scaled_dot_product_attention
from .multihead import MultiHeadAttention, head_mask, merge_heads, split_heads

__all__ = ["GroupedQueryAttention", "from_multihead", "kv_cache_bytes_per_token"]


def _check_groups(n_heads: int, n_kv_heads: object) -> int:
    """r = n_heads / n_kv_heads, the query heads per key/value head, or a ValueError that says what is wrong."""
    positive_int("n_kv_heads", n_kv_heads)
    if n_kv_heads > n_heads:  # type: ignore[operator]  # an int: positive_int raised otherwise
        raise ValueError(
            f"n_kv_heads={n_kv_heads} is more than n_heads={n_heads}: each key/value head serves query heads"
        )
    if n_heads % n_kv_heads:  # type: ignore[operator]  # as above
        raise ValueError(
            f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}: every key/value head serves the same number of query heads"
        )
    return n_heads // n_kv_heads  # type: ignore[operator]  # as above


class GroupedQueryAttention(nn.Module):
    """Attention with n_heads query heads and n_kv_heads key/value heads (n_heads divisible by n_kv_heads).

    query: (B, T_q, d), key: (B, T_k, d), value: (B, T_k, d); mask: None or boolean (True = may attend),
    broadcastable to (B, T_q, T_k), or 4-D (B, h, T_q, T_k) -> (output (B, T_q, d), weights (B, h, T_q, T_k)).
    W_Q and W_O are (d, d) as in ``MultiHeadAttention``; W_K and W_V are (g d_k, d): g heads of d_k each.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = True) -> None:
        super().__init__()
        self.d_k = check_heads(d_model, n_heads)
        self.group = _check_groups(n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # g heads, not h: the saving
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _group_mask(self, mask: Tensor | None) -> Tensor | None:
        """A mask with a head axis, (B, h or 1, T_q, T_k), reshaped to broadcast over (B, g, r, T_q, T_k)."""
        mask = head_mask(mask)  # None, up to 2-D (broadcasts as it is), or 4-D with a head axis
        if mask is None or mask.dim() < 3:
            return mask
        heads = mask.shape[-3]
        if heads == self.n_heads:
            return mask.unflatten(-3, (self.n_kv_heads, self.group))  # (..., g, r, T_q, T_k)
        if heads == 1:
            return mask.unsqueeze(-3)  # (..., 1, 1, T_q, T_k)
        raise ValueError(f"a 4-D mask must have 1 or n_heads={self.n_heads} heads, got shape {tuple(mask.shape)}")

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        for name, x in (("query", query), ("key", key), ("value", value)):
            require_tensor(name, x, min_dim=2)
            if x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        # Query head i = kv head i // r: the h query heads, split into g groups of r consecutive heads.
        q = split_heads(self.w_q(query), self.n_heads)  # (B, h, T_q, d_k)
        q = q.unflatten(-3, (self.n_kv_heads, self.group))  # (B, g, r, T_q, d_k)
        k = split_heads(self.w_k(key), self.n_kv_heads).unsqueeze(-3)  # (B, g, 1, T_k, d_k): shared by the r heads
        v = split_heads(self.w_v(value), self.n_kv_heads).unsqueeze(-3)  # (B, g, 1, T_k, d_k)
        out, weights = scaled_dot_product_attention(q, k, v, self._group_mask(mask))  # (B, g, r, T_q, d_k), (.., T_k)
        out, weights = out.flatten(-4, -3), weights.flatten(-4, -3)  # (B, h, T_q, d_k), (B, h, T_q, T_k)
        return self.w_o(merge_heads(out)), weights  # (B, T_q, d), (B, h, T_q, T_k)


def from_multihead(mha: MultiHeadAttention, n_kv_heads: int | None = None) -> GroupedQueryAttention:
    """A GroupedQueryAttention made from a MultiHeadAttention's weights.

    n_kv_heads None or equal to its n_heads: the same weights, hence the same outputs. Fewer: the GQA paper's
    conversion before "uptraining" (Ainslie et al. 2023): each group's r key heads (and value heads) are
    mean-pooled into one, projection weights and biases alike; W_Q and W_O are copied unchanged.
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"expected a MultiHeadAttention, got {type(mha).__name__}")
    n_kv_heads = mha.n_heads if n_kv_heads is None else n_kv_heads
    bias = mha.w_q.bias is not None
    w = mha.w_q.weight
    gqa = GroupedQueryAttention(mha.d_model, mha.n_heads, n_kv_heads, bias=bias).to(device=w.device, dtype=w.dtype)
    r = gqa.group

    def pool(x: Tensor) -> Tensor:
        # (h d_k, ...) -> (g, r, d_k, ...): rows of head i are i d_k .. (i + 1) d_k - 1; average each group's r heads.
        return x.unflatten(0, (n_kv_heads, r, mha.d_k)).mean(dim=1).flatten(0, 1)  # (g d_k, ...)

    with torch.no_grad():
        for name in ("w_q", "w_k", "w_v", "w_o"):
            mine, theirs = getattr(gqa, name), getattr(mha, name)
            keep = name in ("w_q", "w_o")
            mine.weight.copy_(theirs.weight if keep else pool(theirs.weight))
            if bias:
                mine.bias.copy_(theirs.bias if keep else pool(theirs.bias))
    return gqa.train(mha.training)


def kv_cache_bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int, bytes_per_number: int = 2) -> int:
    """Bytes that one token adds to the key/value cache: 2 (K and V) x n_layers x n_kv_heads x d_head x bytes.

    Example: 80 layers, 8 key/value heads of 128 dimensions in 16-bit numbers: 2 * 80 * 8 * 128 * 2 = 327,680
    bytes (320 KiB) a token; with 64 key/value heads (no grouping) eight times as much.
    """
    for name, value in (
        ("n_layers", n_layers),
        ("n_kv_heads", n_kv_heads),
        ("d_head", d_head),
        ("bytes_per_number", bytes_per_number),
    ):
        positive_int(name, value)
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_number
