"""Chapter 11 exercises: the online softmax, tiled attention, grouped-query attention's head sharing, the rotary
embedding, the ALiBi bias, one step of causal linear attention, and an experiment: a query and a key that, under
RoPE, look a given number of positions back wherever the query stands.

Exercises 11.1 and 11.2 may not call PyTorch's softmax or its fused attention (they build them), 11.3 not the fused
attention (whose ``enable_gqa`` does the exercise). Exercise 11.7 is judged: the course's rotation scores the
student's query against keys at every distance, from several query positions.
"""

from __future__ import annotations

import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, count, randn, register, size
from ..models import alibi as ref_alibi
from ..models import linear_attention as ref_linear
from ..models import positional as ref_positional
from ..models import rotary as ref_rotary
from ..models import tiled_attention as ref_tiled

NOTEBOOK = "11_attention_at_scale.ipynb"
BUILTIN_SOFTMAX = ("softmax", "log_softmax", "logsumexp", "softmin")
BUILTIN_ATTENTION = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention",
    "MultiheadAttention",
    "multi_head_attention_forward",
)
NEG_INF = -math.inf

# Each list opens with cases of fixed shape and label, which catch the exercise's known mistakes on every seed
# (tests/test_selfcheck.py holds the mistakes to them; book/mistakes/ch11.md names the case); the others vary in shape.


# 11.1 the online softmax -------------------------------------------------------------------------------------


def _rising(g: torch.Generator, rows: int, n: int) -> torch.Tensor:
    """(rows, n) scores with a rising trend: each block's maximum is above the blocks' before it."""
    return torch.arange(n, dtype=torch.float64) * 0.7 + randn(g, rows, n, scale=0.3)


def _not_dividing(g: torch.Generator, n: int) -> int:
    """A block size from 2 to n - 1 that does not divide n (n >= 5)."""
    while True:
        block = size(g, 2, n - 1)
        if n % block:
            return block


def _softmax_cases(g: torch.Generator) -> list[Case]:
    far = torch.stack([1000 + randn(g, 7), -1000 + randn(g, 7)])  # exp(1000) overflows, exp(-1000) underflows
    masked = randn(g, 2, 7)
    masked[:, :2] = NEG_INF  # the first block of each row: nothing but -inf
    masked[0, 4] = NEG_INF
    rows, n = size(g, 2, 4), size(g, 5, 13)
    block = _not_dividing(g, n)
    heads, n1 = size(g, 2, 3), size(g, 2, 9)
    n2 = size(g, 1, 6)
    return [
        Case("3 rows of 10 scores that rise from block to block, block = 4", (_rising(g, 3, 10), 4)),
        Case("a row of scores near +1000 and one near -1000, block = 3", (far, 3)),
        Case("2 rows of 7 whose first block is masked (-inf), block = 2", (masked, 2)),
        Case(
            f"{rows} rows of {n} scores, block = {block}: the last block is shorter",
            (randn(g, rows, n, scale=3.0), block),
        ),
        Case(f"(2, {heads}, {n1}) scores, block = 1", (randn(g, 2, heads, n1, scale=3.0), 1)),
        Case(f"{n2} scores, block = {n2 + 3}: one block", (randn(g, n2, scale=3.0), n2 + 3)),
        Case("4 rows of a single score, block = 2", (randn(g, 4, 1), 2)),
    ]


def _online(scores, block, rescale=True, start=NEG_INF, guard=True, subtract=True):
    """The online softmax, with one of its steps left out (for the known mistakes)."""
    m = torch.full_like(scores[..., :1], start if subtract else 0.0)
    l = torch.zeros_like(m)
    for j in range(0, scores.shape[-1], block):
        s = scores[..., j : j + block]
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True)) if subtract else m
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new) if guard else m_new
        l = (l * torch.exp(m - shift) if rescale else l) + torch.exp(s - shift).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def _online_no_rescale(scores, block):
    return _online(scores, block, rescale=False)


def _online_per_block(scores, block):
    parts = []
    for j in range(0, scores.shape[-1], block):
        s = scores[..., j : j + block]
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))
        parts.append(e / e.sum(dim=-1, keepdim=True))
    return torch.cat(parts, dim=-1)


def _online_no_max(scores, block):
    return _online(scores, block, subtract=False)


