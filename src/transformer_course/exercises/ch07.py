"""Chapter 7 exercises: the sinusoidal table, the rotation matrix of a shift, the positional-encoding layer, and
two sentences that self-attention cannot tell apart without positions."""

from __future__ import annotations

import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register
from ..models import attention as attn
from ..models import positional as ref

NOTEBOOK = "07_positional_encoding.ipynb"


def _randint(g: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high, (1,), generator=g))


# 7.1 the sinusoidal table ------------------------------------------------------------------


def _table_cases(g: torch.Generator) -> list[Case]:
    n1, d1 = _randint(g, 5, 12), 2 * _randint(g, 2, 6)
    n2, d2 = _randint(g, 30, 80), 2 * _randint(g, 8, 33)
    return [
        Case("one position (0), d_model = 4", (1, 4)),
        Case(f"{n1} positions, d_model = {d1}", (n1, d1)),
        Case(f"{n2} positions, d_model = {d2}", (n2, d2)),
        Case("20 positions, d_model = 512", (20, 512)),
    ]


def _angles(n_positions, d_model, base=10_000.0, start=0):
    pos = torch.arange(start, start + n_positions, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return pos / base ** (two_i / d_model)


def _interleave(first, second):
    return torch.stack([first, second], dim=-1).flatten(-2)


def _table_swapped(n_positions, d_model):
    a = _angles(n_positions, d_model)
    return _interleave(a.cos(), a.sin())


def _table_concatenated(n_positions, d_model):
    a = _angles(n_positions, d_model)
    return torch.cat([a.sin(), a.cos()], dim=-1)


def _table_base(base):
    def table(n_positions, d_model):
        a = _angles(n_positions, d_model, base=base)
        return _interleave(a.sin(), a.cos())

    return table


def _base_hint(base: float) -> str:
    hint = f"the frequencies are those of base {base:g}; the paper's base is 10000: w_i = 1 / 10000^(2i / d_model)."
    if base == 100.0:  # 10000^(i / d) = 100^(2i / d): the same table
        hint += " (Or the exponent is i / d_model instead of 2i / d_model, which comes to the same: i counts pairs of columns.)"
    return hint


def _table_column_exponent(n_positions, d_model):
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)
    a = pos / 10_000.0 ** (j / d_model)  # a different frequency for every column, even in a sin/cos pair
    return torch.where(j % 2 == 0, a.sin(), a.cos())


def _table_from_one(n_positions, d_model):
    a = _angles(n_positions, d_model, start=1)
    return _interleave(a.sin(), a.cos())


# 7.2 the rotation matrix of a shift --------------------------------------------------------


def _shift_cases(g: torch.Generator) -> list[Case]:
    k, d = _randint(g, 2, 60), 2 * _randint(g, 4, 17)
    return [
        Case("k = 1, d_model = 2", (1, 2)),
        Case("k = 3, d_model = 8", (3, 8)),
        Case("k = -2, d_model = 6 (a shift back)", (-2, 6)),
        Case(f"k = {k}, d_model = {d}", (k, d)),
    ]


def _blocks(k, d_model, base=10_000.0, transpose=False):
    w = 1 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = (k * w).cos(), (k * w).sin()
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
    return blocks.transpose(-2, -1) if transpose else blocks


def _shift_transposed(k, d_model):
    return torch.block_diag(*_blocks(k, d_model, transpose=True))


def _shift_base(base):
    def shift(k, d_model):
        return torch.block_diag(*_blocks(k, d_model, base=base))

    return shift


def _shift_concatenated_layout(k, d_model):
    m = torch.block_diag(*_blocks(k, d_model))
    order = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # sines first, then cosines
    return m[order][:, order]


def _shift_one(k, d_model):
    return torch.block_diag(*_blocks(1, d_model))


# 7.3 the positional-encoding layer ---------------------------------------------------------


def _layer_cases(g: torch.Generator) -> list[Case]:
    init = {"d_model": 8, "max_len": 40, "dropout": 0.1}
    return [
        Case("B = 2, T = 5, d_model = 8", (randn(g, 2, 5, 8),), init=init),
        Case("B = 1, T = 12, offset = 3", (randn(g, 1, 12, 8),), {"offset": 3}, init=init),
        Case("B = 3, T = 1, offset = 39 (the last position)", (randn(g, 3, 1, 8),), {"offset": 39}, init=init),
        Case(
            "the whole table: B = 2, T = max_len = 20, d_model = 6",
            (randn(g, 2, 20, 6),),
            init={"d_model": 6, "max_len": 20},
        ),
    ]


class _LayerFromOne(ref.PositionalEncoding):
    def forward(self, x, offset=0):
        table = ref.sinusoidal_encoding(self.max_len + 1, self.d_model, dtype=x.dtype)
        return self.dropout(x + table[offset + 1 : offset + 1 + x.shape[-2]])


class _LayerOffsetIgnored(ref.PositionalEncoding):
    def forward(self, x, offset=0):
        return super().forward(x)


