"""Chapter 6 exercises: splitting and merging heads, the forward pass of multi-head attention, and two heads
built by hand."""

from __future__ import annotations

import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, count, randn, register, size
from ..models import attention as attn
from ..models import multihead as ref

NOTEBOOK = "06_multihead_attention.ipynb"

# The exercises build these; using PyTorch's own would skip the point of the exercise.
BUILTIN_ATTENTION = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention",
    "MultiheadAttention",
    "multi_head_attention_forward",
)


# 6.1 split_heads ---------------------------------------------------------------------------


def _split_cases(g: torch.Generator) -> list[Case]:
    # Sizes drawn per seed (the grader's shapes are not the self-check's). Two heads or more, and d_k >= 2, in
    # the general cases: with one head, or one feature per head, some wrong splits give the right answer.
    def case(what: str, b: int, t: int, h: int, d_k: int) -> Case:
        return Case(
            f"{what}B = {b}, T = {t}, d_model = {h * d_k}, {count(h, 'head')} of d_k = {d_k}",
            (randn(g, b, t, h * d_k), h),
        )

    return [
        case("", size(g, 1, 3), size(g, 2, 8), size(g, 2, 4), size(g, 2, 5)),
        case("", size(g, 1, 3), size(g, 2, 8), size(g, 2, 8), size(g, 2, 4)),
        case("one feature per head: ", size(g, 1, 3), size(g, 2, 6), size(g, 3, 6), 1),
        case("one head: ", size(g, 1, 3), size(g, 2, 8), 1, size(g, 4, 16)),
    ]