def _online_max_from_zero(scores, block):
    return _online(scores, block, start=0.0)


def _online_no_guard(scores, block):
    return _online(scores, block, guard=False)


# 11.2 tiled attention ----------------------------------------------------------------------------------------


def tiled_attention_reference(q, k, v, block, causal):
    """q (..., n_q, d), k (..., n_k, d), v (..., n_k, d_v), block, causal -> (..., n_q, d_v): the course's tiled
    attention, with the exercise's order of arguments."""
    return ref_tiled.tiled_attention(q, k, v, causal=causal, block=block)


def _tiled(q, k, v, block, causal, rescale_acc=True, mask_diagonal=True, strict=False, scaled=True, divide=True):
    """Tiled attention with one of its steps wrong (for the known mistakes)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scaled else 1.0
    outputs = []
    for i0 in range(0, n_q, block):
        qb = q[..., i0 : i0 + block, :]
        rows = torch.arange(i0, i0 + qb.shape[-2])[:, None]
        m = q.new_full((*qb.shape[:-1], 1), NEG_INF)
        l = torch.zeros_like(m)
        acc = q.new_zeros((*qb.shape[:-1], v.shape[-1]))
        for j0 in range(0, min(n_k, i0 + block) if causal else n_k, block):
            s = (qb @ k[..., j0 : j0 + block, :].transpose(-2, -1)) * scale
            if causal and mask_diagonal:
                cols = torch.arange(j0, j0 + s.shape[-1])[None, :]
                s = s.masked_fill(cols >= rows if strict else cols > rows, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            factor = torch.exp(m - shift)
            p = torch.exp(s - shift)
            l = l * factor + p.sum(dim=-1, keepdim=True)
            acc = (acc * factor if rescale_acc else acc) + p @ v[..., j0 : j0 + block, :]
            m = m_new
        outputs.append(acc / l if divide else acc)
    return torch.cat(outputs, dim=-2)


def _tiled_acc_not_rescaled(q, k, v, block, causal):
    return _tiled(q, k, v, block, causal, rescale_acc=False)


def _tiled_diagonal_unmasked(q, k, v, block, causal):
    return _tiled(q, k, v, block, causal, mask_diagonal=False)


def _tiled_strict_mask(q, k, v, block, causal):
    return _tiled(q, k, v, block, causal, strict=True)


def _tiled_unscaled(q, k, v, block, causal):
    return _tiled(q, k, v, block, causal, scaled=False)


def _tiled_not_divided(q, k, v, block, causal):
    return _tiled(q, k, v, block, causal, divide=False)


def _tiled_cases(g: torch.Generator) -> list[Case]:
    def qkv(lead, n_q, n_k, d, d_v, rising=False):
        q, k = randn(g, *lead, n_q, d), randn(g, *lead, n_k, d)
        if rising:  # scores that grow along the keys: every query's running maximum rises from block to block
            q[..., 0] = 1.5 + randn(g, *lead, n_q).abs() * 0.3
            k[..., 0] = torch.arange(n_k, dtype=torch.float64) * 0.6
        return q, k, randn(g, *lead, n_k, d_v)

    n = size(g, 3, 9)
    n_big, b_big = size(g, 2, 6), size(g, 6, 10)
    n_q = size(g, 1, 5)
    heads, n_r = size(g, 1, 3), size(g, 5, 12)
    block = _not_dividing(g, n_r)
    return [
        Case(
            "B = 2, 7 queries and keys, d = 4, block = 3, causal; the scores rise along the keys",
            (*qkv((2,), 7, 7, 4, 3, rising=True), 3, True),
        ),
        Case(
            "5 queries, 9 keys, d = 4, block = 4 (the last key block holds one key), not causal",
            (*qkv((), 5, 9, 4, 5, rising=True), 4, False),
        ),
        Case(f"{n} queries and keys, d = 3, block = 1, causal", (*qkv((2,), n, n, 3, 2), 1, True)),
        Case(
            f"{n_big} queries and keys, block = {b_big}: one tile, causal",
            (*qkv((1,), n_big, n_big, 4, 4), b_big, True),
        ),
        Case(f"{n_q} queries, a single key, block = 2, not causal", (*qkv((2,), n_q, 1, 4, 3), 2, False)),
        Case(
            f"(B, h) = (2, {heads}), {n_r} queries and keys, d = 8, block = {block}, causal",
            (*qkv((2, heads), n_r, n_r, 8, 6), block, True),
        ),
    ]


# 11.3 grouped-query attention --------------------------------------------------------------------------------


def grouped_query_attention(q, k, v, mask=None):
    """q (B, h, T_q, d), k (B, g, T_k, d), v (B, g, T_k, d_v), mask None or (T_q, T_k) bool (True = may attend)
    -> (B, h, T_q, d_v). Query head i reads key/value head i // (h / g), as PyTorch's attention with enable_gqa."""
    r = q.shape[-3] // k.shape[-3]  # query heads per key/value head
    return _attend(q, k.repeat_interleave(r, dim=-3), v.repeat_interleave(r, dim=-3), mask)


