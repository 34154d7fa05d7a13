"""Chapter 5 exercises: attention scores, the decoder's mask, scaled dot-product attention, a self-attention layer, and
a test input that catches every bug of a list (an analysis exercise, judged rather than compared)."""

from __future__ import annotations

import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register
from ..models import attention as ref

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


# 5.2 the decoder's mask: padding and causal together -------------------------------------------


def _decoder_cases(g: torch.Generator) -> list[Case]:
    t = int(torch.randint(5, 9, (1,), generator=g))
    lengths = torch.randint(2, t, (3,), generator=g).tolist()
    return [
        Case("one sentence of length 3 padded to t = 4", (torch.tensor([3]), 4)),
        Case(f"a batch of 3, lengths {lengths}, t = {t}", (torch.tensor(lengths), t)),
        Case(f"a batch of 2, lengths [1, {t}], t = {t}", (torch.tensor([1, t]), t)),
    ]


def decoder_mask(lengths, t):
    """(B, t, t) boolean: True where query i of sequence b may attend to key j, that is j <= i and j < lengths[b]."""
    keys = torch.arange(t)
    causal = keys[None, :] <= keys[:, None]  # (t, t): key j not after query i
    real = keys[None, :] < lengths[:, None]  # (B, t): key j is a real token of sequence b
    return real[:, None, :] & causal[None, :, :]


def _decoder_or(lengths, t):
    keys = torch.arange(t)
    return (keys[None, None, :] < lengths[:, None, None]) | (keys[None, :] <= keys[:, None])


def _decoder_causal_only(lengths, t):
    keys = torch.arange(t)
    return (keys[None, :] <= keys[:, None]).expand(len(lengths), t, t)


def _decoder_padding_only(lengths, t):
    keys = torch.arange(t)
    return (keys[None, :] < lengths[:, None])[:, None, :].expand(len(lengths), t, t)


def _decoder_future(lengths, t):
    keys = torch.arange(t)
    return (keys[None, None, :] < lengths[:, None, None]) & (keys[None, :] >= keys[:, None])


def _decoder_padding_on_queries(lengths, t):
    keys = torch.arange(t)
    return (keys[None, :, None] < lengths[:, None, None]) & (keys[None, :] <= keys[:, None])


def _decoder_unbroadcast(lengths, t):
    keys = torch.arange(t)
    return (keys[None, :] < lengths[:, None])[:, None, :]


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


class _LayerMaskDropped(ref.SelfAttention):
    def forward(self, x, mask=None):
        return ref.scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x))


# 5.5 a test input that catches every bug ----------------------------------------------------------

OVERFLOW = 709.8  # exp(x) is infinite in float64 above about this


def _naive_softmax_attention(q, k, v, mask=None):
    scores = ref.attention_scores(q, k)
    e = scores.exp()  # no subtraction of the largest score first: overflows on large scores
    if mask is not None:
        e = e * mask
    w = e / e.sum(-1, keepdim=True)
    return w @ v, w


def _scaled_by_values(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])  # the size of the values, not of the keys
    return _softmax_attend(scores, v, mask)


# The bugs of the exercise, as the notebook names them; its given cell imports this list (their code, each a line away
# from exercise 5.3's answer, stays out of the student notebook).
BUGS = {
    "no division by sqrt(d_k)": _sdpa_unscaled,
    "divided by sqrt(d_v), the size of the values": _scaled_by_values,
    "softmax over the queries": _sdpa_wrong_axis,
    "mask ignored": _sdpa_mask_ignored,
    "mask inverted": _sdpa_mask_inverted,
    "weights zeroed after the softmax": _sdpa_mask_after_softmax,
    "masked scores set to 0": _sdpa_mask_zero_fill,
    "softmax without subtracting the largest score": _naive_softmax_attention,
}


def _bug_cases(g: torch.Generator) -> list[Case]:
    sizes = [
        (int(torch.randint(3, 7, (1,), generator=g)), int(torch.randint(2, 9, (1,), generator=g))) for _ in range(2)
    ]
    return [Case("t = 3 positions, d_k = 2", (3, 2))] + [Case(f"t = {t}, d_k = {d}", (t, d)) for t, d in sizes]


