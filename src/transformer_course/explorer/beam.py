"""Beam search step by step, for chapter 9's explorer: ``beam_steps`` runs ``decoding.beam_search``'s own loop for
one sentence (the same start_decoding, decoder_step, rank_candidates, split_candidates and normalised_score, on
the same K rows) and records, at each step, the live hypotheses and those that finish, each with its back-pointer
(which live hypothesis of the step before it extends). Its result is beam_search's for a batch of one, to the bit:
``beam_steps`` checks it against a run of beam_search itself when asked (``check=True``), and the tests do.

``beam_data`` turns a trace into what the page shows: per step, [back-pointer, piece, log P] for each live
hypothesis and [back-pointer, piece, log P, score] for each that finishes, log P and scores rounded; the page
follows the back-pointers to spell each hypothesis out. Step 0 is <bos> alone (index 0); steps count from 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .._checks import Model, positive_int
from ..decoding.search import (
    beam_search,
    decoder_step,
    log_probs,
    normalised_score,
    rank_candidates,
    split_candidates,
    start_decoding,
)
from ..models.incremental import check_decodable

__all__ = ["BeamStep", "BeamTrace", "beam_data", "beam_steps", "hypotheses"]

DECIMALS = 3  # log-probabilities and scores on the page, as explorer.py rounds the outputs' scores


@dataclass
class BeamStep:
    live: list[tuple[int, int, float]]  # (back-pointer, token, log P) of each live one after the step, best first
    finished: list[tuple[int, int, float, float]]  # (back-pointer, token, log P, score) of those that finish at it


@dataclass
class BeamTrace:
    steps: list[BeamStep] = field(default_factory=list)
    finished: list[tuple[float, list[int]]] = field(default_factory=list)  # (score, tokens), best first: beam_search's
    stop: str = ""  # why the search stopped: "beam" (K finished) or "limit" (max_len steps)

    @property
    def tokens(self) -> list[int]:
        """The chosen output, without its <eos>: the best finished hypothesis."""
        return self.finished[0][1]

    @property
    def score(self) -> float:
        return self.finished[0][0]


@torch.no_grad()
def beam_steps(
    model: Model, src_ids: Sequence[int], beam_size: int, max_len: int, alpha: float = 0.6, eos_id=2, check=False
) -> BeamTrace:
    """beam_search (decoding.py) of one sentence, ``src_ids``, recorded step by step; with ``check``, compared with
    beam_search's own result (every finished hypothesis and score), and a difference raises AssertionError."""
    src = torch.tensor([list(src_ids)])  # (1, T_x)
    mask = torch.ones_like(src, dtype=torch.bool)
    check_decodable(model, src, mask, max_len)
    k = positive_int("beam_size", beam_size)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 <= alpha <= 10:
        raise ValueError(f"alpha must be a number from 0 to 10, got {alpha!r}")
    was_training = model.training
    model.eval()
    try:
        trace = _steps(model, src, mask, k, max_len, float(alpha), eos_id)
    finally:
        model.train(was_training)
    if check:
        result = beam_search(model, src, mask, k, max_len, alpha, eos_id)
        if result.finished[0] != trace.finished:
            raise AssertionError(f"the steps give {trace.finished}, beam_search {result.finished[0]}")
    return trace


def _steps(model: Model, src, mask, k: int, max_len: int, alpha: float, eos_id: int) -> BeamTrace:
    """decoding._beam_search for B = 1, recording what it does."""
    cache = start_decoding(model, src, mask, repeat=k)
    scores = torch.full((1, k), -math.inf)
    scores[0, 0] = 0.0  # only beam 0 is alive at the start: <bos>
    prefix = torch.full((k, 1), model.bos_id, dtype=torch.long)  # (K, t + 1)
    trace = BeamTrace()
    for step in range(1, max_len + 1):
        logp = log_probs(decoder_step(model, cache, prefix[:, -1]))  # (K, V)
        top, beam, token = rank_candidates(scores, logp.view(1, k, -1))  # (1, 2K) each, best first
        last = step == max_len
        ends, order = split_candidates(top, token, k, eos_id, last)
        done: list[tuple[int, int, float, float]] = []
        rows = prefix[:, 1:].tolist()
        for _, j in ends:
            back, tok, log_prob = int(beam[0, j].item()), int(token[0, j].item()), float(top[0, j].item())
            score = float(normalised_score(log_prob, step, alpha))  # as beam_search scores it
            trace.finished.append((score, rows[back] + ([] if tok == eos_id else [tok])))
            done.append((back, tok, log_prob, score))
        stop = "limit" if last else "beam" if len(trace.finished) >= k else ""
        ranks = [] if stop else order[0].tolist()  # the live ones, when the search goes on
        live = [(int(beam[0, r].item()), int(token[0, r].item()), float(top[0, r].item())) for r in ranks]
        trace.steps.append(BeamStep(live, done))
        if stop:
            trace.stop = stop
            break
        kept = torch.tensor([0])
        reorder = (kept[:, None] * k + beam.gather(1, order)[kept]).flatten()  # (K,) the row each new beam extends
        scores = top.gather(1, order)[kept]
        cache.reorder(reorder)
        prefix = torch.cat([prefix.index_select(0, reorder), token.gather(1, order)[kept].flatten()[:, None]], dim=1)
    trace.finished.sort(key=lambda h: -h[0])
    return trace


def hypotheses(trace: BeamTrace, step: int) -> tuple[list[tuple[list[int], float]], list[tuple[list[int], float]]]:
    """After ``step`` (1 to len(trace.steps)): the live hypotheses (tokens after <bos>, log P), best first, and the
    finished ones so far (tokens, <eos> included when written; score), best score first: what the page lists."""
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= len(trace.steps):
        raise IndexError(f"step {step!r} is out of range: the search took steps 1 to {len(trace.steps)}")
    prefixes: list[list[int]] = [[]]  # step 0: <bos> alone
    finished: list[tuple[list[int], float]] = []
    for s in trace.steps[:step]:
        finished += [(prefixes[back] + [tok], score) for back, tok, _, score in s.finished]
        live = [(prefixes[back] + [tok], log_prob) for back, tok, log_prob in s.live]
        prefixes = [tokens for tokens, _ in live]
    finished.sort(key=lambda h: -h[1])  # stable: ties keep the order they finished in, as beam_search's
    return live, finished


def beam_data(trace: BeamTrace, piece: Callable[[int], str]) -> dict:
    """The trace as the page stores it: pieces as text, log P and scores rounded; a live hypothesis with no finite
    log P (a beam that a tiny vocabulary leaves empty) is left out, last in its step, which nothing extends."""
    steps = []
    for s in trace.steps:
        live = [[b, piece(t), round(p, DECIMALS)] for b, t, p in s.live if math.isfinite(p)]
        done = [[b, piece(t), round(p, DECIMALS), round(q, DECIMALS)] for b, t, p, q in s.finished]
        steps.append({"live": live, "done": done})
    return {"steps": steps, "stop": trace.stop}
