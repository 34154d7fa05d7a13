"""Multi-head attention, for self-attention and encoder-decoder (cross) attention (chapter 6).

h heads run scaled dot-product attention side by side, each on its own d_k = d_model / h dimensional
projection of the queries, keys and values; their outputs are concatenated and projected by W_O.
All heads are computed at once: one (d_model, d_model) projection holds the h per-head projections
stacked, ``split_heads`` turns its output into (B, h, T, d_k), and ``merge_heads`` concatenates back.

Masks follow the course's convention: boolean, True = may attend. A mask of up to 3 dimensions
(``(T_q, T_k)``, ``(B, 1, T_k)``, ``(B, T_q, T_k)``) is the same for every head; a 4-D mask is
``(B, h, T_q, T_k)`` or broadcastable to it. The parameters are named and laid out so that they copy
to and from ``torch.nn.MultiheadAttention`` (``to_torch``, ``from_torch``), and ``torch_masks``
converts our masks to that module's (whose boolean masks mean True = may NOT attend).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .._checks import check_heads, positive_int, require_tensor
from .attention import scaled_dot_product_attention

__all__ = ["split_heads", "merge_heads", "head_mask", "MultiHeadAttention", "to_torch", "from_torch", "torch_masks"]


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(..., T, d_model) -> (..., h, T, d_k): head i gets the features i*d_k to (i+1)*d_k - 1 of every position."""
    require_tensor("x", x, min_dim=2)
    positive_int("the number of heads", n_heads)
    if x.shape[-1] % n_heads:
        raise ValueError(f"the last dimension {x.shape[-1]} of x (d_model) is not divisible by n_heads={n_heads}")
    return x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)).transpose(-3, -2)  # (..., T, h, d_k) -> (..., h, T, d_k)


def merge_heads(x: Tensor) -> Tensor:
    """(..., h, T, d_k) -> (..., T, h * d_k): the heads' outputs concatenated side by side, head 0 first."""
    require_tensor("x", x, min_dim=3)
    return x.transpose(-3, -2).flatten(-2)  # (..., T, h, d_k) -> (..., T, h * d_k)


def head_mask(mask: Tensor | None) -> Tensor | None:
    """Give a mask of up to 3 dimensions a head axis, so that it is the same for every head."""
    if mask is None:
        return None
    require_tensor("mask", mask, min_dim=1)
    if mask.dim() > 4:
        raise ValueError(f"a mask has at most 4 dimensions (B, h, T_q, T_k), got shape {tuple(mask.shape)}")
    return mask.unsqueeze(-3) if mask.dim() == 3 else mask  # (B, T_q, T_k) -> (B, 1, T_q, T_k)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O.

    query: (B, T_q, d_model), key: (B, T_k, d_model), value: (B, T_k, d_model),
    mask: None or boolean (True = may attend), broadcastable to (B, T_q, T_k), or 4-D (B, h, T_q, T_k)
    returns (output (B, T_q, d_model), weights of every head (B, h, T_q, T_k)).
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        check_heads(d_model, n_heads)
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        # Each (d_model, d_model) projection holds the h per-head projections (d_model -> d_k) stacked.
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        for name, x in (("query", query), ("key", key), ("value", value)):
            require_tensor(name, x, min_dim=2)
            if x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}")
        q = split_heads(self.w_q(query), self.n_heads)  # (B, h, T_q, d_k)
        k = split_heads(self.w_k(key), self.n_heads)  # (B, h, T_k, d_k)
        v = split_heads(self.w_v(value), self.n_heads)  # (B, h, T_k, d_k)
        out, weights = scaled_dot_product_attention(q, k, v, head_mask(mask))  # (B, h, T_q, d_k), (B, h, T_q, T_k)
        return self.w_o(merge_heads(out)), weights  # (B, T_q, d_model), (B, h, T_q, T_k)


def to_torch(module: MultiHeadAttention) -> nn.MultiheadAttention:
    """A torch.nn.MultiheadAttention (batch_first) with the same weights, dtype and device as ``module``."""
    w = module.w_q.weight
    theirs = nn.MultiheadAttention(
        module.d_model,
        module.n_heads,
        bias=module.w_q.bias is not None,
        batch_first=True,
        device=w.device,
        dtype=w.dtype,
    )
    with torch.no_grad():
        # in_proj_weight stacks W_Q, W_K and W_V: (3 d_model, d_model).
        theirs.in_proj_weight.copy_(torch.cat([module.w_q.weight, module.w_k.weight, module.w_v.weight]))
        theirs.out_proj.weight.copy_(module.w_o.weight)
        if module.w_q.bias is not None:
            theirs.in_proj_bias.copy_(torch.cat([module.w_q.bias, module.w_k.bias, module.w_v.bias]))
            theirs.out_proj.bias.copy_(module.w_o.bias)
    return theirs.train(module.training)


def from_torch(theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """A MultiHeadAttention with the weights of a torch.nn.MultiheadAttention (same key, query and value size)."""
    if not isinstance(theirs, nn.MultiheadAttention):
        raise TypeError(f"expected a torch.nn.MultiheadAttention, got {type(theirs).__name__}")
    if not theirs._qkv_same_embed_dim or theirs.bias_k is not None or theirs.add_zero_attn:
        raise ValueError(
            "only nn.MultiheadAttention with kdim = vdim = embed_dim, no add_bias_kv and no add_zero_attn is supported"
        )
    bias = theirs.in_proj_bias is not None
    w = theirs.in_proj_weight
    module = MultiHeadAttention(theirs.embed_dim, theirs.num_heads, bias=bias).to(device=w.device, dtype=w.dtype)
    with torch.no_grad():
        for name, weight in zip(("w_q", "w_k", "w_v"), w.chunk(3)):
            getattr(module, name).weight.copy_(weight)
        module.w_o.weight.copy_(theirs.out_proj.weight)
        if bias:
            for name, b in zip(("w_q", "w_k", "w_v"), theirs.in_proj_bias.chunk(3)):
                getattr(module, name).bias.copy_(b)
            module.w_o.bias.copy_(theirs.out_proj.bias)
    return module.train(theirs.training)


def torch_masks(key_padding: Tensor | None = None, attn: Tensor | None = None) -> dict[str, Tensor | None]:
    """Our masks (True = may attend) as nn.MultiheadAttention's keyword arguments (True = may NOT attend).

    key_padding: (B, T_k), or (B, 1, T_k) as made by attention.padding_mask; attn: (T_q, T_k).
    """
    out: dict[str, Tensor | None] = {"key_padding_mask": None, "attn_mask": None}
    for name, mask, dims in (("key_padding_mask", key_padding, (2, 3)), ("attn_mask", attn, (2,))):
        if mask is None:
            continue
        require_tensor(name, mask, min_dim=1)
        if mask.dtype != torch.bool or mask.dim() not in dims:
            raise ValueError(
                f"{name} must be a boolean tensor with {' or '.join(map(str, dims))} dimensions, got {mask.dtype} {tuple(mask.shape)}"
            )
        if name == "key_padding_mask" and mask.dim() == 3:
            if mask.shape[1] != 1:
                raise ValueError(f"a 3-D key padding mask must have shape (B, 1, T_k), got {tuple(mask.shape)}")
            mask = mask[:, 0]
        out[name] = ~mask
    return out