def _attend(q, k, v, mask, scaled=True):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scaled else 1.0)  # (B, h, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)
    return torch.softmax(scores, dim=-1) @ v


def _gqa_modulo(q, k, v, mask=None):  # query head i reads key/value head i % g: the heads tiled, not repeated
    r = q.shape[-3] // k.shape[-3]
    return _attend(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1), mask)


def _gqa_divided_by_groups(q, k, v, mask=None):  # query head i reads key/value head i // g
    index = torch.arange(q.shape[-3]) // k.shape[-3]
    return _attend(q, k[:, index], v[:, index], mask)


def _gqa_unscaled(q, k, v, mask=None):
    r = q.shape[-3] // k.shape[-3]
    return _attend(q, k.repeat_interleave(r, dim=-3), v.repeat_interleave(r, dim=-3), mask, scaled=False)


def _gqa_cases(g: torch.Generator) -> list[Case]:
    def qkv(b, h, kv, t_q, t_k, d, d_v):
        return randn(g, b, h, t_q, d), randn(g, b, kv, t_k, d), randn(g, b, kv, t_k, d_v)

    def causal(t):
        return torch.ones(t, t, dtype=torch.bool).tril()

    kv, r, t = size(g, 2, 3), size(g, 2, 3), size(g, 3, 7)
    h1, t_k = size(g, 2, 8), size(g, 3, 9)
    h2 = size(g, 1, 4)
    kv3, r3, t3 = size(g, 1, 2), size(g, 2, 4), size(g, 4, 8)
    padding = torch.rand(t3, t3, generator=g) < 0.7
    padding[:, 0] = True  # every query may attend to at least one key
    return [
        Case(
            "B = 2, 6 query heads, 3 key/value heads, T = 5, a causal mask",
            (*qkv(2, 6, 3, 5, 5, 4, 3), causal(5)),
        ),
        Case(
            f"{kv * r} query heads, {count(kv, 'key/value head')}, T = {t}, no mask",
            (*qkv(1, kv * r, kv, t, t, 8, 4), None),
        ),
        Case(
            f"one key/value head for {h1} query heads (multi-query), 1 new query, {t_k} keys",
            (*qkv(2, h1, 1, 1, t_k, 4, 4), None),
        ),
        Case(
            f"{count(h2, 'query head')}, as many key/value heads (multi-head)", (*qkv(2, h2, h2, 4, 4, 4, 2), causal(4))
        ),
        Case(
            f"{kv3 * r3} query heads, {count(kv3, 'key/value head')}, T = {t3}, some keys masked",
            (*qkv(1, kv3 * r3, kv3, t3, t3, 4, 3), padding),
        ),
        Case("4 query heads, 2 key/value heads, 3 queries, a single key", (*qkv(2, 4, 2, 3, 1, 4, 3), None)),
    ]


# 11.4 the rotary embedding -----------------------------------------------------------------------------------


def rotate(x, positions):
    """x (..., t, d) with each pair (2i, 2i + 1) of row p turned by positions[p] * theta_i: ``models.rotary.rotate``
    (tests/test_exercises_ch11.py holds them equal), written on chapter 7's frequencies alone, as the course code
    that replaces a failed answer is built from one module's constants (rotary and positional both name BASE)."""
    angles = positions.to(torch.float64)[:, None] * ref_positional.frequencies(x.shape[-1])  # (t, d / 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., t, d / 2): the two coordinates of each pair
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _rotate(x, positions, base=10_000.0, angle_dtype=torch.float64, sign=1.0, split=False, exponent=2.0):
    """RoPE with one of its choices changed (for the known mistakes)."""
    d = x.shape[-1]
    theta = base ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)  # (d / 2,)
    angles = sign * positions.to(angle_dtype)[:, None] * theta.to(angle_dtype)  # (t, d / 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if split:  # pairs (i, i + d / 2): the "rotate half" layout
        first, second = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _rotate_half_split(x, positions):
    return _rotate(x, positions, split=True)