def catch_every_bug(t, d_k):
    """One input (q (t, d_k), k (t, d_k), v (t, d_v), mask (t, t)) on which every bug of BUGS gives a wrong output."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(t, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(t, d_k, generator=g, dtype=torch.float64)
    k[0] = 1.0
    q[-1] = 1000.0  # one huge score, q_(t-1) . k_0 / sqrt(d_k) = 1000 sqrt(d_k): exp overflows without the max
    v = torch.randn(t, d_k + 1, generator=g, dtype=torch.float64)  # d_v != d_k tells the two scalings apart
    mask = torch.ones(t, t, dtype=torch.bool).tril()  # masked keys, not symmetric, none of the rows empty
    return q, k, v, mask


def _as_matrix(name: str, value, rows: int, cols: int | None) -> str | None:
    if not isinstance(value, torch.Tensor) or value.dim() != 2 or not value.dtype.is_floating_point:
        return f"{name} should be a 2-D floating-point tensor, got {registry.describe(value)}"
    if value.shape[0] != rows or (cols is not None and value.shape[1] != cols):
        want = f"({rows}, {cols})" if cols is not None else f"({rows}, d_v)"
        return f"{name} should have shape {want}, got {tuple(value.shape)}"
    if not torch.isfinite(value).all():
        return f"{name} holds infinite or NaN entries; a test input should be finite"
    return None


def _judge_bug_input(case: Case, answer) -> str | None:
    t, d_k = case.args
    if not isinstance(answer, (tuple, list)) or len(answer) != 4:
        return f"the answer should be the four tensors (q, k, v, mask), got {registry.describe(answer)}"
    q, k, v, mask = answer
    for name, value, cols in (("q", q, d_k), ("k", k, d_k), ("v", v, None)):
        problem = _as_matrix(name, value, t, cols)
        if problem:
            return problem
    if not 1 <= v.shape[1] <= 64:
        return f"v should have between 1 and 64 columns, got {v.shape[1]}"
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (t, t):
        return f"mask should be a ({t}, {t}) boolean tensor, got {registry.describe(mask)}"
    if not mask.any(-1).all():
        empty = int((~mask.any(-1)).nonzero()[0])
        return f"query {empty} may see no key at all, so even a correct attention has no answer for it"
    q, k, v = q.double(), k.double(), v.double()
    right, _ = ref.scaled_dot_product_attention(q, k, v, mask)
    if not torch.isfinite(right).all():
        # an input on which the correct attention itself overflows tells a right implementation from no wrong one
        return (
            "on this input the correct attention itself is not finite (its scores overflow, or v is not finite): "
            "a test input must have a right answer for the bugs to miss"
        )
    missed = []
    for name, bug in BUGS.items():
        with torch.no_grad():
            out, _ = bug(q, k, v, mask)
        if torch.isfinite(out).all() and torch.allclose(out, right, atol=1e-6, rtol=1e-6):
            missed.append(name)
    if missed:
        return f"{len(missed)} of the {len(BUGS)} bugs give the right output on this input: " + "; ".join(missed)
    return None


def _bug_input_random(mask_kind: str, d_v_extra: int = 0, scale: float = 1.0):
    def answer(t, d_k):
        g = torch.Generator().manual_seed(1)
        q, k = (scale * torch.randn(t, d_k, generator=g, dtype=torch.float64) for _ in range(2))
        v = torch.randn(t, d_k + d_v_extra, generator=g, dtype=torch.float64)
        full = torch.ones(t, t, dtype=torch.bool)
        return q, k, v, full if mask_kind == "none" else full.tril()

    return answer


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
        title="the decoder's mask",
        idea=(
            "a key is visible to a query when two things hold at once: it is a real token of that sequence, not "
            "padding, and it is not after the query; build each condition on the grid of query and key "
            "positions and combine them for every sequence of the batch."
        ),
        points=3,
        name="decoder_mask",
        kind="function",
        reference=decoder_mask,
        make_cases=_decoder_cases,
        mistakes=(
            Mistake(
                "the two conditions are combined with 'or': a key must be real AND not in the future.", _decoder_or
            ),
            Mistake("the lengths are ignored: padding keys must be hidden too.", _decoder_causal_only),
            Mistake("the future is visible: a query may see keys up to its own position only.", _decoder_padding_only),
            Mistake(
                "the triangle is the wrong way round: keys after the query are hidden, not those before.",
                _decoder_future,
            ),
            Mistake(
                "the padding condition is applied to the queries (the rows); padding hides keys (the columns).",
                _decoder_padding_on_queries,
            ),
            Mistake(
                "the mask has one row per sequence: combine it with the causal grid so that every query gets its own row.",
                _decoder_unbroadcast,
            ),
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
        parts={(0,): 'the output', (1,): 'the tensor of weights'},
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
        parts={(0,): 'the output', (1,): 'the tensor of weights'},
        reference=ref.SelfAttention,
        make_cases=_layer_cases,
        mistakes=(
            Mistake("queries and keys are swapped: queries come from w_q, keys from w_k.", _LayerQKSwapped),
            Mistake("the values are the raw input: project them with w_v.", _LayerValuesUnprojected),
            Mistake(
                "the mask is not passed on to the attention, so positions it hides still get weight: hand it to "
                "your scaled_dot_product_attention.",
                _LayerMaskDropped,
            ),
        ),
        forbidden=BUILTIN_ATTENTION,
    ),
    Exercise(
        id="5.5",
        title="a test input that catches every bug",
        idea=(
            "a bug hides on inputs where it happens to agree with the right answer; go through the list, ask "
            "for each bug which property of the input would expose it, and build one input that has all those "
            "properties at once, in different rows where they conflict."
        ),
        points=3,
        name="catch_every_bug",
        kind="function",
        reference=catch_every_bug,
        make_cases=_bug_cases,
        judge=_judge_bug_input,
        mistakes=(
            Mistake(
                "with nothing masked, every masking bug agrees with the right answer: the input needs hidden keys.",
                _bug_input_random("none"),
            ),
            Mistake(
                "two bugs slip through: with d_v = d_k the two scalings agree, and with moderate scores the softmax "
                "without its maximum subtracted does not overflow.",
                _bug_input_random("causal"),
            ),
            Mistake(
                "when every score is huge, every version of the softmax puts all the weight on one key, so the bugs "
                "that only rescale the scores change nothing: keep some rows moderate.",
                _bug_input_random("causal", d_v_extra=1, scale=60.0),
            ),
        ),
    ),
)
