"""Multi-head attention as chapter 8's Transformer runs it: W_Q, W_K and W_V fused into one matrix, and the
position-wise parts computed on the real tokens only (``Packing``), padding left out.

Shapes: B batch, T sequence length, N real tokens in the batch, d = d_model, h heads, d_k = d / h.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_heads
from .attention import scaled_dot_product_attention
from .multihead import merge_heads, split_heads

__all__ = ["PackedMultiHeadAttention", "Packing", "unpack"]


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
        # (N,) positions in the flat (B T); None when nothing is padding. A compiled model (torch.compile) always
        # indexes: asking the data whether it holds padding would break the compiled graph in two.
        everything = not torch.compiler.is_compiling() and bool(flat.all())
        self.index = None if everything else flat.nonzero().squeeze(1)

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...)"""
        return x.flatten(0, 1) if self.index is None else x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zeros at padding positions"""
        if self.index is not None:
            x = x.new_zeros(self.shape[0] * self.shape[1], *x.shape[1:]).index_copy(0, self.index, x)
        return x.unflatten(0, self.shape)


def unpack(x: Tensor, packing: Packing | None) -> Tensor:
    """x as (B, T, ...) whether or not it is packed: (N, ...) with a Packing, unchanged without one."""
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
        check_heads(d_model, n_heads, dropout)
        self.d_model, self.n_heads = d_model, n_heads
        self.w_qkv = nn.Linear(d_model, 3 * d_model)  # rows: W_Q, then W_K, then W_V
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout  # on the attention weights, while training (as nn.MultiheadAttention does)
        self.use_sdpa = use_sdpa

    def project_qkv(self, x: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, d) -> q, k, v, each (B, h, T, d_k), from one matrix product."""
        qkv = unpack(self.w_qkv(x), packing)  # (B, T, 3 d)
        # Three chunks: a tuple of three, which mypy reads as a tuple of any length.
        return tuple(split_heads(t, self.n_heads) for t in qkv.chunk(3, dim=-1))  # type: ignore[return-value]

    def project_q(self, x: Tensor, packing: Packing | None = None) -> Tensor:
        """x (B, T_q, d) -> q (B, h, T_q, d_k), with the W_Q rows of w_qkv."""
        d = self.d_model
        return split_heads(unpack(F.linear(x, self.w_qkv.weight[:d], self.w_qkv.bias[:d]), packing), self.n_heads)

    def project_kv(self, memory: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor]:
        """memory (B, T_k, d) -> k, v, each (B, h, T_k, d_k), with the W_K and W_V rows of w_qkv."""
        d = self.d_model
        kv = unpack(F.linear(memory, self.w_qkv.weight[d:], self.w_qkv.bias[d:]), packing)  # (B, T_k, 2 d)
        # Two chunks: a pair, which mypy reads as a tuple of any length.
        return tuple(split_heads(t, self.n_heads) for t in kv.chunk(2, dim=-1))  # type: ignore[return-value]

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> tuple[Tensor, Tensor | None]:
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

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        packing: Packing | None = None,
        memory_packing: Packing | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        if memory is None:
            q, k, v = self.project_qkv(x, packing)
        else:
            q, (k, v) = self.project_q(x, packing), self.project_kv(memory, memory_packing)
        return self.attend(q, k, v, mask, need_weights, packing)