def _rotate_backwards(x, positions):
    return _rotate(x, positions, sign=-1.0)


def _rotate_slow_frequencies(x, positions):  # theta_i = base^(-i / d): the exponent of one column, not of a pair
    return _rotate(x, positions, exponent=1.0)


def _rotate_positions_ignored(x, positions):
    return _rotate(x, torch.arange(x.shape[-2]))


def _rotate_float32_angles(x, positions):
    return _rotate(x, positions, angle_dtype=torch.float32)


def _rotary_cases(g: torch.Generator) -> list[Case]:
    start, t = size(g, 50, 200), size(g, 3, 6)
    far = torch.sort(torch.randperm(5000, generator=g)[:6] + 1000).values  # positions from 1000 to 5999
    heads, t2, d2 = size(g, 1, 4), size(g, 2, 9), 2 * size(g, 2, 8)
    return [
        Case("x (2, 5, 8), positions 0 .. 4", (randn(g, 2, 5, 8), torch.arange(5))),
        Case(
            f"x (1, {t}, 6), positions {start} .. {start + t - 1}: new rows after a cache",
            (randn(g, 1, t, 6), torch.arange(start, start + t)),
        ),
        Case("x (3, 6, 16), positions between 1000 and 6000", (randn(g, 3, 6, 16), far)),
        Case("x (3, 2, 2): one pair, positions 3 and 7", (randn(g, 3, 2, 2), torch.tensor([3, 7]))),
        Case("x (2, 1, 6): one row at position 0", (randn(g, 2, 1, 6), torch.zeros(1, dtype=torch.int64))),
        Case(
            f"x (2, {heads}, {t2}, {d2}), positions 0 .. {t2 - 1}",
            (randn(g, 2, heads, t2, d2), torch.arange(t2)),
        ),
    ]


# 11.5 the ALiBi bias -----------------------------------------------------------------------------------------


def _geometric(n: int, start: int = 1) -> torch.Tensor:
    return torch.tensor([2.0 ** (-8.0 * (i + start) / n) for i in range(n)], dtype=torch.float64)


def _alibi(slopes, t_q, t_k, offset=None, signed=False):
    offset = t_k - t_q if offset is None else offset
    i = torch.arange(t_q, dtype=torch.float64)[:, None] + offset  # query positions
    j = torch.arange(t_k, dtype=torch.float64)[None, :]  # key positions
    distance = i - j if signed else (i - j).abs()
    return -slopes[:, None, None] * distance


def _alibi_sign_flipped(n_heads, t_q, t_k):
    return -ref_alibi.alibi_bias(n_heads, t_q, t_k)


def _alibi_slopes_reversed(n_heads, t_q, t_k):
    return _alibi(ref_alibi.alibi_slopes(n_heads).flip(0), t_q, t_k)


def _alibi_from_one(n_heads, t_q, t_k):  # slopes 1, 2^(-8/n), ...: the sequence starts one step early
    return _alibi(_geometric(n_heads, start=0), t_q, t_k)


def _alibi_plain_geometric(n_heads, t_q, t_k):  # 2^(-8/n), ..., 2^(-8) for every n, a power of two or not
    return _alibi(_geometric(n_heads), t_q, t_k)


def _alibi_queries_first(n_heads, t_q, t_k):
    return _alibi(ref_alibi.alibi_slopes(n_heads), t_q, t_k, offset=0)


def _alibi_signed(n_heads, t_q, t_k):
    return _alibi(ref_alibi.alibi_slopes(n_heads), t_q, t_k, signed=True)


