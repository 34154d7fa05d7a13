"""Attention without the n x n score matrix: the online softmax and tiled attention (chapter 11).

Plain attention forms every score q_i . k_j at once, an (n, n) matrix per head: its memory grows with the square
of the length. The softmax seems to need a whole row before it can start (its maximum, its sum), but it does not:

    online softmax (Milakov & Gimelshein 2018). Read the row block by block, keeping a running maximum m and a
    running sum l of exp(s_j - m). When a block raises the maximum from m to m', the sum so far was taken
    relative to the old maximum: multiply it by exp(m - m') and carry on. One pass gives m and l for the row.

Tiled attention (FlashAttention, Dao et al. 2022) carries the output along as well: a running, unnormalised
sum acc = sum_j exp(s_j - m) v_j, rescaled by the same factor whenever m grows, and divided by l at the end.
Queries and keys are cut into blocks; only one (block, block) tile of scores exists at a time. With a causal
mask, a key block that lies entirely after a query block is never visited, which saves almost half the tiles.

Shapes: ... any leading dimensions (batch, heads), n_q queries, n_k keys, d the query/key size, d_v the value
size. ``causal`` follows ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``: query i may
attend to key j when j <= i (aligned at the top left).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._checks import positive_int, require_tensor

__all__ = ["online_softmax", "tile_schedule", "tiled_attention", "score_bytes"]


def _safe_shift(m: Tensor) -> Tensor:
    """The running maximum, with -inf (nothing seen yet but -inf) replaced by 0, so that exp(s - shift) is
    exp(-inf) = 0 rather than exp(-inf + inf) = NaN."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def online_softmax(scores: Tensor, block: int = 32) -> Tensor:
    """softmax over the last dimension, its normaliser found in one pass over blocks of ``block`` entries.

    scores: (..., n) -> (..., n). The pass keeps a running maximum m (..., 1) and a running sum l (..., 1) of
    exp(s - m), rescaling l by exp(m_old - m_new) when a block raises the maximum; the probabilities are then
    exp(s - m) / l. Entries of -inf get probability 0; a row that is all -inf is NaN, as in torch.softmax.
    Very large scores do not overflow: every exponent is at most 0.
    """
    require_tensor("scores", scores, min_dim=1)
    positive_int("block", block)
    n = scores.shape[-1]
    m = torch.full_like(scores[..., :1], float("-inf"))  # (..., 1) running maximum
    l = torch.zeros_like(scores[..., :1])  # (..., 1) running sum of exp(s - m)
    for start in range(0, n, block):
        s = scores[..., start : start + block]  # (..., block)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., 1)
        shift = _safe_shift(m_new)
        # The sum so far was relative to m: exp(m - m_new) <= 1 re-expresses it relative to m_new.
        l = l * torch.exp(m - shift) + torch.exp(s - shift).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l  # every exponent <= 0; a row of only -inf: NaN / 0 = NaN, as in torch


def _key_blocks(i0: int, i1: int, n_k: int, block: int, causal: bool) -> list[tuple[int, int]]:
    """The key blocks (j0, j1) that the queries i0 .. i1-1 meet; with ``causal`` a block whose first key j0
    comes after the last query (j0 > i1 - 1) is left out: every one of its scores would be masked."""
    stop = min(n_k, i1) if causal else n_k  # causal: keys from i1 on are in the future of all these queries
    return [(j0, min(j0 + block, n_k)) for j0 in range(0, stop, block)]


def tile_schedule(n_q: int, n_k: int, block: int, causal: bool = False) -> list[tuple[int, int, int, int]]:
    """The (i0, i1, j0, j1) tiles that ``tiled_attention`` computes: queries i0 .. i1-1 against keys j0 .. j1-1.

    Without a mask every query block meets every key block. With ``causal`` a key block that lies entirely in
    the queries' future is skipped: for n_q = n_k = n and b blocks, b (b + 1) / 2 tiles instead of b^2.
    """
    for name, value in (("n_q", n_q), ("n_k", n_k), ("block", block)):
        positive_int(name, value)
    return [
        (i0, min(i0 + block, n_q), j0, j1)
        for i0 in range(0, n_q, block)
        for j0, j1 in _key_blocks(i0, min(i0 + block, n_q), n_k, block, causal)
    ]


def tiled_attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, block: int = 64, scale: float | None = None
) -> Tensor:
    """softmax(q k^T * scale) v, computed tile by tile with the online softmax (FlashAttention's forward pass).

    q: (..., n_q, d), k: (..., n_k, d), v: (..., n_k, d_v) -> (..., n_q, d_v); scale defaults to 1 / sqrt(d).
    No (n_q, n_k) score matrix is formed: at most one (block, block) tile of scores exists at a time, beside the
    current query block's running maximum and sum (..., block, 1) and unnormalised output (..., block, d_v).
    """
    require_tensor("q", q, min_dim=2)
    require_tensor("k", k, min_dim=2)
    require_tensor("v", v, min_dim=2)
    positive_int("block", block)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length n_k, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])  # batch and head dimensions
    outputs = []
    for i0 in range(0, n_q, block):  # one block of queries at a time; each is independent of the others
        i1 = min(i0 + block, n_q)
        qb = q[..., i0:i1, :]  # (..., bq, d)
        m = q.new_full((*lead, i1 - i0, 1), float("-inf"))  # (..., bq, 1) running maximum of each query's scores
        l = torch.zeros_like(m)  # (..., bq, 1) running sum of exp(score - m)
        acc = q.new_zeros((*lead, i1 - i0, v.shape[-1]))  # (..., bq, d_v) running sum of exp(score - m) v_j
        for j0, j1 in _key_blocks(i0, i1, n_k, block, causal):
            s = (qb @ k[..., j0:j1, :].transpose(-2, -1)) * scale  # (..., bq, bk): one tile of scores
            if causal and j1 - 1 > i0:  # the tile reaches past the diagonal: mask each query's future keys
                rows = torch.arange(i0, i1, device=q.device)[:, None]  # (bq, 1)
                cols = torch.arange(j0, j1, device=q.device)[None, :]  # (1, bk)
                s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            shift = _safe_shift(m_new)
            rescale = torch.exp(m - shift)  # (..., bq, 1): re-expresses sums taken relative to m relative to m_new
            p = torch.exp(s - shift)  # (..., bq, bk): this tile's unnormalised probabilities
            l = l * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ v[..., j0:j1, :]
            m = m_new
        outputs.append(acc / l)  # (..., bq, d_v)
    return torch.cat(outputs, dim=-2)


def score_bytes(n: int, block: int | None = None, bytes_per_number: int = 4) -> int:
    """Bytes of attention scores alive at once, per head, for a length-n sequence.

    Plain attention (block None) holds the whole (n, n) matrix; tiled attention one (block, block) tile (or
    (n, n) when block >= n). Example: n = 4096 in float32 is 4096^2 * 4 = 64 MiB per head; a 64-wide tile 16 KiB.
    """
    positive_int("n", n)
    positive_int("bytes_per_number", bytes_per_number)
    side = n if block is None else min(positive_int("block", block), n)
    return side * side * bytes_per_number
