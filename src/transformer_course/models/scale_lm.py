"""Chapter 11's language model: chapter 10's decoder-only Transformer with the attention of chapter 11 as options.

    ids (B, T) ─ embedding · √d (+ sinusoidal positions) ─► ScaleBlock × N ─► LayerNorm ─► embedding^T ─► logits

One model, so that the chapter compares its ideas on equal terms (same data, steps, sizes):

- ``n_kv_heads``: n_heads is chapter 6's multi-head attention, fewer is grouped-query attention, 1 multi-query
  (``grouped_query``). Query head i reads key/value head i // (n_heads / n_kv_heads).
- ``position``: ``sinusoidal`` (chapter 7, added to the embeddings), ``rope`` (queries and keys rotated,
  ``rotary``), ``alibi`` (a distance penalty on the scores, ``alibi``) or ``none`` (causality alone tells order).
- ``window``: each query sees itself and the window - 1 keys before it (``sliding_window``); None: every earlier key.
- ``attention``: ``softmax``, or ``linear`` (``linear_attention``: a feature map instead of the softmax, and a
  fixed-size state when generating).

Generation feeds tokens through ``step`` with a ``ScaleCache``: softmax attention keeps each layer's keys and values
(R, g, t, d_k), trimmed to the last window - 1 positions under a window; linear attention keeps its state
(S (R, h, d_k, d_k), z (R, h, d_k)), whose size does not grow.

Shapes: B batch, T length, R rows, d = d_model, h = n_heads, g = n_kv_heads, d_k = d / h, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_heads, positive_int
from .alibi import alibi_slopes
from .grouped_query import _check_groups
from .linear_attention import linear_attention, linear_attention_step
from .positional import PositionalEncoding
from .rotary import rotate

__all__ = ["ATTENTIONS", "POSITIONS", "ScaleAttention", "ScaleBlock", "ScaleCache", "ScaleLM"]

POSITIONS = ("sinusoidal", "rope", "alibi", "none")
ATTENTIONS = ("softmax", "linear")
QUERY_BLOCK = 512  # queries per block on long inputs (evaluation at 4,096 tokens)


def _choice(name: str, value: object, options: tuple[str, ...]) -> str:
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}, got {value!r}")
    return str(value)


class ScaleAttention(nn.Module):
    """Causal self-attention with the chapter's options. forward(x (B, T, d), start) -> (B, T, d), positions
    start .. start + T - 1; ``step`` does the same against a cache."""

    slopes: Tensor  # (h,) ALiBi's slopes, or empty

    def __init__(
        self, d_model: int, n_heads: int, n_kv_heads: int, position: str, window: int | None, attention: str
    ) -> None:
        super().__init__()
        self.d_k = check_heads(d_model, n_heads)
        self.group = _check_groups(n_heads, n_kv_heads)
        self.n_heads, self.n_kv_heads, self.position, self.attention = n_heads, n_kv_heads, position, attention
        self.window = None if window is None else positive_int("window", window)
        self.w_q = nn.Linear(d_model, d_model)
        self.w_kv = nn.Linear(d_model, 2 * n_kv_heads * self.d_k)  # keys and values: g heads of d_k each
        self.w_o = nn.Linear(d_model, d_model)
        slopes = alibi_slopes(n_heads).float() if position == "alibi" else torch.zeros(0)
        self.register_buffer("slopes", slopes, persistent=False)  # (h,) or empty

    def project(self, x: Tensor, start: int) -> tuple[Tensor, Tensor, Tensor]:
        """q (B, h, T, d_k), k and v (B, g, T, d_k) of positions start .. start + T - 1, rotated under RoPE."""
        b, t, _ = x.shape
        q = self.w_q(x).view(b, t, self.n_heads, self.d_k).transpose(1, 2)
        k, v = self.w_kv(x).view(b, t, 2, self.n_kv_heads, self.d_k).permute(2, 0, 3, 1, 4)
        if self.position == "rope":
            positions = torch.arange(start, start + t, device=x.device)
            q, k = rotate(q, positions), rotate(k, positions)
        return q, k, v

    def _bias(self, q_start: int, t_q: int, k_start: int, t_k: int, device: torch.device) -> Tensor | None:
        """The additive mask (1 or h, t_q, t_k): -inf where a key may not be seen (later, or out of the window),
        minus the ALiBi penalty slope * distance; None when plain causal attention needs none."""
        if self.window is None and self.position != "alibi" and q_start == k_start and t_q == t_k:
            return None
        qpos = torch.arange(q_start, q_start + t_q, device=device)[:, None]  # (t_q, 1)
        kpos = torch.arange(k_start, k_start + t_k, device=device)[None, :]  # (1, t_k)
        back = qpos - kpos  # (t_q, t_k): how far key j lies before query i
        seen = back >= 0
        if self.window is not None:
            seen &= back < self.window
        bias = torch.zeros(t_q, t_k, device=device).masked_fill(~seen, float("-inf"))[None]  # (1, t_q, t_k)
        if self.position == "alibi":
            bias = bias - self.slopes[:, None, None] * back.clamp(min=0)  # (h, t_q, t_k)
        return bias

    def _softmax(self, q: Tensor, k: Tensor, v: Tensor, q_start: int, k_start: int) -> Tensor:
        gqa, t_q = self.group > 1, q.shape[2]
        if t_q > QUERY_BLOCK:  # long inputs: a bias of (h, t_q, t_k) floats would not fit, so block the queries
            blocks = [
                self._softmax(q[:, :, i : i + QUERY_BLOCK], k, v, q_start + i, k_start)
                for i in range(0, t_q, QUERY_BLOCK)
            ]
            return torch.cat(blocks, dim=2)
        bias = self._bias(q_start, t_q, k_start, k.shape[2], q.device)
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=gqa)  # (B, h, T_q, d_k)

    def _heads(self, x: Tensor) -> Tensor:
        """(B, g, T, d_k) -> (B, h, T, d_k): each key/value head repeated for its group of query heads."""
        return x.repeat_interleave(self.group, dim=1) if self.group > 1 else x

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        q, k, v = self.project(x, start)
        if self.attention == "linear":
            out = linear_attention(q, self._heads(k), self._heads(v), causal=True)
        else:
            out = self._softmax(q, k, v, start, start)
        return self.w_o(out.transpose(1, 2).flatten(2))  # (B, T, d)

    def step(self, x: Tensor, cache: ScaleCache, i: int) -> Tensor:
        """x (R, n, d) at positions cache.length .. + n - 1 -> (R, n, d), reading and extending layer i's cache."""
        t = cache.length
        q, k, v = self.project(x, t)
        if self.attention == "linear":  # the recurrence, one position at a time: a state of fixed size
            k, v = self._heads(k), self._heads(v)
            state = cache.state[i] or (
                q.new_zeros(*q.shape[:2], self.d_k, self.d_k),
                q.new_zeros(*q.shape[:2], self.d_k),
            )
            outs = []
            for j in range(q.shape[2]):
                o, state = linear_attention_step(state, q[:, :, j], k[:, :, j], v[:, :, j])
                outs.append(o)
            cache.state[i] = state
            out = torch.stack(outs, dim=2)  # (R, h, n, d_k)
        else:
            old_k, old_v = cache.k[i], cache.v[i]
            if old_k is not None and old_v is not None:
                k, v = torch.cat([old_k, k], dim=2), torch.cat([old_v, v], dim=2)  # (R, g, t' + n, d_k)
            k_start = t + q.shape[2] - k.shape[2]  # the position of the first key kept
            out = self._softmax(q, k, v, t, k_start)
            keep = k.shape[2] if self.window is None else self.window - 1  # what the next position can still see
            cache.k[i], cache.v[i] = k[:, :, -keep:], v[:, :, -keep:]
        return self.w_o(out.transpose(1, 2).flatten(2))


