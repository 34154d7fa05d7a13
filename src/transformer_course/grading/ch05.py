"""Chapter 5 exercises: attention scores, the causal mask, scaled dot-product attention, a self-attention layer."""

from __future__ import annotations

import math

import torch

from .. import attention as ref
from .registry import Case, Exercise, Mistake, randn, register

NOTEBOOK = "05_self_attention.ipynb"

# The exercises build these; using PyTorch's own would skip the point of the exercise.
BUILTIN_ATTENTION = ("scaled_dot_product_attention", "MultiheadAttention", "_scaled_dot_product_attention")


def _lengths_mask(lengths: list[int], t: int) -> torch.Tensor:
    return ref.padding_mask(torch.tensor(lengths), t)


# 5.1 attention scores ------------------------------------------------------------------------


def _score_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("one sequence, T_q = T_k = 4, d_k = 3", (randn(g, 4, 3), randn(g, 4, 3))),
        Case("batch of 2, T_q = 3, T_k = 5, d_k = 4", (randn(g, 2, 3, 4), randn(g, 2, 5, 4))),
        Case("two batch dimensions (2, 2), T_q = 3, T_k = 6, d_k = 8", (randn(g, 2, 2, 3, 8), randn(g, 2, 2, 6, 8))),
    ]


def _scores_unscaled(q, k):
    return q @ k.transpose(-2, -1)


def _scores_over_dk(q, k):
    return q @ k.transpose(-2, -1) / q.shape[-1]


def _scores_transposed(q, k):
    return k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])


# 5.2 causal mask -----------------------------------------------------------------------------


def _causal_cases(g: torch.Generator) -> list[Case]:
    sizes = torch.randint(2, 10, (3,), generator=g).tolist()
    return [Case("t = 1", (1,))] + [Case(f"t = {t}", (t,)) for t in sizes]


def _causal_upper(t):
    return torch.ones(t, t, dtype=torch.bool).triu()


def _causal_strict(t):
    return torch.ones(t, t, dtype=torch.bool).tril(-1)


def _causal_float(t):
    return torch.ones(t, t).tril()


# 5.3 scaled dot-product attention ------------------------------------------------------------


def _sdpa_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("no mask, T_q = 3, T_k = 4", (randn(g, 2, 3, 5), randn(g, 2, 4, 5), randn(g, 2, 4, 6))),
        Case(
            "padding mask (lengths 2 and 4)",
            (randn(g, 2, 4, 5), randn(g, 2, 4, 5), randn(g, 2, 4, 3)),
            {"mask": _lengths_mask([2, 4], 4)},
        ),
        Case(
            "causal mask, T = 5",
            (randn(g, 2, 5, 4), randn(g, 2, 5, 4), randn(g, 2, 5, 4)),
            {"mask": ref.causal_mask(5)},
        ),
        Case(
            "two batch dimensions with a padding mask",
            (randn(g, 2, 3, 4, 8), randn(g, 2, 3, 6, 8), randn(g, 2, 3, 6, 2)),
            {"mask": _lengths_mask([3, 6], 6)[:, None]},
        ),
    ]


def _softmax_attend(scores, v, mask):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def _sdpa_unscaled(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1), v, mask)


def _sdpa_wrong_axis(q, k, v, mask=None):
    scores = ref.attention_scores(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-2)
    return w @ v, w


def _sdpa_mask_ignored(q, k, v, mask=None):
    return _softmax_attend(ref.attention_scores(q, k), v, None)


