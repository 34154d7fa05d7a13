"""Decoding a trained Transformer (chapter 9): incremental decoding with a key/value cache, batched greedy
decoding and batched beam search with a length penalty.

Incremental decoding. A decoder position only ever attends to itself and to earlier positions, so once a
position is computed its keys and values in every self-attention layer never change. ``DecoderCache`` keeps
them, (rows, h, t, d_k) per layer, and each step runs the decoder on the one new position: its query attends
to the cached keys plus its own. The cross-attention keys and values depend on the source only: they are
projected once per sentence. A step then costs O(t) instead of recomputing the whole prefix, O(t^2).

Beam search. Every beam of every sentence is one row of the same tensors (B sentences x K beams = B K rows):
one decoder step serves them all. At each step the K beams of a sentence propose K x V continuations; the
best ones over all of them (not K per beam) survive, remembering which beam they extend (the back-pointer),
and the cache rows are reordered to follow them. A continuation that writes <eos> is set aside as a
finished hypothesis and scored with the length penalty of Wu et al. (2016), lp(n) = ((5 + n) / 6) ** alpha:
log-probabilities only fall as a hypothesis grows, so without it short outputs win. A sentence is done once
it has K finished hypotheses, and its rows leave the batch; at ``max_len`` the best K candidates finish as
they are (greedy decoding, too, stops there without an <eos>).

Shapes: B sentences, K beams, R = B K rows, T_x source length, t tokens so far, d = d_model, h heads, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["BeamResult", "DecoderCache", "attend_with_cache", "beam_search", "decoder_step", "greedy_decode",
           "length_penalty", "start_decoding"]


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's lp(n) = ((5 + n) / 6) ** alpha: a hypothesis's score is its log-probability divided by lp(n)."""
    return ((5 + length) / 6) ** alpha


