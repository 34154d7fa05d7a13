"""Chapter 4 exercises: the additive score, the attention weights and context, an attention decoder step."""

from __future__ import annotations

import math

import torch

from .. import bahdanau as ref
from .registry import Case, Exercise, Mistake, randn, register

NOTEBOOK = "04_bahdanau_attention.ipynb"


def _mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


# 4.1 the additive score -----------------------------------------------------------------------------


def _score_args(g: torch.Generator, b: int, t: int, d_dec: int, d_enc: int, d_att: int) -> tuple:
    return (
        randn(g, b, d_dec),
        randn(g, b, t, d_enc),
        randn(g, d_att, d_dec, scale=0.7),
        randn(g, d_att, d_enc, scale=0.7),
        randn(g, d_att),
    )


def _score_cases(g: torch.Generator) -> list[Case]:
    return [
        # The first case has H_dec = H_enc, so that swapping W and U gives wrong numbers rather than a shape error.
        Case("B = 2, T = 3, H_dec = 4, H_enc = 4, A = 3", _score_args(g, 2, 3, 4, 4, 3)),
        Case("B = 1, T = 4, H_dec = 3, H_enc = 5, A = 2", _score_args(g, 1, 4, 3, 5, 2)),
        Case("B = 3, T = 6, H_dec = 4, H_enc = 2, A = 5", _score_args(g, 3, 6, 4, 2, 5)),
        Case("B = 2, T = 1, H_dec = 6, H_enc = 6, A = 3", _score_args(g, 2, 1, 6, 6, 3)),
    ]


def _score_no_tanh(s, h, W, U, v):
    return ((s @ W.T)[:, None, :] + h @ U.T) @ v


def _score_swapped(s, h, W, U, v):
    return torch.tanh((s @ U.T)[:, None, :] + h @ W.T) @ v


def _score_no_v(s, h, W, U, v):
    return torch.tanh((s @ W.T)[:, None, :] + h @ U.T).sum(-1)


# 4.2 weights and context ----------------------------------------------------------------------------


def _context_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 2, T = 4, no mask", (randn(g, 2, 4, scale=2.0), randn(g, 2, 4, 3))),
        Case(
            "B = 3, T = 5, lengths 5, 3 and 1",
            (randn(g, 3, 5, scale=2.0), randn(g, 3, 5, 4)),
            {"mask": _mask([5, 3, 1], 5)},
        ),
        Case(
            "B = 2, T = 6, lengths 2 and 6", (randn(g, 2, 6, scale=2.0), randn(g, 2, 6, 2)), {"mask": _mask([2, 6], 6)}
        ),
    ]


def _masked(scores, mask):
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def _context_batch_axis(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=0)
    return (w[:, :, None] * h).sum(1), w


def _context_last_state(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=-1)
    return h[:, -1], w


def _context_mask_ignored(scores, h, mask=None):
    return ref.attention_context(scores, h, None)


def _context_mask_inverted(scores, h, mask=None):
    return ref.attention_context(scores, h, None if mask is None else ~mask)


def _context_unweighted(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=-1)
    return h.sum(1), w


# 4.3 the attention decoder step ---------------------------------------------------------------------


def _step_state(g: torch.Generator, vocab: int, d_emb: int, d_hidden: int, d_enc: int, d_att: int) -> dict:
    s = 1 / math.sqrt(d_hidden)
    return {
        "embedding.weight": randn(g, vocab, d_emb),
        "W.weight": randn(g, d_att, d_hidden, scale=0.8),
        "U.weight": randn(g, d_att, d_enc, scale=0.8),
        "v.weight": randn(g, 1, d_att),
        "cell.weight_ih": randn(g, 3 * d_hidden, d_emb + d_enc, scale=s),
        "cell.weight_hh": randn(g, 3 * d_hidden, d_hidden, scale=s),
        "cell.bias_ih": randn(g, 3 * d_hidden, scale=s),
        "cell.bias_hh": randn(g, 3 * d_hidden, scale=s),
        "out.weight": randn(g, vocab, d_hidden + d_enc, scale=s),
        "out.bias": randn(g, vocab, scale=0.1),
    }