def _alibi_cases(g: torch.Generator) -> list[Case]:
    h, t_q = size(g, 2, 12), size(g, 1, 6)
    t_k = t_q + size(g, 0, 5)
    t1 = size(g, 2, 8)
    return [
        Case("8 heads, 5 queries and 5 keys", (8, 5, 5)),
        Case("6 heads (not a power of two), 4 queries and 4 keys", (6, 4, 4)),
        Case("4 heads, 2 new queries after 5 cached keys (7 keys)", (4, 2, 7)),
        Case(f"1 head, {t1} queries and keys", (1, t1, t1)),
        Case(f"{h} heads, {count(t_q, 'query')} and {t_k} keys", (h, t_q, t_k)),
        Case("12 heads, 1 query (a decoding step) and 9 keys", (12, 1, 9)),
    ]


# 11.6 one step of causal linear attention --------------------------------------------------------------------


def _phi(x):
    return ref_linear.feature_map(x)


def _step_no_normaliser(state, q, k, v):
    s, z = state
    s = s + _phi(k)[..., :, None] * v[..., None, :]
    return (_phi(q)[..., None, :] @ s).squeeze(-2), (s, z + _phi(k))


def _step_old_state(state, q, k, v):  # the output read before this position is added
    s, z = state
    fq = _phi(q)
    out = (fq[..., None, :] @ s).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)
    return out, (s + _phi(k)[..., :, None] * v[..., None, :], z + _phi(k))


def _step_raw_query(state, q, k, v):  # the feature map applied to the key only
    (s, z), fk = state, _phi(k)
    s, z = s + fk[..., :, None] * v[..., None, :], z + fk
    return (q[..., None, :] @ s).squeeze(-2) / (q * z).sum(dim=-1, keepdim=True), (s, z)


def _step_scaled(state, q, k, v):  # q / sqrt(d_k) before the feature map, as in softmax attention
    return ref_linear.linear_attention_step(state, q / math.sqrt(q.shape[-1]), k, v)


def _step_z_kept(state, q, k, v):  # the normaliser grows for the output but the old one is returned
    out, (s, _) = ref_linear.linear_attention_step(state, q, k, v)
    return out, (s, state[1])


