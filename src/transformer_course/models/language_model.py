"""The decoder alone (chapter 10): a Transformer language model, chapter 8's decoder without cross-attention.

    ids (B, T) ─ embedding · √d_model + positions ─► DecoderOnlyLayer × N ─► LayerNorm ─► embedding^T ─► logits

Without an encoder there is nothing to cross-attend to: each layer is masked (causal) self-attention, then the
feed-forward network. Such a layer has exactly the parameters of chapter 8's encoder layer; only the causal
mask makes it a decoder, which is why ``nn.TransformerEncoderLayer`` with a causal mask is the reference the
tests compare it with. The output layer is the embedding matrix itself (tied): the logit of token v is the dot
product of the last state with v's embedding.

The model learns to predict every next token at once: position t reads ids[:, :t + 1] and predicts ids[:, t + 1]
(``loss``). A ``loss_mask`` counts only some targets: translation as language modelling reads
"English <sep> Spanish <eos>" and is scored on the Spanish tokens alone (``mask_after``).

Generation (``sampling.generate``) either recomputes the whole prefix at every step (``last_logits``) or keeps
each layer's keys and values in an ``LMCache`` and feeds only the new tokens (``step``), chapter 9's mechanism.

The objective is ``lm_loss``'s and the baselines (a bigram model, a GRU language model, perplexities) are
``lm_baselines``'; both are imported here too, so that the chapter finds its models in one module.

Shapes: B batch, T length, R rows being generated, t positions cached, n new positions, d = d_model, h heads,
d_k = d / h, V vocabulary. Masks are boolean, True = a real token / may attend. Padding goes at the end of each
row (right padding), so that every query keeps at least its row's first token as a key.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import Tensor, nn

from .._checks import check_heads, check_ids, check_values, positive_int
from .attention import causal_mask
from .incremental import attend_with_cache
from .lm_baselines import RNNLM, BigramLM, RNNState, negative_log_likelihood, perplexity, perplexity_per_word
from .lm_loss import lm_mask, mask_after, next_token_loss, shift_targets
from .multihead import merge_heads
from .packed_attention import PackedMultiHeadAttention, Packing, unpack
from .positional import PositionalEncoding
from .transformer_layers import EncoderLayer

__all__ = [
    "BigramLM",
    "DecoderOnlyLayer",
    "LMCache",
    "RNNLM",
    "RNNState",
    "TransformerLM",
    "lm_mask",
    "mask_after",
    "negative_log_likelihood",
    "next_token_loss",
    "perplexity",
    "perplexity_per_word",
    "shift_targets",
]


class DecoderOnlyLayer(EncoderLayer):
    """Chapter 8's ``DecoderLayer`` with its cross-attention sub-layer removed: masked self-attention, then the
    feed-forward network, each in a residual connection with a LayerNorm (post-norm, or pre-norm with
    ``norm_first``).

    Removed from ``DecoderLayer``: in ``__init__`` the lines creating ``cross_attn``, ``cross_attn_norm``,
    ``store_cross_weights`` and ``last_cross_weights``; the method ``_cross``; the ``memory``, ``memory_mask`` and
    ``memory_packing`` arguments of ``forward`` and its middle line (the cross-attention residual); in ``step`` the
    ``cross_attention`` argument and its residual line. What is left is exactly chapter 8's ``EncoderLayer`` (its
    parameters, its ``forward``), which this class therefore is; only the causal mask it is given makes it a
    decoder. It adds ``step``, for generation with a key/value cache.

    forward(x (B, T, d), mask broadcastable to (B, h, T, T) (causal and padding)) -> (B, T, d); given a Packing
    of the real positions, x and the output are packed, (N, d).
    """

    def step(self, x: Tensor, self_attention: Callable[[Tensor], Tensor]) -> Tensor:
        """The layer on new positions only, x (R, n, d) -> (R, n, d), with self-attention given as a function of
        the normalised input that reads the earlier positions' keys and values from a cache."""
        x = self.residual(x, self_attention, self.self_attn_norm)
        return self.residual(x, self.ff, self.ff_norm)


@dataclass
class LMCache:
    """Each layer's self-attention keys and values of the positions fed so far, (R, h, t, d_k), for R rows."""

    k: list[Tensor | None] = field(default_factory=list)
    v: list[Tensor | None] = field(default_factory=list)
    length: int = 0  # t, the positions fed so far

    def reorder(self, rows: Tensor) -> None:
        """Keep the rows ``rows`` (R',) in that order (beam search, or dropping finished rows)."""
        self.k = [None if t is None else t.index_select(0, rows) for t in self.k]
        self.v = [None if t is None else t.index_select(0, rows) for t in self.v]