def _step_cases(g: torch.Generator) -> list[Case]:
    init = {"vocab_size": 7, "d_emb": 3, "d_hidden": 4, "d_enc": 5, "d_att": 6}
    cases = []
    for b, t, lengths in ((1, 3, [3]), (3, 5, [5, 2, 4]), (2, 4, [1, 4])):
        args = (torch.randint(3, 7, (b,), generator=g), randn(g, b, 4), randn(g, b, t, 5))
        cases.append(
            Case(
                f"B = {b}, T = {t}, lengths {lengths}",
                args,
                {"mask": _mask(lengths, t)},
                init,
                _step_state(g, 7, 3, 4, 5, 6),
            )
        )
    return cases


class _StepQueryNewState(ref.AttentionDecoderStep):
    """Attention queried with a state updated without the context first."""

    def forward(self, y_prev, s, h, mask=None, keys=None):
        scores = ref.additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])
        context, weights = ref.attention_context(scores, h, mask)
        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)
        scores = ref.additive_score(s_new, h, self.W.weight, self.U.weight, self.v.weight[0])
        context, weights = ref.attention_context(scores, h, mask)
        return self.out(torch.cat([s_new, context], -1)), s_new, weights


class _StepLastState(ref.AttentionDecoderStep):
    def forward(self, y_prev, s, h, mask=None, keys=None):
        scores = ref.additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])
        _, weights = ref.attention_context(scores, h, mask)
        context = h[:, -1]
        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)
        return self.out(torch.cat([s_new, context], -1)), s_new, weights


class _StepMaskIgnored(ref.AttentionDecoderStep):
    def forward(self, y_prev, s, h, mask=None, keys=None):
        return super().forward(y_prev, s, h, None)


register(
    Exercise(
        id="4.1",
        title="the additive score",
        idea=(
            "each encoder state is scored by a small network that sees it with the decoder state: project both "
            "into one space, add, squash, and read one number out."
        ),
        points=2,
        name="additive_score",
        kind="function",
        reference=ref.additive_score,
        make_cases=_score_cases,
        mistakes=(
            Mistake("the tanh is missing: e = v . tanh(W s + U h).", _score_no_tanh),
            Mistake("W and U are swapped: W multiplies the decoder state s, U the encoder states h.", _score_swapped),
            Mistake(
                "the scores are summed over the attention dimension instead of taking the dot product with v.",
                _score_no_v,
            ),
        ),
    ),
    Exercise(
        id="4.2",
        title="attention weights and context",
        idea=(
            "a softmax over the input positions turns the scores into weights, with padding excluded before it; "
            "the context is the weighted sum of the encoder states."
        ),
        points=3,
        name="attention_context",
        kind="function",
        reference=ref.attention_context,
        make_cases=_context_cases,
        mistakes=(
            Mistake(
                "the softmax runs over the batch (dim=0): each sequence's weights over its source positions "
                "(dim=-1) must sum to one.",
                _context_batch_axis,
            ),
            Mistake(
                "the context is the last encoder state: it must be the weighted sum of all of them.",
                _context_last_state,
            ),
            Mistake(
                "the context is the plain sum of the states: weight each one by its attention weight.",
                _context_unweighted,
            ),
            Mistake("the mask is ignored: padding positions must get exactly zero weight.", _context_mask_ignored),
            Mistake(
                "the mask is inverted: True marks a real token, so fill the scores where the mask is False.",
                _context_mask_inverted,
            ),
        ),
    ),
    Exercise(
        id="4.3",
        title="an attention decoder step",
        idea=(
            "the previous state asks the question: score, weigh and sum the encoder states with your two "
            "functions, feed the context to the cell beside the embedding, and read the logits from the new "
            "state and the context."
        ),
        points=3,
        name="AttentionDecoderStep",
        kind="module",
        reference=ref.AttentionDecoderStep,
        make_cases=_step_cases,
        mistakes=(
            Mistake(
                "the context uses only the last encoder state: use attention_context over all of them.", _StepLastState
            ),
            Mistake("the mask is not passed on: padding positions get attention.", _StepMaskIgnored),
            Mistake(
                "the attention is queried with the new state: Bahdanau's decoder queries with the previous state "
                "s, before the cell updates it.",
                _StepQueryNewState,
            ),
        ),
    ),
)
