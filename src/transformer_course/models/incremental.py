"""Incremental decoding of chapter 8's Transformer, the mechanism chapter 9 studies: a key/value cache, the
decoder step that reads it, and greedy decoding with it (``Transformer.generate`` decodes this way).

A decoder position only ever attends to itself and to earlier positions, so once a position is computed its
keys and values in every self-attention layer never change. ``DecoderCache`` keeps them, (rows, h, t, d_k) per
layer, and each step runs the decoder on the one new position: its query attends to the cached keys plus its
own. The cross-attention keys and values depend on the source only: they are projected once per sentence. A
step then costs O(t) instead of recomputing the whole prefix, O(t^2). Beam search (``decoding``) reorders the
cache's rows to follow its beams.

Shapes: R rows (sentences, or sentences x beams), T_x source length, t tokens so far, d = d_model, h heads,
V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .._checks import Model, check_ids, check_values, positive_int

__all__ = ["DecoderCache", "attend_with_cache", "check_decodable", "decoder_step", "greedy_decode", "start_decoding"]


def _attend_one(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention of one new query per row: q (R, h, 1, d_k) over k, v (R, h, t, d_k), mask broadcastable to
    (R, h, 1, t) or None -> output (R, h, 1, d_k), weights (R, h, 1, t). Written out instead of calling
    F.scaled_dot_product_attention: for a single query the fused kernel's set-up costs more than the maths."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attend_with_cache(
    q: Tensor, k_new: Tensor, v_new: Tensor, cache_k: Tensor | None, cache_v: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """One step of cached self-attention for the newest position.

    q, k_new, v_new (R, h, 1, d_k): the new position's projections; cache_k, cache_v (R, h, t, d_k) or None at
    the first step. Returns the output (R, h, 1, d_k) and the caches with the new position appended,
    (R, h, t + 1, d_k). No mask: the new position may see every earlier one, and nothing later exists yet.
    """
    k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)
    v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)
    return _attend_one(q, k, v)[0], k, v


@dataclass
class DecoderCache:
    """What a Transformer's decoder keeps between steps, for R rows (sentences, or sentences x beams)."""

    cross_k: list[Tensor]  # per layer (R, h, T_x, d_k): projected once from the encoder's output
    cross_v: list[Tensor]
    src_mask: Tensor  # (R, 1, 1, T_x) bool: padding keys of the source
    self_k: list[Tensor | None] = field(default_factory=list)  # per layer (R, h, t, d_k), growing by one per step
    self_v: list[Tensor | None] = field(default_factory=list)
    length: int = 0  # positions decoded so far
    cross_weights: Tensor | None = None  # (R, h, 1, T_x) the last layer's cross-attention at the last step, if asked

    def reorder(self, rows: Tensor) -> None:
        """Keep the rows ``rows`` (R',) in that order: beams follow the hypotheses they now extend."""
        pick = lambda ts: [None if t is None else t.index_select(0, rows) for t in ts]
        # pick keeps a tensor a tensor: the cross-attention lists, which hold no None, stay list[Tensor]
        self.cross_k, self.cross_v = pick(self.cross_k), pick(self.cross_v)  # type: ignore[assignment]
        self.self_k, self.self_v = pick(self.self_k), pick(self.self_v)
        self.src_mask = self.src_mask.index_select(0, rows)


def start_decoding(model: Model, src: Tensor, src_mask: Tensor, repeat: int = 1) -> DecoderCache:
    """Encode src (B, T_x) once and project the cross-attention keys and values of every decoder layer;
    ``repeat`` = K copies of each sentence's rows, next to each other (rows b K .. b K + K - 1: sentence b)."""
    memory = model.encode(src, src_mask)  # (B, T_x, d)
    if repeat > 1:
        memory, src_mask = memory.repeat_interleave(repeat, 0), src_mask.repeat_interleave(repeat, 0)
    kv = [layer.cross_attn.project_kv(memory) for layer in model.decoder.layers]
    n = len(model.decoder.layers)
    return DecoderCache([k for k, _ in kv], [v for _, v in kv], src_mask[:, None, None, :], [None] * n, [None] * n)