class TransformerLM(nn.Module):
    """A decoder-only Transformer language model with tied input and output embeddings.

    forward(ids (B, T) int64, mask (B, T) bool or None) -> logits (B, T, V); position t sees ids[:, :t + 1] only.
    Without a mask, the padding is where ids == pad_id (nowhere if pad_id is None); padding goes at the end of
    each row and its logits are not computed (zero). loss(ids, mask, loss_mask) -> next-token cross-entropy.
    last_logits(ids) -> (B, V) and start_cache / step: the two ways ``sampling.generate`` feeds the model.
    norm_first=True (the default here, as in GPT-2) puts the LayerNorm before each sub-layer and one at the end.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        max_len: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        *,
        pad_id: int | None = 0,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__()
        check_heads(d_model, n_heads, dropout)
        if pad_id is not None and not 0 <= pad_id < positive_int("vocab_size", vocab_size):
            raise ValueError(f"pad_id={pad_id} is outside the vocabulary 0 .. {vocab_size - 1}")
        self.config: dict[str, Any] = dict(
            vocab_size=vocab_size,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=d_ff,
            max_len=max_len,
            dropout=dropout,
            norm_first=norm_first,
            pad_id=pad_id,
        )
        self.vocab_size, self.d_model, self.pad_id = vocab_size, d_model, pad_id
        self.max_len = positive_int("max_len", max_len)
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
            for _ in range(positive_int("n_layers", n_layers))
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else None  # pre-norm: the residual stream, normalised once
        self.out = nn.Linear(d_model, vocab_size)
        # As chapter 8: Glorot-uniform matrices in the layers, embeddings N(0, 1/d) so that, scaled by sqrt(d),
        # they are about as large as the positional encoding, and the tied logits are of order 1.
        for p in self.layers.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        nn.init.zeros_(self.out.bias)
        if pad_id is not None:
            with torch.no_grad():
                self.embed.weight[pad_id].zero_()
        self.out.weight = self.embed.weight  # tied: one Parameter

    def _mask(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        return lm_mask(ids, mask, self.pad_id, self.vocab_size, self.max_len)

    def _embed(self, ids: Tensor, offset: int = 0) -> Tensor:
        return self.positional(self.embed(ids) * math.sqrt(self.d_model), offset=offset)  # (B, T, d)

    def _states(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Packing]:
        """The final states of the real positions, packed (N, d), and their Packing."""
        self_mask = causal_mask(ids.shape[1], device=ids.device) & mask[:, None, None, :]  # (B, 1, T, T)
        packing = Packing(mask)
        x = packing.pack(self._embed(ids))  # (N, d): padding positions are not computed
        for layer in self.layers:
            x = layer(x, self_mask, packing)
        return (x if self.norm is None else self.norm(x)), packing

    def forward(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        states, packing = self._states(ids, self._mask(ids, mask))
        return unpack(self.out(states), packing)  # (B, T, V)

    def loss(
        self, ids: Tensor, mask: Tensor | None = None, loss_mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        """Next-token cross-entropy: inputs ids[:, :-1], targets ids[:, 1:], padding targets ignored, and with
        ``loss_mask`` (B, T) only the targets where it is True (see ``next_token_loss``)."""
        return next_token_loss(self, ids, self._mask(ids, mask), loss_mask, reduction)

    def last_logits(self, ids: Tensor) -> Tensor:
        """ids (B, T) without padding -> the next-token logits after the last position (B, V): the whole prefix
        through the stack, only its last position through the output layer (generation without a cache)."""
        mask = self._mask(ids, torch.ones_like(ids, dtype=torch.bool))
        states, packing = self._states(ids, mask)
        return self.out(unpack(states, packing)[:, -1])

    def start_cache(self) -> LMCache:
        """An empty cache; ``step`` fills it."""
        return LMCache([None] * len(self.layers), [None] * len(self.layers))

    def step(self, cache: LMCache, ids: Tensor) -> Tensor:
        """Feed n new tokens of every row, ids (R, n) (the whole prompt at first, then one at a time), after the
        cache's t positions; returns their logits (R, n, V) and appends their keys and values to the cache.
        The same numbers as ``forward`` on the whole prefix, restricted to the new positions."""
        check_ids("ids", ids, None, "", self.max_len)
        check_values([("ids", ids, self.vocab_size)])
        t, n = cache.length, ids.shape[1]
        if t + n > self.max_len:
            raise ValueError(f"{t} cached + {n} new positions are more than the model's max_len={self.max_len}")
        x = self._embed(ids, offset=t)  # (R, n, d): positions t .. t + n - 1
        for i, layer in enumerate(cast("list[DecoderOnlyLayer]", list(self.layers))):

            def self_attention(h: Tensor, i: int = i, attn: PackedMultiHeadAttention = layer.self_attn) -> Tensor:
                q, k, v = attn.project_qkv(h)  # each (R, h, n, d_k)
                if n == 1:  # chapter 9's step: the one new query sees every cached key and itself
                    out, cache.k[i], cache.v[i] = attend_with_cache(q, k, v, cache.k[i], cache.v[i])
                    return attn.w_o(merge_heads(out))  # (R, 1, d)
                old_k, old_v = cache.k[i], cache.v[i]
                k = k if old_k is None else torch.cat([old_k, k], dim=2)  # (R, h, t + n, d_k)
                v = v if old_v is None else torch.cat([old_v, v], dim=2)
                cache.k[i], cache.v[i] = k, v
                mask = torch.ones(n, t + n, dtype=torch.bool, device=h.device).tril(diagonal=t)  # i sees j <= t + i
                return attn.attend(q, k, v, mask)[0]  # (R, n, d)

            x = layer.step(x, self_attention)
        cache.length += n
        return self.out(x if self.norm is None else self.norm(x))  # (R, n, V)