class _LayerScaled(ref.PositionalEncoding):
    def forward(self, x, offset=0):
        return super().forward(x * math.sqrt(self.d_model), offset)


class _LayerTableOnly(ref.PositionalEncoding):
    def forward(self, x, offset=0):
        return super().forward(torch.zeros_like(x), offset)


# 7.4 sentences self-attention cannot tell apart --------------------------------------------

SAME = 1e-9  # pooled outputs closer than this are the same vector (rounding is about 1e-16)
APART = 1e-3  # with positions, the pooled outputs must differ by more than this


def _sentence_case(g: torch.Generator, label: str, V: int, d_model: int, n: int) -> Case:
    embedding = randn(g, V, d_model)
    w_q, w_k, w_v = (randn(g, d_model, d_model, scale=1 / math.sqrt(d_model)) for _ in range(3))
    return Case(label, (embedding, w_q, w_k, w_v, n))


def _sentence_cases(g: torch.Generator) -> list[Case]:
    V = _randint(g, 5, 10)
    n = _randint(g, 3, V)
    long = _randint(g, 5, 9)
    return [
        _sentence_case(g, f"V = {V} tokens, n = {n} positions, d_model = 8", V, 8, n),
        _sentence_case(g, f"n = {long} positions from a vocabulary of only V = 3 tokens, d_model = 16", 3, 16, long),
        _sentence_case(g, "V = 2 tokens, n = 3 positions, d_model = 8", 2, 8, 3),
    ]


def indistinguishable_sentences(embedding, w_q, w_k, w_v, n):
    """Two different int64 token-id sequences of length n that hold the same tokens the same number of times:
    the sequence 0, 1, 2, ... (modulo V) and the same sequence rotated by one place."""
    a = torch.arange(n) % embedding.shape[0]
    return a, a.roll(1)


def pooled_output(embedding, w_q, w_k, w_v, ids, positions: bool) -> torch.Tensor:
    """(d_v,): the mean over positions of one head of self-attention on the embedded ids, with or without
    the sinusoidal encoding added to the embeddings."""
    x = embedding[ids]  # (n, d_model)
    if positions:
        x = x + ref.sinusoidal_encoding(len(ids), embedding.shape[1], dtype=x.dtype)
    out, _ = attn.scaled_dot_product_attention(x @ w_q.T, x @ w_k.T, x @ w_v.T)  # (n, d_v)
    return out.mean(dim=0)


def _judge_sentences(case: Case, answer) -> str | None:
    embedding, w_q, w_k, w_v, n = case.args
    V = embedding.shape[0]
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return f"the answer should be a pair of int64 tensors of shape ({n},), got {registry.describe(answer)}"
    for name, ids in zip(("first", "second"), answer):
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64:
            return f"the {name} sequence should be an int64 tensor of token ids, got {registry.describe(ids)}"
        if tuple(ids.shape) != (n,):
            return f"the {name} sequence should have shape ({n},), one token id per position, got {tuple(ids.shape)}"
        if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < V:
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            return f"the {name} sequence holds the id {bad}, but the vocabulary has V = {V} tokens, ids 0 to {V - 1}"
    a, b = answer
    if torch.equal(a, b):
        return f"the two sequences are the same sequence, {a.tolist()}; they must differ in at least one position"
    apart = [
        (pooled_output(embedding, w_q, w_k, w_v, a, p) - pooled_output(embedding, w_q, w_k, w_v, b, p)).abs().max()
        for p in (False, True)
    ]
    without, with_positions = (float(d) for d in apart)
    if not without <= SAME:
        return (
            f"without positions the layer already tells them apart: the pooled outputs differ by {without:.3g} "
            f"(they must agree to within {SAME:g})"
        )
    if not with_positions > APART:
        return (
            f"with positions added the pooled outputs differ by only {with_positions:.3g}; they must differ by "
            f"more than {APART:g}"
        )
    return None


def _sentences_reversed(embedding, w_q, w_k, w_v, n):
    a = torch.arange(n) % embedding.shape[0]
    return a, a.flip(0)


def _sentences_twice(embedding, w_q, w_k, w_v, n):
    a = torch.arange(n) % embedding.shape[0]
    return a, a.clone()


def _sentences_one_replaced(embedding, w_q, w_k, w_v, n):
    a = torch.arange(n) % embedding.shape[0]
    b = a.clone()
    b[-1] = (b[-1] + 1) % embedding.shape[0]
    return a, b


def _sentences_one_token(embedding, w_q, w_k, w_v, n):
    a = torch.zeros(n, dtype=torch.int64)
    return a, a.flip(0)


def _sentences_out_of_range(embedding, w_q, w_k, w_v, n):
    a = torch.arange(n)
    return a, a.roll(1)


def _sentences_float(embedding, w_q, w_k, w_v, n):
    a = (torch.arange(n) % embedding.shape[0]).double()
    return a, a.roll(1)