def _attend_one(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention of one new query per row: q (R, h, 1, d_k) over k, v (R, h, t, d_k), mask broadcastable to
    (R, h, 1, t) or None -> output (R, h, 1, d_k), weights (R, h, 1, t). Written out instead of calling
    F.scaled_dot_product_attention: for a single query the fused kernel's set-up costs more than the maths."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attend_with_cache(q: Tensor, k_new: Tensor, v_new: Tensor, cache_k: Tensor | None, cache_v: Tensor | None
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
        pick = lambda ts: [None if t is None else t.index_select(0, rows) for t in ts]  # noqa: E731
        self.cross_k, self.cross_v = pick(self.cross_k), pick(self.cross_v)
        self.self_k, self.self_v = pick(self.self_k), pick(self.self_v)
        self.src_mask = self.src_mask.index_select(0, rows)


def start_decoding(model: nn.Module, src: Tensor, src_mask: Tensor, repeat: int = 1) -> DecoderCache:
    """Encode src (B, T_x) once and project the cross-attention keys and values of every decoder layer;
    ``repeat`` = K copies of each sentence's rows, next to each other (rows b K .. b K + K - 1: sentence b)."""
    memory = model.encode(src, src_mask)  # (B, T_x, d)
    if repeat > 1:
        memory, src_mask = memory.repeat_interleave(repeat, 0), src_mask.repeat_interleave(repeat, 0)
    kv = [layer.cross_attn.project_kv(memory) for layer in model.decoder.layers]
    n = len(model.decoder.layers)
    return DecoderCache([k for k, _ in kv], [v for _, v in kv], src_mask[:, None, None, :], [None] * n, [None] * n)


def decoder_step(model: nn.Module, cache: DecoderCache, tokens: Tensor, need_weights: bool = False) -> Tensor:
    """Feed the newest token of every row, tokens (R,), and return the next-token logits (R, V); with
    ``need_weights`` the last layer's cross-attention weights are left in ``cache.cross_weights``.

    The same computation as ``model.decode`` on the whole prefix, restricted to its last position: each
    decoder layer's residual sub-layers, with self-attention reading the cache instead of the prefix.
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

        y = layer.residual(y, self_attention, layer.self_attn_norm)
        y = layer.residual(y, cross_attention, layer.cross_attn_norm)
        y = layer.residual(y, layer.ff, layer.ff_norm)
    if model.decoder.norm is not None:
        y = model.decoder.norm(y)
    cache.length += 1
    return model.out(y[:, 0])  # (R, V)


def _check(model: nn.Module, src: object, src_mask: object, max_len: object) -> None:
    from .transformer import _check_ids, _check_values

    if not all(hasattr(model, a) for a in ("encode", "decoder", "tgt_embed", "positional", "out")):
        raise TypeError(f"decoding needs a transformer_course.transformer.Transformer, got {type(model).__name__}")
    _check_ids("src", src, src_mask, "src_mask", model.max_len)
    _check_values([("src", src, model.src_vocab)], [("src_mask", src_mask)])
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int, got {max_len!r}")
    if max_len > model.max_len:
        raise ValueError(f"max_len={max_len} is more than the model's max_len={model.max_len} positions")


@torch.no_grad()
def greedy_decode(model: nn.Module, src: Tensor, src_mask: Tensor, max_len: int, eos_id: int | None = 2,
                  with_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Greedy decoding with the key/value cache: tokens (B, L), L <= max_len, stopping once every row has
    written ``eos_id`` (never if None); with ``with_weights`` also the last decoder layer's cross-attention
    weights averaged over heads, (B, L, T_x). The same tokens as recomputing the prefix at every step.

    A row that has written ``eos_id`` leaves the batch (its cache rows are dropped, as beam search drops a
    done sentence), so each step runs only the rows still writing; its remaining positions hold ``eos_id``
    and zero weights."""
    _check(model, src, src_mask, max_len)
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
        return (tokens[:, :steps], weights[:, :steps]) if with_weights else tokens[:, :steps]
    finally:
        model.train(was_training)


@dataclass
class BeamResult:
    tokens: list[list[int]]  # per sentence, the best hypothesis, without its <eos>
    scores: list[float]  # its length-normalised score, log P / lp(n)
    finished: list[list[tuple[float, list[int]]]]  # per sentence, every finished hypothesis (score, tokens), best first
    steps: int  # decoder steps taken


@torch.no_grad()
def beam_search(model: nn.Module, src: Tensor, src_mask: Tensor, beam_size: int, max_len: int,
                alpha: float = 0.6, eos_id: int = 2) -> BeamResult:
    """Batched beam search: the K = ``beam_size`` beams of the B sentences advance together as B K rows.

    A hypothesis of n tokens, <eos> included, scores log P(y_1 .. y_n | x) / lp(n) with lp(n) = ((5 + n) / 6) ** alpha
    (alpha = 0: no length penalty). Returns the best finished hypothesis of every sentence.
    """
    _check(model, src, src_mask, max_len)
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 <= alpha <= 10:
        raise ValueError(f"alpha must be a number from 0 to 10, got {alpha!r}")
    was_training = model.training
    model.eval()
    try:
        return _beam_search(model, src, src_mask, beam_size, max_len, float(alpha), eos_id)
    finally:
        model.train(was_training)


def _beam_search(model, src, src_mask, k: int, max_len: int, alpha: float, eos_id: int) -> BeamResult:
    b, device = src.shape[0], src.device
    cache = start_decoding(model, src, src_mask, repeat=k)
    # Only beam 0 is alive at the start (all K beams would otherwise propose the same K continuations).
    scores = torch.full((b, k), -math.inf, device=device)
    scores[:, 0] = 0.0  # (B, K) log-probabilities of the live hypotheses
    prefix = torch.full((b * k, 1), model.bos_id, dtype=torch.long, device=device)  # (R, t + 1), <bos> first
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    # The sentences still being searched, in row order: a done sentence's rows leave the batch, so that the
    # steps a few long sentences take cost nothing for the others (B shrinks to the live sentences).
    live = list(range(b))
    step = 0
    for step in range(1, max_len + 1):
        n = len(live)
        logp = F.log_softmax(decoder_step(model, cache, prefix[:, -1]).float(), dim=-1)  # (n K, V)
        vocab = logp.shape[1]
        candidates = (scores[:, :, None] + logp.view(n, k, vocab)).view(n, k * vocab)  # (n, K V)
        # 2K candidates: at most K of them end in <eos> (one per beam), so K live ones always remain.
        top, index = candidates.topk(min(2 * k, k * vocab), dim=1)  # (n, 2K), best first
        beam, token = index // vocab, index % vocab  # back-pointers and new tokens
        is_eos = token == eos_id
        last = step == max_len  # out of room: the best K candidates end here, <eos> or not (as greedy's would)
        ends = (torch.isfinite(top[:, :k]) & (is_eos[:, :k] | last)).nonzero().tolist()
        if ends:  # finished: among the best K candidates
            rows = prefix[:, 1:].tolist()
            lp = length_penalty(step, alpha)
            for i, j in ends:
                tail = [] if token[i, j].item() == eos_id else [token[i, j].item()]
                finished[live[i]].append((top[i, j].item() / lp, rows[i * k + beam[i, j].item()] + tail))
        if last:
            break
        # Live: the best K candidates that do not end in <eos>, in order (a stable sort puts them first).
        order = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # (n, K)
        keep = [i for i in range(n) if len(finished[live[i]]) < k]  # a sentence with K finished ones is done
        if not keep:
            break
        kept = torch.tensor(keep, device=device)  # (n',)
        rows = (kept[:, None] * k + beam.gather(1, order)[kept]).flatten()  # (n' K,) the row each new beam extends
        scores = top.gather(1, order)[kept]
        cache.reorder(rows)
        prefix = torch.cat([prefix.index_select(0, rows), token.gather(1, order)[kept].flatten()[:, None]], dim=1)
        live = [live[i] for i in keep]
    for hyps in finished:
        hyps.sort(key=lambda h: -h[0])
    return BeamResult([h[0][1] for h in finished], [h[0][0] for h in finished], finished, step)