def prefix_state(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The state after the positions keys (..., p, d_k) and values (..., p, d_v): S (..., d_k, d_v) = sum of
    phi(k_j) v_j^T and z (..., d_k) = sum of phi(k_j), zeros when p = 0."""
    fk = _phi(keys)  # (..., p, d_k)
    return fk.transpose(-2, -1) @ values, fk.sum(dim=-2)


def _linear_cases(g: torch.Generator) -> list[Case]:
    def case(label, lead, prefix, d_k, d_v):
        state = prefix_state(randn(g, *lead, prefix, d_k), randn(g, *lead, prefix, d_v))
        return Case(label, (state, randn(g, *lead, d_k), randn(g, *lead, d_k), randn(g, *lead, d_v)))

    heads, p, d_k, d_v = size(g, 1, 3), size(g, 1, 20), size(g, 2, 8), size(g, 1, 8)
    p2 = size(g, 1, 6)
    return [
        case("2 sequences after 5 positions, d_k = 4, d_v = 3", (2,), 5, 4, 3),
        case("the first position: S = 0 and z = 0, d_k = 3, d_v = 5", (2,), 0, 3, 5),
        case(f"(B, h) = (2, {heads}) after {p} positions, d_k = {d_k}, d_v = {d_v}", (2, heads), p, d_k, d_v),
        case(f"one sequence after {p2} positions, d_k = 1, d_v = 2", (), p2, 1, 2),
    ]


# 11.7 a query that looks delta positions back ----------------------------------------------------------------

LOOK_MARGIN = 0.01  # the best distance must win by this fraction of |q| |k|


def look_back(d_head, delta):
    """(q, k), each (d_head,) float64: under RoPE the score of q at position m against k at position m - D is
    largest at D = delta, wherever m is. The key is the query turned by delta positions: the rotation of the query
    at m and of the key at m - D then differ by D - delta positions, and a vector scores highest against itself."""
    q = torch.ones(d_head, dtype=torch.float64)
    return q, rotate(q[None], torch.tensor([delta]))[0]


def rope_scores(q: torch.Tensor, k: torch.Tensor, position: int, t: int) -> torch.Tensor:
    """(t,) float64: the score of q rotated to ``position`` against k rotated to position - D, for D = 0 .. t - 1."""
    query = ref_rotary.rotate(q[None], torch.tensor([position]))[0]  # (d,)
    keys = ref_rotary.rotate(k.expand(t, -1), position - torch.arange(t))  # (t, d): row D at position - D
    return keys @ query


def _look_cases(g: torch.Generator) -> list[Case]:
    def case(label, d_head, delta, t):
        return Case(label, (d_head, delta), judged={"t": t, "positions": (t - 1, t + 99, 4096)})

    d1, t1 = 2 * size(g, 4, 16), size(g, 16, 64)
    d2, t2 = 2 * size(g, 4, 16), size(g, 8, 40)
    delta = size(g, 2, t2 - 1)
    return [
        case("d_head = 8, 5 positions back, among 64 keys", 8, 5, 64),
        case("d_head = 16, 40 positions back, among 48 keys", 16, 40, 48),
        case(f"d_head = {d1}, 1 position back, among {t1} keys", d1, 1, t1),
        case(f"d_head = {d2}, {delta} positions back, among {t2} keys", d2, delta, t2),
    ]


def _judge_look(case: Case, answer) -> str | None:
    d_head, delta = case.args
    t, positions = case.judged["t"], case.judged["positions"]
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return f"the answer should be a pair (q, k) of tensors of shape ({d_head},), got {registry.describe(answer)}"
    for name, x in zip(("q", "k"), answer):
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
            return f"{name} should be a floating-point tensor of shape ({d_head},), got {registry.describe(x)}"
        if tuple(x.shape) != (d_head,):
            return f"{name} should have shape ({d_head},), got {tuple(x.shape)}"
        if not bool(torch.isfinite(x).all()) or not x.abs().sum() > 0:
            return f"{name} must be a finite vector that is not zero"
    q, k = (x.detach().double().cpu() for x in answer)
    unit = float(q.norm() * k.norm())
    for position in positions:
        scores = rope_scores(q, k, position, t)
        best = int(scores.argmax())
        if best != delta:
            return (
                f"with the query at position {position}, the key {best} positions back scores highest "
                f"({scores[best].item():.4g}), not the key {delta} back ({scores[delta].item():.4g})"
            )
        others = torch.cat([scores[:delta], scores[delta + 1 :]])
        rival = int(others.argmax()) + (int(others.argmax()) >= delta)
        gap = (scores[delta] - scores[rival]).item()
        if gap < LOOK_MARGIN * unit:
            return (
                f"with the query at position {position}, the key {delta} back scores {scores[delta].item():.6g} and "
                f"the key {rival} back {scores[rival].item():.6g}: a gap of {gap:.3g}, less than {LOOK_MARGIN:g} "
                f"|q| |k| = {LOOK_MARGIN * unit:.3g}; the keys {t - 1} or fewer positions back must be told apart"
            )
    return None


def _look_same(d_head, delta):
    q = torch.ones(d_head, dtype=torch.float64)
    return q, q.clone()


def _look_forward(d_head, delta):
    q = torch.ones(d_head, dtype=torch.float64)
    return q, ref_rotary.rotate(q[None], torch.tensor([-delta]))[0]


def _look_one_pair(d_head, delta, pair):
    q = torch.zeros(d_head, dtype=torch.float64)
    q[2 * pair] = 1.0  # pair 0 turns by 1 radian per position, pair d_head / 2 - 1 by about 1 / 10000
    return q, ref_rotary.rotate(q[None], torch.tensor([delta]))[0]


def _look_fastest_pair(d_head, delta):
    return _look_one_pair(d_head, delta, 0)


def _look_slowest_pair(d_head, delta):
    return _look_one_pair(d_head, delta, d_head // 2 - 1)


register(
    Exercise(
        id="11.1",
        title="the online softmax",
        idea=(
            "read the scores block by block, keeping the largest score so far and the sum of exponentials measured "
            "from it; when a block brings a larger maximum, the sum so far was measured from the old one and must "
            "be scaled down before the block's terms are added."
        ),
        points=2,
        name="online_softmax",
        kind="function",
        reference=ref_tiled.online_softmax,
        make_cases=_softmax_cases,
        forbidden=BUILTIN_SOFTMAX,
        mistakes=(
            Mistake(
                "the running sum is not rescaled when a block raises the maximum: its terms were measured from "
                "the old maximum, and the block's from the new one.",
                _online_no_rescale,
            ),
            Mistake(
                "each block is normalised on its own: the probabilities must sum to 1 over the whole row, not "
                "over each block.",
                _online_per_block,
            ),
            Mistake(
                "the exponentials are taken of the raw scores: exp(1000) overflows to inf and exp(-1000) "
                "underflows to 0.",
                _online_no_max,
            ),
            Mistake(
                "the running maximum starts at 0, above every score of a row far below 0: that row's exponentials "
                "underflow to 0, and it divides 0 by 0.",
                _online_max_from_zero,
            ),
            Mistake(
                "a first block of only -inf (masked scores) gives exp(-inf - (-inf)) = NaN, which spreads to the "
                "whole row: a running maximum that is still -inf needs care.",
                _online_no_guard,
            ),
        ),
    ),
    Exercise(
        id="11.2",
        title="tiled attention",
        idea=(
            "for each block of queries, visit the key blocks one tile of scores at a time, carrying the running "
            "maximum, the running sum and the running weighted sum of the values; rescale both sums whenever the "
            "maximum grows, divide at the end, and with a causal mask skip the tiles in the future and mask the "
            "tile on the diagonal."
        ),
        points=3,
        name="tiled_attention",
        kind="function",
        reference=tiled_attention_reference,
        make_cases=_tiled_cases,
        forbidden=BUILTIN_ATTENTION + BUILTIN_SOFTMAX,
        mistakes=(
            Mistake(
                "the running output is not rescaled when the maximum grows: like the running sum, it was summed "
                "relative to the old maximum.",
                _tiled_acc_not_rescaled,
            ),
            Mistake(
                "the tiles wholly in the future are skipped, but inside a tile that crosses the diagonal a query "
                "still sees the keys after it.",
                _tiled_diagonal_unmasked,
            ),
            Mistake(
                "the causal mask hides the query's own position too: query i may attend to keys 0 .. i, itself "
                "included (query 0 has no key left, hence NaN).",
                _tiled_strict_mask,
            ),
            Mistake("the scores are not scaled by 1 / sqrt(d).", _tiled_unscaled),
            Mistake(
                "the output is the running weighted sum of the values as it stands: its weights do not sum to 1.",
                _tiled_not_divided,
            ),
        ),
    ),
    Exercise(
        id="11.3",
        title="grouped-query attention",
        idea=(
            "the query heads form as many groups as there are key and value heads, each group of consecutive query "
            "heads sharing one key head and one value head; repeat each key and value head once per member of its "
            "group, then attend as usual."
        ),
        points=2,
        name="grouped_query_attention",
        kind="function",
        reference=grouped_query_attention,
        make_cases=_gqa_cases,
        forbidden=BUILTIN_ATTENTION,
        mistakes=(
            Mistake(
                "query head i reads key/value head i % g: the key/value heads are tiled (0, 1, 2, 0, 1, 2 ...), "
                "where each should serve a group of consecutive query heads.",
                _gqa_modulo,
            ),
            Mistake(
                "query head i reads key/value head i // g: that divides by the number of groups, not by the "
                "number of query heads in each.",
                _gqa_divided_by_groups,
            ),
            Mistake("the scores are not scaled by 1 / sqrt(d).", _gqa_unscaled),
        ),
    ),
    Exercise(
        id="11.4",
        title="the rotary embedding",
        idea=(
            "each pair of neighbouring dimensions is a point in the plane, turned by the row's position times the "
            "pair's frequency; the frequencies fall geometrically from one pair to the next, as in the sinusoidal "
            "table of chapter 7."
        ),
        points=2,
        name="rotate",
        kind="function",
        reference=rotate,
        make_cases=_rotary_cases,
        mistakes=(
            Mistake(
                "this pairs dimension i with dimension i + d/2 (the 'rotate half' layout of some libraries): the "
                "course, like RoFormer, turns neighbouring dimensions 2i and 2i + 1 together.",
                _rotate_half_split,
            ),
            Mistake(
                "the pairs turn the wrong way, clockwise: a positive angle turns (1, 0) towards (0, 1).",
                _rotate_backwards,
            ),
            Mistake(
                "the frequencies fall only half as fast as they should from one pair to the next (chapter 7's "
                "table gives its columns 2i and 2i + 1 one frequency, the one of pair i).",
                _rotate_slow_frequencies,
            ),
            Mistake(
                "the rows are turned by 0, 1, 2, ... whatever the positions given: new rows after a cache do not "
                "sit at position 0.",
                _rotate_positions_ignored,
            ),
            Mistake(
                "the angles are computed in float32 (.float()), which loses their last digits at large positions.",
                _rotate_float32_angles,
            ),
        ),
    ),
    Exercise(
        id="11.5",
        title="the ALiBi bias",
        idea=(
            "each head penalises a key in proportion to its distance from the query, with a slope of its own; "
            "the slopes fall geometrically from head to head, so that some heads look far and others near."
        ),
        points=2,
        name="alibi_bias",
        kind="function",
        reference=ref_alibi.alibi_bias,
        make_cases=_alibi_cases,
        mistakes=(
            Mistake(
                "the bias rewards distance: far keys get the largest scores. It is a penalty, 0 for the query's own "
                "position and more negative the further a key lies.",
                _alibi_sign_flipped,
            ),
            Mistake(
                "the slopes run the wrong way round: the gentlest slope is on the first head.",
                _alibi_slopes_reversed,
            ),
            Mistake(
                "the slopes start one step early, at 2^0 = 1: every head's slope is 2^(8/n) times too steep.",
                _alibi_from_one,
            ),
            Mistake(
                "for a number of heads that is not a power of two, the slopes are not the plain geometric "
                "sequence 2^(-8i/n): the paper builds them from the two nearest powers of two.",
                _alibi_plain_geometric,
            ),
            Mistake(
                "the queries sit at positions 0 .. t_q - 1, where they should be the last t_q positions (new "
                "tokens after the cached keys).",
                _alibi_queries_first,
            ),
            Mistake(
                "the distance is signed, so the keys after the query get a bonus where they too should be "
                "penalised by their distance.",
                _alibi_signed,
            ),
        ),
    ),
    Exercise(
        id="11.6",
        title="one step of causal linear attention",
        idea=(
            "the state holds two running sums over the positions seen so far, the keys' features times their "
            "values and the keys' features alone; add this position to both, then read the output as the query's "
            "features against the first sum, divided by the same against the second."
        ),
        points=2,
        name="linear_attention_step",
        kind="function",
        parts={(0,): "the output", (1, 0): "the new S", (1, 1): "the new z"},
        reference=ref_linear.linear_attention_step,
        make_cases=_linear_cases,
        mistakes=(
            Mistake(
                "the output is not normalised: its weights phi(q) . phi(k_j) do not sum to 1.",
                _step_no_normaliser,
            ),
            Mistake(
                "the output reads the state before this position is added: position i attends to itself too "
                "(at the first position the old state is all zeros, hence 0 / 0).",
                _step_old_state,
            ),
            Mistake("the feature map is applied to the key but not to the query.", _step_raw_query),
            Mistake(
                "the query is divided by sqrt(d_k), as in softmax attention: linear attention takes q and k as "
                "they are.",
                _step_scaled,
            ),
            Mistake(
                "the returned z is the old one: this position's key is missing from it (the output is right).",
                _step_z_kept,
            ),
        ),
    ),
    Exercise(
        id="11.7",
        title="a query that looks back",
        idea=(
            "under the rotary embedding a score depends only on how far apart the query and the key are, through "
            "the angle between them after rotation; turn the key in advance so that it lines up with the query "
            "exactly when it sits the wanted number of positions back."
        ),
        points=3,
        name="look_back",
        kind="function",
        reference=look_back,
        make_cases=_look_cases,
        judge=_judge_look,
        mistakes=(
            Mistake(
                "a key equal to the query lines up with it at distance 0, when both sit at the same position.",
                _look_same,
            ),
            Mistake(
                "the key is turned the wrong way: it lines up with a query that sits delta positions before it, "
                "not after it, and that key is never among those the query can see.",
                _look_forward,
            ),
            Mistake(
                "only the fastest pair is used: it turns by one radian per position, so 44 positions later it has "
                "made almost exactly 7 turns and scores almost as high. Slower pairs tell such distances apart.",
                _look_fastest_pair,
            ),
            Mistake(
                "only the slowest pair is used: it turns by a tiny angle per position, so neighbouring distances "
                "score almost the same. Faster pairs tell them apart.",
                _look_slowest_pair,
            ),
        ),
    ),
)