register(
    Exercise(
        id="7.1",
        title="the sinusoidal table",
        idea=(
            "every entry is the sine or the cosine of one angle, the position times a frequency that falls "
            "geometrically from one pair of columns to the next."
        ),
        points=3,
        name="sinusoidal_encoding",
        kind="function",
        reference=ref.sinusoidal_encoding,
        make_cases=_table_cases,
        mistakes=(
            Mistake(
                "sine and cosine are swapped: the even columns 2i hold the sines, the odd columns 2i + 1 the cosines.",
                _table_swapped,
            ),
            Mistake(
                "this is the concatenated variant (all sines, then all cosines); interleave them: sin in column 2i, "
                "cos in column 2i + 1.",
                _table_concatenated,
            ),
            *(Mistake(_base_hint(base), _table_base(base)) for base in (1_000.0, 100.0, 10.0, 100_000.0)),
            Mistake(
                "both columns of a pair, 2i and 2i + 1, share the frequency 1 / 10000^(2i / d_model); yours gives the "
                "cosine column a frequency of its own.",
                _table_column_exponent,
            ),
            Mistake(
                "the first row is position 0, PE[0] = [0, 1, 0, 1, ...]; your positions start at 1.", _table_from_one
            ),
        ),
    ),
    Exercise(
        id="7.2",
        title="the rotation matrix of a shift",
        idea=(
            "shifting a position by k turns each (sin, cos) pair by k times its frequency: one 2 x 2 rotation "
            "per pair, on the diagonal."
        ),
        points=3,
        name="shift_matrix",
        kind="function",
        reference=ref.shift_matrix,
        make_cases=_shift_cases,
        mistakes=(
            Mistake(
                "your matrix shifts by -k: it is the transpose of the right one. With row vectors, "
                "[sin, cos] @ [[cos kw, -sin kw], [sin kw, cos kw]] = [sin(a + kw), cos(a + kw)].",
                _shift_transposed,
            ),
            *(Mistake(_base_hint(base), _shift_base(base)) for base in (1_000.0, 100.0, 10.0)),
            Mistake(
                "your matrix acts on the concatenated layout; the table of exercise 7.1 interleaves sin and cos, so the "
                "2 x 2 block of pair i sits at rows and columns 2i and 2i + 1.",
                _shift_concatenated_layout,
            ),
            Mistake("your matrix shifts by one position whatever k is: the angle of block i is k * w_i.", _shift_one),
        ),
    ),
    Exercise(
        id="7.3",
        title="the positional-encoding layer",
        idea=(
            "the table is computed once, in the constructor; the forward pass adds the rows of the positions the "
            "input occupies (from the offset on), then applies dropout."
        ),
        points=2,
        name="PositionalEncoding",
        kind="module",
        reference=ref.PositionalEncoding,
        make_cases=_layer_cases,
        mistakes=(
            Mistake(
                "the first token gets the encoding of position offset + 1; it should get position offset (0 by default).",
                _LayerFromOne,
            ),
            Mistake(
                "the offset is ignored: the first token is at position offset, so add rows offset to offset + T - 1.",
                _LayerOffsetIgnored,
            ),
            Mistake(
                "x is multiplied by sqrt(d_model); that scaling belongs to the embedding layer, not here: add the "
                "encoding to x as it is.",
                _LayerScaled,
            ),
            Mistake("the result is the encoding alone: add it to x.", _LayerTableOnly),
        ),
    ),
    Exercise(
        id="7.4",
        title="sentences self-attention cannot tell apart",
        idea=(
            "without positions, self-attention only reorders its outputs when the words are reordered, so their "
            "average over positions depends only on which tokens occur and how often; two different orders of the "
            "same tokens look the same, until positions are added."
        ),
        points=2,
        name="indistinguishable_sentences",
        kind="function",
        reference=indistinguishable_sentences,
        make_cases=_sentence_cases,
        judge=_judge_sentences,
        mistakes=(
            Mistake(
                "a sentence that reads the same backwards, such as 0 1 0, is its own reversal: choose a reordering "
                "that changes every sentence with at least two different tokens, not only some of them.",
                _sentences_reversed,
            ),
            Mistake(
                "the two sequences are one and the same: they must differ in at least one position.", _sentences_twice
            ),
            Mistake(
                "replacing a token changes which tokens the sentence holds, and the average over positions sees "
                "that even without positions: keep the same tokens, the same number of times each, and change "
                "only their order.",
                _sentences_one_replaced,
            ),
            Mistake(
                "a sentence of one repeated token reads the same in every order: reordering it gives the same "
                "sequence. Use at least two different tokens.",
                _sentences_one_token,
            ),
            Mistake(
                "token ids are integers: the sequences should be int64 tensors, not floating-point ones.",
                _sentences_float,
            ),
            Mistake(
                "some ids are V or more: the ids run from 0 to V - 1, so a sentence longer than the vocabulary must "
                "use some tokens more than once.",
                _sentences_out_of_range,
            ),
        ),
    ),
)