def decoder_step(model: Model, cache: DecoderCache, tokens: Tensor, need_weights: bool = False) -> Tensor:
    """Feed the newest token of every row, tokens (R,), and return the next-token logits (R, V); with
    ``need_weights`` the last layer's cross-attention weights are left in ``cache.cross_weights``.

    The same computation as ``model.decode`` on the whole prefix, restricted to its last position: each
    decoder layer's ``step``, with self-attention reading the cache instead of the prefix.
    """
    pos = cache.length
    if pos >= model.max_len:
        raise ValueError(f"the model has positions for {model.max_len} tokens only")
    y = model.positional(model.tgt_embed(tokens[:, None]) * math.sqrt(model.d_model), offset=pos)  # (R, 1, d)
    n = len(model.decoder.layers)
    for i, layer in enumerate(model.decoder.layers):

        def self_attention(h: Tensor, i: int = i, layer=layer) -> Tensor:
            q, k, v = layer.self_attn.project_qkv(h)  # each (R, h, 1, d_k)
            out, cache.self_k[i], cache.self_v[i] = attend_with_cache(q, k, v, cache.self_k[i], cache.self_v[i])
            return layer.self_attn.w_o(out.transpose(1, 2).flatten(2))  # merge heads: (R, 1, d)

        def cross_attention(h: Tensor, i: int = i, layer=layer) -> Tensor:
            q = layer.cross_attn.project_q(h)  # (R, h, 1, d_k)
            out, weights = _attend_one(q, cache.cross_k[i], cache.cross_v[i], cache.src_mask)
            if need_weights and i == n - 1:
                cache.cross_weights = weights
            return layer.cross_attn.w_o(out.transpose(1, 2).flatten(2))  # merge heads: (R, 1, d)

        y = layer.step(y, self_attention, cross_attention)
    if model.decoder.norm is not None:
        y = model.decoder.norm(y)
    cache.length += 1
    return model.out(y[:, 0])  # (R, V)


def check_decodable(model: nn.Module, src: object, src_mask: object, max_len: object) -> None:
    if not all(hasattr(model, a) for a in ("encode", "decoder", "tgt_embed", "positional", "out")):
        raise TypeError(
            f"decoding needs a transformer_course.models.transformer.Transformer, got {type(model).__name__}"
        )
    # The model's max_len and src_vocab are ints, which torch types Tensor | Module (a module's attribute); src and
    # src_mask are the tensors, and max_len the int, that check_ids and positive_int have found them to be.
    check_ids("src", src, src_mask, "src_mask", model.max_len)  # type: ignore[arg-type]
    check_values([("src", src, model.src_vocab)], [("src_mask", src_mask)])  # type: ignore[list-item]
    positive_int("max_len", max_len)
    if max_len > model.max_len:  # type: ignore[operator]
        raise ValueError(f"max_len={max_len} is more than the model's max_len={model.max_len} positions")


@torch.no_grad()
def greedy_decode(
    model: Model, src: Tensor, src_mask: Tensor, max_len: int, eos_id: int | None = 2, with_weights: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Greedy decoding with the key/value cache: tokens (B, L), L <= max_len, stopping once every row has
    written ``eos_id`` (never if None); with ``with_weights`` also the last decoder layer's cross-attention
    weights averaged over heads, (B, L, T_x). The same tokens as recomputing the prefix at every step.

    A row that has written ``eos_id`` leaves the batch (its cache rows are dropped, as beam search drops a
    done sentence), so each step runs only the rows still writing; its remaining positions hold ``eos_id``
    and zero weights."""
    check_decodable(model, src, src_mask, max_len)
    was_training = model.training
    model.eval()
    try:
        B, T_x = src.shape
        cache = start_decoding(model, src, src_mask)
        tokens = torch.full((B, max_len), 0 if eos_id is None else eos_id, dtype=torch.long, device=src.device)
        weights = None  # (B, max_len, T_x), in the dtype of the model's attention weights
        live = torch.arange(B, device=src.device)  # (n,): the rows still writing
        token = torch.full((B,), model.bos_id, dtype=torch.long, device=src.device)  # (n,)
        steps = 0
        while steps < max_len and live.numel() > 0:
            token = decoder_step(model, cache, token, with_weights).argmax(dim=-1)  # (n,)
            tokens[live, steps] = token
            if with_weights:
                assert cache.cross_weights is not None  # decoder_step left them there: it was asked for them
                step_weights = cache.cross_weights[:, :, 0].mean(dim=1)  # (n, T_x)
                weights = step_weights.new_zeros(B, max_len, T_x) if weights is None else weights
                weights[live, steps] = step_weights
            steps += 1
            if eos_id is not None:
                going = token != eos_id
                if not bool(going.all()):
                    keep = going.nonzero().squeeze(1)
                    cache.reorder(keep)
                    live, token = live[keep], token[keep]
        # With with_weights, the first step (max_len >= 1) set weights.
        return (tokens[:, :steps], weights[:, :steps]) if with_weights else tokens[:, :steps]  # type: ignore[index]
    finally:
        model.train(was_training)