@dataclass
class ScaleCache:
    """Per layer: softmax attention's keys and values (R, g, t', d_k), or linear attention's state (S, z)."""

    k: list[Tensor | None] = field(default_factory=list)
    v: list[Tensor | None] = field(default_factory=list)
    state: list[tuple[Tensor, Tensor] | None] = field(default_factory=list)
    length: int = 0  # the positions fed so far

    def numbers(self) -> int:
        """How many numbers the cache holds: what generation carries from one token to the next."""
        kept: list[Tensor | None] = [*self.k, *self.v]
        for state in self.state:
            kept += [] if state is None else list(state)
        return sum(0 if t is None else t.numel() for t in kept)


class ScaleBlock(nn.Module):
    """Pre-norm: x + attention(LayerNorm(x)), then x + FFN(LayerNorm(x)). (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model: int, d_ff: int, attention: ScaleAttention) -> None:
        super().__init__()
        self.attn, self.attn_norm = attention, nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.ff_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        x = x + self.attn(self.attn_norm(x), start)
        return x + self.ff(self.ff_norm(x))

    def step(self, x: Tensor, cache: ScaleCache, i: int) -> Tensor:
        x = x + self.attn.step(self.attn_norm(x), cache, i)
        return x + self.ff(self.ff_norm(x))


class ScaleLM(nn.Module):
    """A decoder-only language model with tied embeddings. forward(ids (B, T)) -> logits (B, T, V), position t
    seeing ids[:, :t + 1]; ``loss(ids (B, T + 1))`` the mean next-token cross-entropy; ``nll`` per position."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        *,
        n_kv_heads: int | None = None,
        position: str = "sinusoidal",
        window: int | None = None,
        attention: str = "softmax",
        max_len: int = 8192,
    ) -> None:
        super().__init__()
        _choice("position", position, POSITIONS)
        _choice("attention", attention, ATTENTIONS)
        if attention == "linear" and position in ("rope", "alibi"):
            raise ValueError(
                f"linear attention has no scores to rotate or penalise: position {position!r} needs softmax"
            )
        if attention == "linear" and window is not None:
            raise ValueError("a window is a mask on softmax scores: linear attention takes window=None")
        n_kv = n_heads if n_kv_heads is None else n_kv_heads
        self.d_model, self.vocab_size, self.max_len = d_model, positive_int("vocab_size", vocab_size), max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, max_len) if position == "sinusoidal" else None
        self.layers = nn.ModuleList(
            ScaleBlock(d_model, d_ff, ScaleAttention(d_model, n_heads, n_kv, position, window, attention))
            for _ in range(positive_int("n_layers", n_layers))
        )
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab_size)
        for p in self.layers.parameters():  # as chapter 10's model: Glorot matrices, embeddings N(0, 1/d), tied
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        nn.init.zeros_(self.out.bias)
        self.out.weight = self.embed.weight

    def _embed(self, ids: Tensor, start: int) -> Tensor:
        if ids.dim() != 2 or ids.dtype != torch.int64:
            raise ValueError(f"ids must be an int64 tensor (B, T), got {ids.dtype} of shape {tuple(ids.shape)}")
        if start + ids.shape[1] > self.max_len:
            raise ValueError(f"positions up to {start + ids.shape[1]} are beyond max_len={self.max_len}")
        x = self.embed(ids) * math.sqrt(self.d_model)  # (B, T, d)
        return x if self.positional is None else self.positional(x, offset=start)

    def forward(self, ids: Tensor) -> Tensor:
        x = self._embed(ids, 0)
        for layer in self.layers:
            x = layer(x)
        return self.out(self.norm(x))  # (B, T, V)

    def nll(self, ids: Tensor) -> Tensor:
        """ids (B, T + 1) -> the negative log-likelihood of each next token (B, T), position by position."""
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")

    def loss(self, ids: Tensor) -> Tensor:
        return self.nll(ids).mean()

    def start_cache(self) -> ScaleCache:
        n = len(self.layers)
        return ScaleCache([None] * n, [None] * n, [None] * n)

    def step(self, cache: ScaleCache, ids: Tensor) -> Tensor:
        """Feed ids (R, n) after the cache's positions -> their logits (R, n, V); the cache takes their keys and
        values (or state). The same numbers as ``forward`` on the whole prefix, at the new positions."""
        x = self._embed(ids, cache.length)
        for i, layer in enumerate(cast("list[ScaleBlock]", list(self.layers))):
            x = layer.step(x, cache, i)
        cache.length += ids.shape[1]
        return self.out(self.norm(x))