def _sdpa_mask_inverted(q, k, v, mask=None):
    return _softmax_attend(ref.attention_scores(q, k), v, None if mask is None else ~mask)


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    w = torch.softmax(ref.attention_scores(q, k), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w


def _sdpa_mask_zero_fill(q, k, v, mask=None):
    scores = ref.attention_scores(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


# 5.4 self-attention layer --------------------------------------------------------------------


def _layer_state(g: torch.Generator, d_model: int, d_k: int, d_v: int) -> dict:
    scale = 1 / math.sqrt(d_model)
    return {
        "w_q.weight": randn(g, d_k, d_model) * scale,
        "w_k.weight": randn(g, d_k, d_model) * scale,
        "w_v.weight": randn(g, d_v, d_model) * scale,
    }


def _layer_cases(g: torch.Generator) -> list[Case]:
    init = {"d_model": 6, "d_k": 4, "d_v": 5}
    return [
        Case("no mask, B = 2, T = 4", (randn(g, 2, 4, 6),), init=init, state=_layer_state(g, 6, 4, 5)),
        Case("causal mask, T = 5", (randn(g, 2, 5, 6),), {"mask": ref.causal_mask(5)}, init, _layer_state(g, 6, 4, 5)),
        Case(
            "padding mask (lengths 3 and 5)",
            (randn(g, 2, 5, 6),),
            {"mask": _lengths_mask([3, 5], 5)},
            init,
            _layer_state(g, 6, 4, 5),
        ),
    ]


class _LayerQKSwapped(ref.SelfAttention):
    def forward(self, x, mask=None):
        return ref.scaled_dot_product_attention(self.w_k(x), self.w_q(x), self.w_v(x), mask)


class _LayerValuesUnprojected(ref.SelfAttention):
    def forward(self, x, mask=None):
        return ref.scaled_dot_product_attention(self.w_q(x), self.w_k(x), x, mask)


register(
    Exercise(
        id="5.1",
        title="attention scores",
        idea=(
            "every query meets every key in a dot product; dividing by the square root of the key size keeps the "
            "scores at unit variance."
        ),
        points=2,
        name="attention_scores",
        kind="function",
        reference=ref.attention_scores,
        make_cases=_score_cases,
        mistakes=(
            Mistake("the scores are not divided by sqrt(d_k).", _scores_unscaled),
            Mistake("the scores are divided by d_k; divide by its square root, sqrt(d_k).", _scores_over_dk),
            Mistake(
                "your scores are transposed: row i should hold query i against every key, q @ k^T, not k @ q^T.",
                _scores_transposed,
            ),
        ),
    ),
    Exercise(
        id="5.2",
        title="the causal mask",
        idea=(
            "query i may see key j exactly when j is not after i: the allowed pairs form a triangle that "
            "includes the diagonal."
        ),
        points=2,
        name="causal_mask",
        kind="function",
        reference=ref.causal_mask,
        make_cases=_causal_cases,
        mistakes=(
            Mistake(
                "your mask lets each position see the future: keep the lower triangle, not the upper.", _causal_upper
            ),
            Mistake("the diagonal is masked: a position may always attend to itself.", _causal_strict),
            Mistake("return a boolean tensor (dtype=torch.bool), True where attending is allowed.", _causal_float),
        ),
    ),
    Exercise(
        id="5.3",
        title="scaled dot-product attention with a mask",
        idea=(
            "hide the forbidden keys before the softmax, so that they get exactly zero weight and the others "
            "still sum to one; then weigh the values."
        ),
        points=3,
        name="scaled_dot_product_attention",
        kind="function",
        reference=ref.scaled_dot_product_attention,
        make_cases=_sdpa_cases,
        mistakes=(
            Mistake("the scores are not divided by sqrt(d_k).", _sdpa_unscaled),
            Mistake(
                "the softmax runs over the queries (dim=-2); each query's weights over the keys (dim=-1) must sum to one.",
                _sdpa_wrong_axis,
            ),
            Mistake("the mask is ignored: masked keys must get exactly zero weight.", _sdpa_mask_ignored),
            Mistake(
                "the mask is inverted: True means 'may attend', so fill the scores where the mask is False.",
                _sdpa_mask_inverted,
            ),
            Mistake(
                "the mask is applied after the softmax, so the weights no longer sum to one: mask the scores with -inf before it.",
                _sdpa_mask_after_softmax,
            ),
            Mistake("masked scores are set to 0, which still gets weight exp(0): use -inf.", _sdpa_mask_zero_fill),
        ),
        forbidden=BUILTIN_ATTENTION,
    ),
    Exercise(
        id="5.4",
        title="a self-attention layer",
        idea=(
            "project the input three times, into queries, keys and values, and run scaled dot-product attention "
            "on them."
        ),
        points=3,
        name="SelfAttention",
        kind="module",
        reference=ref.SelfAttention,
        make_cases=_layer_cases,
        mistakes=(
            Mistake("queries and keys are swapped: queries come from w_q, keys from w_k.", _LayerQKSwapped),
            Mistake("the values are the raw input: project them with w_v.", _LayerValuesUnprojected),
        ),
        forbidden=BUILTIN_ATTENTION,
    ),
)