def _split_wrong_axis(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, n_heads, t, d // n_heads)


def _split_interleaved(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, t, d // n_heads, n_heads).permute(0, 3, 1, 2)


def _split_no_transpose(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads)


# 6.2 merge_heads ---------------------------------------------------------------------------


def _merge_cases(g: torch.Generator) -> list[Case]:
    # As for splitting: drawn sizes, and at least two heads of d_k >= 2 where a wrong merge could pass otherwise.
    def case(what: str, b: int, h: int, t: int, d_k: int) -> Case:
        return Case(f"{what}B = {b}, {count(h, 'head')}, T = {t}, d_k = {d_k}", (randn(g, b, h, t, d_k),))

    return [
        case("", size(g, 1, 3), size(g, 2, 4), size(g, 2, 8), size(g, 2, 5)),
        case("", size(g, 1, 3), size(g, 2, 8), size(g, 2, 6), size(g, 2, 4)),
        case("one feature per head: ", size(g, 1, 3), size(g, 3, 6), size(g, 2, 6), 1),
        case("one head: ", size(g, 1, 3), 1, size(g, 2, 8), size(g, 4, 16)),
    ]


def _merge_no_transpose(x):
    b, h, t, d_k = x.shape
    return x.reshape(b, t, h * d_k)


def _merge_interleaved(x):
    b, h, t, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, t, d_k * h)


def _merge_summed(x):
    return x.sum(dim=1)


def _merge_averaged(x):
    return x.mean(dim=1)


# 6.3 the multi-head forward pass -----------------------------------------------------------


def _mha_state(g: torch.Generator, d_model: int, bias: bool = True) -> dict:
    scale = 1 / math.sqrt(d_model)
    state = {}
    for name in ("w_q", "w_k", "w_v", "w_o"):
        state[f"{name}.weight"] = randn(g, d_model, d_model) * scale
        if bias:
            state[f"{name}.bias"] = randn(g, d_model) * 0.1
    return state


def _mha_cases(g: torch.Generator) -> list[Case]:
    # Sizes drawn per seed, always h >= 2 heads (dividing by sqrt(d_model) instead of sqrt(d_k) shows only then),
    # and two or more sentences with different lengths where a 3-D mask is given (a mask without its head axis
    # goes unnoticed with one sentence).
    def dims() -> tuple[int, int, int]:
        h, d_k = size(g, 2, 4), size(g, 2, 4)
        return h, d_k, h * d_k

    cases = []
    h, d_k, d = dims()
    b, t = size(g, 1, 3), size(g, 3, 7)
    x = randn(g, b, t, d)
    cases.append(
        Case(
            f"self-attention, no mask, B = {b}, T = {t}, d_model = {d}, {h} heads",
            (x, x, x),
            init={"d_model": d, "n_heads": h},
            state=_mha_state(g, d),
        )
    )
    h, d_k, d = dims()
    b, t = size(g, 1, 3), size(g, 3, 7)
    x = randn(g, b, t, d)
    cases.append(
        Case(
            f"self-attention with a causal mask ({t}, {t}), B = {b}, d_model = {d}, {h} heads",
            (x, x, x),
            {"mask": attn.causal_mask(t)},
            init={"d_model": d, "n_heads": h},
            state=_mha_state(g, d),
        )
    )
    h, d_k, d = dims()
    b, t_q, t_k = size(g, 1, 3), size(g, 1, 4), size(g, 5, 8)
    query, memory = randn(g, b, t_q, d), randn(g, b, t_k, d)
    cases.append(
        Case(
            f"cross-attention, no mask, B = {b}, T_q = {t_q}, T_k = {t_k}, d_model = {d}, {h} heads",
            (query, memory, memory),
            init={"d_model": d, "n_heads": h},
            state=_mha_state(g, d),
        )
    )
    h, d_k, d = dims()
    b, t_q, t_k = h, size(g, 2, 5), size(g, 4, 8)  # B = h: a mask without its head axis then runs, wrongly
    lengths = torch.randint(1, t_k, (b,), generator=g)  # the first shorter than T_k ...
    lengths[-1] = t_k  # ... the last as long
    query, memory = randn(g, b, t_q, d), randn(g, b, t_k, d)
    shown = ", ".join(str(n) for n in lengths.tolist()[:-1]) + f" and {t_k}"
    cases.append(
        Case(
            f"cross-attention, B = {b}, T_q = {t_q}, T_k = {t_k}, padding mask (B, 1, T_k) for lengths {shown}, "
            f"d_model = {d}, {h} heads",
            (query, memory, memory),
            {"mask": attn.padding_mask(lengths, t_k)},
            init={"d_model": d, "n_heads": h},
            state=_mha_state(g, d),
        )
    )
    h, d_k, d = dims()
    b, t_q, t_k = size(g, 2, 4), size(g, 2, 5), size(g, 4, 8)
    lengths = torch.randint(1, t_k + 1, (b,), generator=g)
    lengths[0] = t_k
    mask = attn.padding_mask(lengths, t_k) & (
        torch.rand(b, t_q, t_k, generator=g, dtype=torch.float64) > 0.3
    )  # (B, T_q, T_k)
    mask[:, :, 0] = True  # every query sees at least one key
    cases.append(
        Case(
            f"no biases, B = {b}, T_q = {t_q}, T_k = {t_k}, d_model = {d}, {h} heads, keys and values differ, "
            "mask (B, T_q, T_k)",
            (randn(g, b, t_q, d), randn(g, b, t_k, d), randn(g, b, t_k, d)),
            {"mask": mask},
            init={"d_model": d, "n_heads": h, "bias": False},
            state=_mha_state(g, d, bias=False),
        )
    )
    return cases


def _attend(q, k, v, mask, scale):
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class _MHANoOutputProjection(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        h = self.n_heads
        q, k, v = (
            ref.split_heads(self.w_q(query), h),
            ref.split_heads(self.w_k(key), h),
            ref.split_heads(self.w_v(value), h),
        )
        out, weights = attn.scaled_dot_product_attention(q, k, v, ref.head_mask(mask))
        return ref.merge_heads(out), weights


class _MHAWrongAxisSplit(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        q, k, v = (
            _split_wrong_axis(f(x), self.n_heads) for f, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        out, weights = attn.scaled_dot_product_attention(q, k, v, ref.head_mask(mask))
        return self.w_o(ref.merge_heads(out)), weights


class _MHAScaledByDModel(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        h = self.n_heads
        q, k, v = (
            ref.split_heads(self.w_q(query), h),
            ref.split_heads(self.w_k(key), h),
            ref.split_heads(self.w_v(value), h),
        )
        out, weights = _attend(q, k, v, ref.head_mask(mask), math.sqrt(self.d_model))
        return self.w_o(ref.merge_heads(out)), weights


class _MHAUnscaled(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        h = self.n_heads
        q, k, v = (
            ref.split_heads(self.w_q(query), h),
            ref.split_heads(self.w_k(key), h),
            ref.split_heads(self.w_v(value), h),
        )
        out, weights = _attend(q, k, v, ref.head_mask(mask), 1.0)
        return self.w_o(ref.merge_heads(out)), weights


class _MHAMaskWithoutHeadAxis(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        h = self.n_heads
        q, k, v = (
            ref.split_heads(self.w_q(query), h),
            ref.split_heads(self.w_k(key), h),
            ref.split_heads(self.w_v(value), h),
        )
        out, weights = attn.scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(ref.merge_heads(out)), weights


class _MHAQueryEverywhere(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, query, mask)


class _MHAKeyValueSwapped(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        h = self.n_heads
        q, k, v = (
            ref.split_heads(self.w_q(query), h),
            ref.split_heads(self.w_k(value), h),
            ref.split_heads(self.w_v(key), h),
        )
        out, weights = attn.scaled_dot_product_attention(q, k, v, ref.head_mask(mask))
        return self.w_o(ref.merge_heads(out)), weights


class _MHAAveragedWeights(ref.MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        out, weights = super().forward(query, key, value, mask)
        return out, weights.mean(dim=1)


# 6.4 two heads built by hand ---------------------------------------------------------------

SHARP = 0.9  # the least weight each head must put on its intended key, at every query


def _heads_cases(g: torch.Generator) -> list[Case]:
    mid, large = int(torch.randint(5, 8, (1,), generator=g)), int(torch.randint(8, 13, (1,), generator=g))
    return [Case(f"T = {t} positions, d_model = {2 * t}", (t,)) for t in (4, mid, large)]


def two_heads(T):
    """(w_q, w_k), each (2T, 2T) in nn.Linear's (out, in) layout, for one-hot positions x_t = e_t in 2T features:
    head 0 (output rows 0 .. T-1) attends to the previous position, head 1 (rows T .. 2T-1) to the position itself."""
    beta = 10 * math.sqrt(T)  # a scaled score of 10 on the chosen key against 0 on the others
    eye = torch.eye(T, dtype=torch.float64)
    w_q = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_k = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_q[:T, :T] = beta * torch.diag(torch.ones(T - 1, dtype=torch.float64), 1)  # column t: beta at row t - 1
    w_q[T:, :T] = beta * eye  # query t asks for key t
    w_k[:T, :T] = eye  # the keys are the positions themselves, in both heads
    w_k[T:, :T] = eye
    return w_q, w_k


def head_weights(T: int, w_q: torch.Tensor, w_k: torch.Tensor) -> torch.Tensor:
    """(2, T, T): the two heads' attention maps of the reference layer with these weights, W_V = W_O = I."""
    d_model = 2 * T
    layer = ref.MultiHeadAttention(d_model, 2, bias=False).double()
    eye = torch.eye(d_model, dtype=torch.float64)
    with torch.no_grad():
        for linear, weight in ((layer.w_q, w_q), (layer.w_k, w_k), (layer.w_v, eye), (layer.w_o, eye)):
            linear.weight.copy_(weight)
        x = torch.eye(T, d_model, dtype=torch.float64)[None]  # (1, T, 2T): position t is e_t
        _, weights = layer(x, x, x)
    return weights[0]


def _smallest(weights: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> tuple[float, int]:
    on_target = weights[queries, keys]
    i = int(on_target.argmin())
    return float(on_target[i]), int(queries[i])


def _judge_heads(case: Case, answer) -> str | None:
    (T,) = case.args
    shape = (2 * T, 2 * T)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return f"the answer should be a pair (w_q, w_k) of tensors of shape {shape}, got {registry.describe(answer)}"
    for name, w in zip(("w_q", "w_k"), answer):
        if not isinstance(w, torch.Tensor) or not w.dtype.is_floating_point:
            return f"{name} should be a floating-point tensor of shape {shape}, got {registry.describe(w)}"
        if tuple(w.shape) != shape:
            return f"{name} should have shape {shape} (d_model = 2T = {2 * T}), got {tuple(w.shape)}"
        if not bool(w.isfinite().all()):
            return f"{name} has entries that are NaN or infinite"
    weights = head_weights(T, *(w.detach().double().cpu() for w in answer))
    if not bool(weights.isfinite().all()):
        return "the attention weights are NaN: the scores overflow to infinity; use smaller entries"
    t = torch.arange(T)
    previous, at_prev = _smallest(weights[0], t[1:], t[:-1])
    itself, at_self = _smallest(weights[1], t, t)
    if previous >= SHARP and itself >= SHARP:
        return None
    return (
        f"the smallest weight head 0 puts on the previous position is {previous:.3g} (query {at_prev}), and head 1's "
        f"on the position itself {itself:.3g} (query {at_self}); both must be at least {SHARP}"
    )


def _heads(T, previous_block, self_block):
    eye = torch.eye(T, dtype=torch.float64)
    w_q = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_k = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_q[:T, :T], w_q[T:, :T] = previous_block, self_block
    w_k[:T, :T], w_k[T:, :T] = eye, eye
    return w_q, w_k


def _back(T):
    return torch.eye(T, dtype=torch.float64).roll(-1, dims=0)  # column t: a 1 at row t - 1 (and row T - 1 for t = 0)


def _heads_swapped(T):
    beta = 10 * math.sqrt(T)
    return _heads(T, beta * torch.eye(T, dtype=torch.float64), beta * _back(T))


def _heads_forward(T):
    beta = 10 * math.sqrt(T)
    return _heads(T, beta * _back(T).T, beta * torch.eye(T, dtype=torch.float64))


def _heads_soft(T):
    return _heads(T, _back(T), torch.eye(T, dtype=torch.float64))


def _heads_unscaled(T):
    return _heads(T, 10 * _back(T), 10 * torch.eye(T, dtype=torch.float64))


def _heads_identity(T):
    eye = torch.eye(2 * T, dtype=torch.float64)
    return eye, eye.clone()


def _heads_side_by_side(T):
    beta = 10 * math.sqrt(T)
    eye = torch.eye(T, dtype=torch.float64)
    w_q = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_k = torch.zeros(2 * T, 2 * T, dtype=torch.float64)
    w_q[:T, :T], w_q[:T, T:] = beta * _back(T), beta * eye  # the heads side by side along the input axis
    w_k[:T, :T], w_k[:T, T:] = eye, eye
    return w_q, w_k


register(
    Exercise(
        id="6.1",
        title="splitting into heads",
        idea=(
            "each head gets its own contiguous block of every position's features, and the heads become an axis "
            "in front of the positions."
        ),
        points=2,
        name="split_heads",
        kind="function",
        reference=ref.split_heads,
        make_cases=_split_cases,
        mistakes=(
            Mistake(
                "the heads are split along the wrong axis: reshaping (B, T, d_model) straight to (B, h, T, d_k) mixes "
                "positions into the heads. Cut the feature axis into h blocks of d_k while the positions still come "
                "first, then move the head axis in front of the positions.",
                _split_wrong_axis,
            ),
            Mistake(
                "head i should get the contiguous block of features i*d_k to (i+1)*d_k - 1; yours takes every h-th "
                "feature. Reshape the last axis to (h, d_k), not (d_k, h).",
                _split_interleaved,
            ),
            Mistake(
                "the head axis must come before the time axis: (B, h, T, d_k). Swap those two axes.",
                _split_no_transpose,
            ),
        ),
    ),
    Exercise(
        id="6.2",
        title="merging the heads",
        idea="merging undoes splitting: every position gets its heads' blocks side by side again, head 0 first.",
        points=2,
        name="merge_heads",
        kind="function",
        reference=ref.merge_heads,
        make_cases=_merge_cases,
        mistakes=(
            Mistake(
                "the heads are merged along the wrong axis: reshaping (B, h, T, d_k) straight to (B, T, h * d_k) mixes "
                "positions and heads. First bring the positions back in front of the heads, (B, T, h, d_k), then "
                "join the last two axes.",
                _merge_no_transpose,
            ),
            Mistake(
                "put the heads side by side: head 0's d_k features first, then head 1's, and so on; yours interleaves them.",
                _merge_interleaved,
            ),
            Mistake("the heads are summed: concatenate them instead, to (B, T, h * d_k).", _merge_summed),
            Mistake("the heads are averaged: concatenate them instead, to (B, T, h * d_k).", _merge_averaged),
        ),
    ),
    Exercise(
        id="6.3",
        title="the multi-head attention forward pass",
        idea=(
            "project, split into heads, attend in all heads at once, merge, and project once more; the mask must "
            "reach every head."
        ),
        points=4,
        name="MultiHeadAttention",
        kind="module",
        parts={(0,): 'the output', (1,): 'the tensor of weights'},
        reference=ref.MultiHeadAttention,
        make_cases=_mha_cases,
        mistakes=(
            Mistake(
                "the concatenated heads are not projected by W_O: return self.w_o(merge_heads(...)).",
                _MHANoOutputProjection,
            ),
            Mistake(
                "the heads are split along the wrong axis: use your split_heads, which splits the feature axis, "
                "not a plain reshape to (B, h, T, d_k).",
                _MHAWrongAxisSplit,
            ),
            Mistake(
                "the scores are divided by sqrt(d_model); each head's queries and keys have d_k = d_model / h entries, "
                "so divide by sqrt(d_k).",
                _MHAScaledByDModel,
            ),
            Mistake("the scores are not divided by sqrt(d_k).", _MHAUnscaled),
            Mistake(
                "a 3-D mask (B, T_q, T_k) or (B, 1, T_k) has no head axis, so against the scores (B, h, T_q, T_k) its batch "
                "axis lines up with the heads. Give it a head axis of size 1, right after the batch axis.",
                _MHAMaskWithoutHeadAxis,
            ),
            Mistake(
                "the keys and values come from the query: project key with w_k and value with w_v, or cross-attention "
                "cannot work.",
                _MHAQueryEverywhere,
            ),
            Mistake("keys and values are swapped: keys are w_k(key), values are w_v(value).", _MHAKeyValueSwapped),
            Mistake(
                "the weights are averaged over the heads; return every head's weights, of shape (B, h, T_q, T_k).",
                _MHAAveragedWeights,
            ),
        ),
        forbidden=BUILTIN_ATTENTION,
    ),
    Exercise(
        id="6.4",
        title="two heads built by hand",
        idea=(
            "with one-hot positions as inputs, a score is the product of one column of the query weights with "
            "one column of the key weights, so the weights choose which pairs of positions score high; a large "
            "factor, large even after the division by the square root of d_k, makes the softmax sharp."
        ),
        points=3,
        name="two_heads",
        kind="function",
        reference=two_heads,
        make_cases=_heads_cases,
        judge=_judge_heads,
        mistakes=(
            Mistake(
                "the heads are swapped: head 0 (output rows 0 to T - 1 of both matrices) must attend to the "
                "previous position, head 1 (rows T to 2T - 1) to the position itself.",
                _heads_swapped,
            ),
            Mistake(
                "head 0 attends to the next position, not the previous one: the query of position t is column t of "
                "the weight (nn.Linear computes x W^T), and it must pick out key t - 1.",
                _heads_forward,
            ),
            Mistake(
                "the pattern is right but the softmax is too soft: with scores of 1 / sqrt(T) against 0, the weight "
                "spreads over all T keys. Multiply the query weights by a large factor.",
                _heads_soft,
            ),
            Mistake(
                "a factor of 10 is enough for a few positions, but the layer divides every score by sqrt(d_k) = "
                "sqrt(T) and there are more keys to beat as T grows: let the factor grow with T.",
                _heads_unscaled,
            ),
            Mistake(
                "identity weights make every position ask for itself, softly, in both heads: head 0 must ask for "
                "the previous position, and both need a large factor.",
                _heads_identity,
            ),
            Mistake(
                "the two heads sit side by side along the input axis (columns); a head is a block of output rows: "
                "rows 0 to T - 1 for head 0, rows T to 2T - 1 for head 1. The second head's queries and keys are "
                "zero, so its weights are uniform.",
                _heads_side_by_side,
            ),
        ),
    ),
)
