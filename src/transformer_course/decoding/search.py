"""Decoding a trained Transformer (chapter 9): batched greedy decoding and batched beam search with a length
penalty, both on the key/value cache of ``incremental`` (its names are re-exported here, where chapter 9
uses them).

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
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import positive_int
from ..models.incremental import (
    DecoderCache,
    attend_with_cache,
    check_decodable,
    decoder_step,
    greedy_decode,
    start_decoding,
)

__all__ = [
    "BeamResult",
    "DecoderCache",
    "attend_with_cache",
    "beam_search",
    "beam_step",
    "decoder_step",
    "greedy_decode",
    "length_penalty",
    "log_probs",
    "normalised_score",
    "rank_candidates",
    "select_hypotheses",
    "split_candidates",
    "start_decoding",
]


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's lp(n) = ((5 + n) / 6) ** alpha: a hypothesis's score is its log-probability divided by lp(n)."""
    return ((5 + length) / 6) ** alpha


def normalised_score(log_prob: float | Tensor, length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT's score of finished hypotheses: log P / lp(n), lp(n) = ((5 + n) / 6) ** alpha (exercise 9.1).

    log_prob (N,) float, the hypotheses' log-probabilities, and length (N,) int64, their lengths n with <eos>;
    or one hypothesis's, as numbers (beam search scores its finished hypotheses one by one).
    """
    if isinstance(length, Tensor):
        length = length.to(log_prob.dtype)  # type: ignore[union-attr]  # with a tensor of log-probabilities
    return log_prob / length_penalty(length, alpha)


def log_probs(logits: Tensor) -> Tensor:
    """log_softmax over the last dimension, in float32 at least: a bfloat16 model's logits are widened, a float64
    model's (the explorer's, whose stored digits must not depend on the processor) stay float64."""
    return F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


def rank_candidates(scores: Tensor, logp: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Every continuation of every live hypothesis of n sentences competes; the best 2K of each sentence's K V.

    scores (n, K): the live hypotheses' log-probabilities (-inf for an empty beam); logp (n, K, V): each one's
    next-token log-probabilities. -> top (n, 2K) the candidates' scores, best first; beam (n, 2K) the hypothesis
    each extends (the back-pointer); token (n, 2K) the token it adds. 2K: at most K of them end in <eos>, one per
    beam, so K others always remain to live on.
    """
    n, k, vocab = logp.shape
    candidates = (scores[:, :, None] + logp).reshape(n, k * vocab)  # entry b V + v: hypothesis b, then token v
    top, index = candidates.topk(min(2 * k, k * vocab), dim=1)
    return top, index // vocab, index % vocab


def split_candidates(top: Tensor, token: Tensor, k: int, eos_id: int, last: bool = False) -> tuple[list, Tensor]:
    """Which ranked candidates finish and which live on: those among the best K that end in <eos> finish (at the
    length limit, ``last``, all of the best K do), and the best K that do not end in <eos> stay live.

    top, token: (n, 2K) from rank_candidates -> (finished: [(sentence, rank), ...], live ranks (n, K), in order).
    """
    is_eos = token == eos_id
    ends = (torch.isfinite(top[:, :k]) & (is_eos[:, :k] | last)).nonzero().tolist()
    order = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # a stable sort: non-<eos> first
    return ends, order


