"""The layers of chapter 8's Transformer: multi-head attention on packed sequences, the feed-forward network,
the encoder and decoder layers with their residual connections, and the two stacks (``transformer`` puts
them together into the model).

A layer's residual connection sits around each sub-layer with a LayerNorm: after the sum ("post-norm", the
paper's, the default) or before the sub-layer ("pre-norm", ``norm_first=True``, which then needs one more
LayerNorm at the end of each stack, as in ``nn.Transformer``).

Shapes: B batch, T sequence length, d = d_model, h heads, d_k = d / h. Masks are boolean, True = may attend.
Padding positions are not computed at all outside attention (``Packing``): they come out as zeros.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import positive_int
from .attention import scaled_dot_product_attention
from .multihead import merge_heads, split_heads

__all__ = ["Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward", "PackedMultiHeadAttention", "Packing"]


def _check_sizes(d_model: int, n_heads: int, dropout: float) -> None:
    positive_int("d_model", d_model)
    positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}: each head gets d_model / n_heads dimensions")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


class Packing:
    """The real tokens of a padded batch, so that the position-wise parts of a layer skip the padding.

    Everything in a layer but attention treats each position on its own (the projections, the feed-forward
    network, LayerNorm, dropout, the residual sums), so padding positions need not be computed at all:
    ``pack`` keeps the N real positions of a (B, T, ...) tensor as (N, ...), ``unpack`` puts N rows back in
    place, with zeros at the padding. Only attention needs the (B, T) layout: it unpacks its queries, keys and
    values and packs its output. With a third of the positions padding, a training step does about a third
    fewer multiply-adds (nn.TransformerEncoder skips padding too, with nested tensors, but only in inference).
    """

    def __init__(self, mask: Tensor) -> None:  # (B, T) bool, True = real token
        self.shape = tuple(mask.shape)
        flat = mask.flatten()
        self.index = None if bool(flat.all()) else flat.nonzero().squeeze(1)  # (N,) positions in the flat (B T)

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...)"""
        return x.flatten(0, 1) if self.index is None else x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zeros at padding positions"""
        if self.index is not None:
            x = x.new_zeros(self.shape[0] * self.shape[1], *x.shape[1:]).index_copy(0, self.index, x)
        return x.unflatten(0, self.shape)


def _unpack(x: Tensor, packing: Packing | None) -> Tensor:
    return x if packing is None else packing.unpack(x)


class PackedMultiHeadAttention(nn.Module):
    """Multi-head attention (chapter 6) with W_Q, W_K and W_V fused into one (3 d, d) matrix ``w_qkv``.

    Self-attention projects its input with the whole matrix: one matrix product instead of three.
    Cross-attention projects the decoder's states with the W_Q rows and the memory with the W_K, W_V rows.
    The rows are stacked as in ``nn.MultiheadAttention.in_proj_weight``, so weights copy across unchanged.
    The projections are methods of their own so that a key/value cache (chapter 9) can keep k and v and
    project only new positions; ``attend`` does the rest.

    forward(x (B, T_q, d), memory (B, T_k, d) or None for self-attention, mask broadcastable to
    (B, h, T_q, T_k) or None, need_weights) -> (output (B, T_q, d), weights (B, h, T_q, T_k) or None).
    Given a Packing of the queries (of the memory), x (memory) is packed, (N_q, d), and so is the output.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, use_sdpa: bool = True) -> None:
        super().__init__()
        _check_sizes(d_model, n_heads, dropout)
        self.d_model, self.n_heads = d_model, n_heads
        self.w_qkv = nn.Linear(d_model, 3 * d_model)  # rows: W_Q, then W_K, then W_V
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout  # on the attention weights, while training (as nn.MultiheadAttention does)
        self.use_sdpa = use_sdpa

    def project_qkv(self, x: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, d) -> q, k, v, each (B, h, T, d_k), from one matrix product."""
        qkv = _unpack(self.w_qkv(x), packing)  # (B, T, 3 d)
        return tuple(split_heads(t, self.n_heads) for t in qkv.chunk(3, dim=-1))

    def project_q(self, x: Tensor, packing: Packing | None = None) -> Tensor:
        """x (B, T_q, d) -> q (B, h, T_q, d_k), with the W_Q rows of w_qkv."""
        d = self.d_model
        return split_heads(_unpack(F.linear(x, self.w_qkv.weight[:d], self.w_qkv.bias[:d]), packing), self.n_heads)

    def project_kv(self, memory: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor]:
        """memory (B, T_k, d) -> k, v, each (B, h, T_k, d_k), with the W_K and W_V rows of w_qkv."""
        d = self.d_model
        kv = _unpack(F.linear(memory, self.w_qkv.weight[d:], self.w_qkv.bias[d:]), packing)  # (B, T_k, 2 d)
        return tuple(split_heads(t, self.n_heads) for t in kv.chunk(2, dim=-1))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, need_weights: bool = False,
               packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        """Attention over heads already split, then merge and W_O: -> (B, T_q, d), weights or None."""
        p = self.dropout if self.training else 0.0
        if self.use_sdpa and not need_weights:
            # PyTorch's fused kernel never materialises the weights; its boolean masks also mean True = may attend.
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask)  # chapter 5's, which returns the weights
            if p:
                out = F.dropout(weights, p) @ v  # dropout on the weights, as the fused kernel does
        out = merge_heads(out)  # (B, T_q, d)
        return self.w_o(out if packing is None else packing.pack(out)), weights

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        if memory is None:
            q, k, v = self.project_qkv(x, packing)
        else:
            q, (k, v) = self.project_q(x, packing), self.project_kv(memory, memory_packing)
        return self.attend(q, k, v, mask, need_weights, packing)


class FeedForward(nn.Module):
    """The position-wise feed-forward network, Linear(d, d_ff), ReLU, Linear(d_ff, d): (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, positive_int("d_ff", d_ff))
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class _Layer(nn.Module):
    """What encoder and decoder layers share: the residual connection around each sub-layer."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        _check_sizes(d_model, n_heads, dropout)
        self.norm_first = norm_first
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ff_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # on each sub-layer's output, before it joins the residual stream

    def residual(self, x: Tensor, sublayer, norm: nn.LayerNorm) -> Tensor:
        if self.norm_first:  # x + sublayer(norm(x)): the residual stream itself is never normalised
            return x + self.dropout(sublayer(norm(x)))
        return norm(x + self.dropout(sublayer(x)))  # the paper's: normalise after the sum


class EncoderLayer(_Layer):
    """Self-attention, then the feed-forward network, each in a residual connection with a LayerNorm.

    forward(x (B, T_x, d), mask broadcastable to (B, h, T_x, T_x), e.g. (B, 1, 1, T_x), or None) -> (B, T_x, d);
    given a Packing of the positions, x and the output are packed, (N, d).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 use_sdpa: bool = True) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = PackedMultiHeadAttention(d_model, n_heads, dropout, use_sdpa)
        self.self_attn_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None, packing: Packing | None = None) -> Tensor:
        x = self.residual(x, lambda h: self.self_attn(h, mask=mask, packing=packing)[0], self.self_attn_norm)
        return self.residual(x, self.ff, self.ff_norm)


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention over the memory, then the feed-forward network.

    forward(y (B, T_y, d), memory (B, T_x, d), self_mask broadcastable to (B, h, T_y, T_y) (causal and target
    padding), memory_mask broadcastable to (B, h, T_y, T_x) (source padding)) -> (B, T_y, d).
    With ``store_cross_weights = True`` the layer keeps the cross-attention weights of its last call in
    ``last_cross_weights`` (B, h, T_y, T_x), for attention maps (computed without the fused kernel then).
    Given Packings of the target and source positions, y, memory and the output are packed.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 use_sdpa: bool = True) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = PackedMultiHeadAttention(d_model, n_heads, dropout, use_sdpa)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.cross_attn = PackedMultiHeadAttention(d_model, n_heads, dropout, use_sdpa)
        self.cross_attn_norm = nn.LayerNorm(d_model)
        self.store_cross_weights = False
        self.last_cross_weights: Tensor | None = None

    def _cross(self, y: Tensor, memory: Tensor, mask: Tensor | None, packing: Packing | None,
               memory_packing: Packing | None) -> Tensor:
        out, weights = self.cross_attn(y, memory, mask, self.store_cross_weights, packing, memory_packing)  # queries: y
        if self.store_cross_weights:
            self.last_cross_weights = weights
        return out

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> Tensor:
        y = self.residual(y, lambda h: self.self_attn(h, mask=self_mask, packing=packing)[0], self.self_attn_norm)
        y = self.residual(y, lambda h: self._cross(h, memory, memory_mask, packing, memory_packing), self.cross_attn_norm)
        return self.residual(y, self.ff, self.ff_norm)

    def step(self, y: Tensor, self_attention: Callable[[Tensor], Tensor],
             cross_attention: Callable[[Tensor], Tensor]) -> Tensor:
        """The layer on the newest position only, y (R, 1, d) -> (R, 1, d), with the two attentions given as
        functions of the normalised input: incremental decoding (``incremental.decoder_step``) passes ones that
        read the earlier positions' keys and values from its cache."""
        y = self.residual(y, self_attention, self.self_attn_norm)
        y = self.residual(y, cross_attention, self.cross_attn_norm)
        return self.residual(y, self.ff, self.ff_norm)


class Encoder(nn.Module):
    """N encoder layers, and for pre-norm a final LayerNorm: (B, T_x, d), mask -> memory (B, T_x, d)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, use_sdpa: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
                                    for _ in range(positive_int("n_encoder_layers", n_layers)))
        # Pre-norm layers only ever add to the residual stream: normalise it once, at the end.
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None = None, packing: Packing | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, packing)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N decoder layers, and for pre-norm a final LayerNorm: (B, T_y, d), memory, masks -> (B, T_y, d)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, use_sdpa: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
                                    for _ in range(positive_int("n_decoder_layers", n_layers)))
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> Tensor:
        for layer in self.layers:
            y = layer(y, memory, self_mask, memory_mask, packing, memory_packing)
        return y if self.norm is None else self.norm(y)
