"""The layers of chapter 8's Transformer: the feed-forward network, the encoder and decoder layers with their
residual connections around attention (``packed_attention``), and the two stacks (``transformer`` puts them
together into the model).

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

from .._checks import check_heads, positive_int
from .packed_attention import PackedMultiHeadAttention, Packing

__all__ = ["Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward"]


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
        check_heads(d_model, n_heads, dropout)
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

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        use_sdpa: bool = True,
    ) -> None:
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

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = PackedMultiHeadAttention(d_model, n_heads, dropout, use_sdpa)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.cross_attn = PackedMultiHeadAttention(d_model, n_heads, dropout, use_sdpa)
        self.cross_attn_norm = nn.LayerNorm(d_model)
        self.store_cross_weights = False
        self.last_cross_weights: Tensor | None = None

    def _cross(
        self, y: Tensor, memory: Tensor, mask: Tensor | None, packing: Packing | None, memory_packing: Packing | None
    ) -> Tensor:
        out, weights = self.cross_attn(y, memory, mask, self.store_cross_weights, packing, memory_packing)  # queries: y
        if self.store_cross_weights:
            self.last_cross_weights = weights
        return out

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
    ) -> Tensor:
        y = self.residual(y, lambda h: self.self_attn(h, mask=self_mask, packing=packing)[0], self.self_attn_norm)
        y = self.residual(
            y, lambda h: self._cross(h, memory, memory_mask, packing, memory_packing), self.cross_attn_norm
        )
        return self.residual(y, self.ff, self.ff_norm)

    def step(
        self, y: Tensor, self_attention: Callable[[Tensor], Tensor], cross_attention: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """The layer on the newest position only, y (R, 1, d) -> (R, 1, d), with the two attentions given as
        functions of the normalised input: incremental decoding (``incremental.decoder_step``) passes ones that
        read the earlier positions' keys and values from its cache."""
        y = self.residual(y, self_attention, self.self_attn_norm)
        y = self.residual(y, cross_attention, self.cross_attn_norm)
        return self.residual(y, self.ff, self.ff_norm)


class Encoder(nn.Module):
    """N encoder layers, and for pre-norm a final LayerNorm: (B, T_x, d), mask -> memory (B, T_x, d)."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
            for _ in range(positive_int("n_encoder_layers", n_layers))
        )
        # Pre-norm layers only ever add to the residual stream: normalise it once, at the end.
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None = None, packing: Packing | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, packing)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N decoder layers, and for pre-norm a final LayerNorm: (B, T_y, d), memory, masks -> (B, T_y, d)."""

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
            for _ in range(positive_int("n_decoder_layers", n_layers))
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
    ) -> Tensor:
        for layer in self.layers:
            y = layer(y, memory, self_mask, memory_mask, packing, memory_packing)
        return y if self.norm is None else self.norm(y)