def beam_step(prefixes, scores: Tensor, logp: Tensor, beam_size: int, eos_id: int):
    """One step of beam search for one sentence (the reference of exercise 9.2): the step ``beam_search`` takes
    for every sentence at once, through the same rank_candidates and split_candidates.

    prefixes: n <= beam_size live hypotheses, each a tuple of token ids; scores (n,) their log-probabilities;
    logp (n, V): each one's next-token log-probabilities. Returns ((live prefixes, their scores (K,)),
    (finished prefixes, <eos> included, their scores (F,))), each best first; scores are accumulated
    log-probabilities, not normalised.
    """
    n, vocab = logp.shape
    if not 1 <= n <= beam_size or len(prefixes) != n or scores.shape != (n,):
        raise ValueError(
            f"need 1 to beam_size = {beam_size} hypotheses, with one score and one row of logp each; "
            f"got {len(prefixes)} prefixes, scores {tuple(scores.shape)} and logp {tuple(logp.shape)}"
        )
    padded = scores.new_full((1, beam_size), -math.inf)  # the empty beams of a sentence that has fewer than K
    padded[0, :n] = scores
    rows = logp.new_zeros(1, beam_size, vocab)
    rows[0, :n] = logp
    top, beam, token = rank_candidates(padded, rows)
    return select_hypotheses(prefixes, top[0], beam[0], token[0], beam_size, eos_id)


def select_hypotheses(prefixes, top: Tensor, beam: Tensor, token: Tensor, k: int, eos_id: int):
    """One sentence's candidates in rank order, as hypotheses: candidate r is prefix ``beam[r]`` followed by
    ``token[r]``, with score ``top[r]`` (each (m,)). Split by split_candidates; a live one has a finite score and
    does not end in <eos>. Returns ((live prefixes, scores), (finished prefixes, scores)), as beam_step."""
    ends, order = split_candidates(top[None], token[None], k, eos_id)
    live = [r for r in order[0].tolist() if math.isfinite(top[r].item()) and token[r].item() != eos_id]
    done = [r for _, r in ends]

    def hypothesis(r: int) -> tuple:  # the back-pointer says which prefix it extends
        return tuple(prefixes[beam[r].item()]) + (token[r].item(),)

    pick = lambda ranks: top[torch.tensor(ranks, dtype=torch.long)]
    return (tuple(map(hypothesis, live)), pick(live)), (tuple(map(hypothesis, done)), pick(done))


@dataclass
class BeamResult:
    tokens: list[list[int]]  # per sentence, the best hypothesis, without its <eos>
    scores: list[float]  # its length-normalised score, log P / lp(n)
    finished: list[list[tuple[float, list[int]]]]  # per sentence, every finished hypothesis (score, tokens), best first
    steps: int  # decoder steps taken


@torch.no_grad()
def beam_search(
    model: nn.Module, src: Tensor, src_mask: Tensor, beam_size: int, max_len: int, alpha: float = 0.6, eos_id: int = 2
) -> BeamResult:
    """Batched beam search: the K = ``beam_size`` beams of the B sentences advance together as B K rows.

    A hypothesis of n tokens, <eos> included, scores log P(y_1 .. y_n | x) / lp(n) with lp(n) = ((5 + n) / 6) ** alpha
    (alpha = 0: no length penalty). Returns the best finished hypothesis of every sentence.
    """
    check_decodable(model, src, src_mask, max_len)
    positive_int("beam_size", beam_size)
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
    rows: list | Tensor  # the prefixes as lists of ids, then the rows that the new beams extend
    for step in range(1, max_len + 1):
        n = len(live)
        logp = log_probs(decoder_step(model, cache, prefix[:, -1]))  # (n K, V)
        top, beam, token = rank_candidates(scores, logp.view(n, k, -1))  # (n, 2K) each, best first
        last = step == max_len  # out of room: the best K candidates end here, <eos> or not (as greedy's would)
        ends, order = split_candidates(top, token, k, eos_id, last)  # order (n, K): the live candidates' ranks
        if ends:  # finished: among the best K candidates
            rows = prefix[:, 1:].tolist()
            for i, j in ends:
                tail = [] if token[i, j].item() == eos_id else [token[i, j].item()]
                score = normalised_score(top[i, j].item(), step, alpha)  # step tokens, the last one included
                finished[live[i]].append((score, rows[i * k + beam[i, j].item()] + tail))
        if last:
            break
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


def max_output_length(src_len: int) -> int:
    """Greedy decoding stops at <eos> or at this many tokens: Spanish runs a little longer than English."""
    return int(1.5 * src_len) + 10
