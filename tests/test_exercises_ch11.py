"""Chapter 11's exercises: the references agree with PyTorch's own and with the course's modules, exercise 11.7 (a
query that looks back) is judged by measurement, and the wrong answers of tests/wrong_answers/ch11.py fail.

The wrong answers run here in-process, on many seeds, in a namespace with what the notebook's setup cell imports
(torch, F) and the course's `rotate`, so that they are checked before the chapter's notebook holds the exercises
(tests/test_wrong_answers.py runs them in the notebook's namespace, tests/test_grader.py through the grader)."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.exercises import ch11
from transformer_course.grading import registry
from transformer_course.grading.host.fallback import package_fallback
from transformer_course.grading.static_check import static_problem
from transformer_course.models import linear_attention, rotary, tiled_attention
from wrong_answers.ch11 import WRONG_ROUNDS

IDS = [f"11.{i}" for i in range(1, 8)]
SEEDS = (registry.PUBLIC_SEED, registry.HIDDEN_SEED, 1, 2, 3)


def _cases(exercise_id):
    ex = registry.get(exercise_id)
    return [case for seed in SEEDS for case in ex.cases(seed)]


def test_the_chapter_registers_its_seven_exercises():
    assert [e.id for e in registry.chapter_exercises(11)] == IDS
    assert registry.chapter_notebook(11) == "11_attention_at_scale.ipynb"


@pytest.mark.parametrize("case", _cases("11.1"), ids=lambda c: c.label)
def test_the_online_softmax_is_the_softmax(case):
    scores, block = case.args
    ours = registry.get("11.1").reference(scores, block)
    assert torch.allclose(ours, torch.softmax(scores, dim=-1), atol=1e-12, rtol=0)


@pytest.mark.parametrize("case", _cases("11.2"), ids=lambda c: c.label)
def test_tiled_attention_is_pytorchs_attention(case):
    q, k, v, block, causal = case.args
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(ch11.tiled_attention_reference(q, k, v, block, causal), expected, atol=1e-12, rtol=0)
    assert not causal or q.shape[-2] == k.shape[-2]  # causal cases are square: no question of alignment


@pytest.mark.parametrize("case", _cases("11.3"), ids=lambda c: c.label)
def test_grouped_query_attention_is_pytorchs_attention_with_enable_gqa(case):
    q, k, v, mask = case.args
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert torch.allclose(ch11.grouped_query_attention(q, k, v, mask), expected, atol=1e-12, rtol=0)


def test_grouped_query_attention_shares_heads_as_the_course_s_layer_does():
    # GroupedQueryAttention with identity projections: its heads are the exercise's q, k, v split by head.
    from transformer_course.models.grouped_query import GroupedQueryAttention

    torch.manual_seed(0)
    h, g, d_k, t = 6, 2, 4, 5
    layer = GroupedQueryAttention(h * d_k, h, g, bias=False).double()
    with torch.no_grad():
        for name in ("w_q", "w_o"):
            getattr(layer, name).weight.copy_(torch.eye(h * d_k))
        for name in ("w_k", "w_v"):  # the first g heads of the input are the key/value heads
            getattr(layer, name).weight.copy_(torch.eye(h * d_k)[: g * d_k])
    x = torch.randn(2, t, h * d_k, dtype=torch.float64)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    out, _ = layer(x, x, x, mask)
    heads = x.unflatten(-1, (h, d_k)).transpose(1, 2)  # (B, h, T, d_k)
    ours = ch11.grouped_query_attention(heads, heads[:, :g], heads[:, :g], mask)  # (B, h, T, d_k)
    assert torch.allclose(ours.transpose(1, 2).flatten(-2), out, atol=1e-12)


@pytest.mark.parametrize("case", _cases("11.4"), ids=lambda c: c.label)
def test_the_rotation_is_the_course_s_and_keeps_lengths_and_position_zero(case):
    x, positions = case.args
    out = ch11.rotate(x, positions)
    assert torch.allclose(out, rotary.rotate(x, positions), atol=1e-12, rtol=0)
    pairs = lambda y: y.unflatten(-1, (-1, 2)).norm(dim=-1)  # the length of each pair
    assert torch.allclose(pairs(out), pairs(x), atol=1e-12)
    at_zero = positions == 0
    assert torch.equal(out[..., at_zero, :], x[..., at_zero, :])


@pytest.mark.parametrize("case", _cases("11.5"), ids=lambda c: c.label)
def test_the_alibi_bias_is_zero_at_the_query_and_a_penalty_elsewhere(case):
    n_heads, t_q, t_k = case.args
    bias = registry.get("11.5").reference(n_heads, t_q, t_k)
    assert bias.shape == (n_heads, t_q, t_k) and (bias <= 0).all()
    assert (bias[:, torch.arange(t_q), torch.arange(t_k - t_q, t_k)] == 0).all()  # each query's own position


def test_the_first_alibi_cases_have_the_shapes_their_mistakes_need():
    first = [c.args for c in registry.get("11.5").cases(registry.HIDDEN_SEED)[:3]]
    assert first == [(8, 5, 5), (6, 4, 4), (4, 2, 7)]  # a power of two; not one; fewer queries than keys


def test_the_linear_state_is_the_sum_the_recurrence_reaches_and_the_step_is_the_parallel_form():
    torch.manual_seed(1)
    q, k = torch.randn(2, 9, 4, dtype=torch.float64), torch.randn(2, 9, 4, dtype=torch.float64)
    v = torch.randn(2, 9, 3, dtype=torch.float64)
    parallel = linear_attention.linear_attention(q, k, v, causal=True)
    state = (torch.zeros(2, 4, 3, dtype=torch.float64), torch.zeros(2, 4, dtype=torch.float64))
    for p in range(9):
        expected = ch11.prefix_state(k[:, :p], v[:, :p])
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(state, expected))
        out, state = registry.get("11.6").reference(expected, q[:, p], k[:, p], v[:, p])
        assert torch.allclose(out, parallel[:, p], atol=1e-12)


def test_the_step_cases_hold_states_that_a_prefix_can_reach():
    for case in _cases("11.6"):
        (s, z), q, k, v = case.args
        assert s.shape == (*q.shape, v.shape[-1]) and z.shape == q.shape
        assert (z >= 0).all()  # a sum of positive features (zero at the first position)


# --- 11.7: a query that looks back, judged ---------------------------------------------------------------------

EX7 = registry.get("11.7")


@pytest.mark.parametrize("case", _cases("11.7"), ids=lambda c: c.label)
def test_the_reference_passes_the_public_and_hidden_cases(case):
    assert registry.verdict(EX7, case, EX7.reference(*case.args)) is None
    d_head, delta = case.args
    assert 1 <= delta < case.judged["t"] <= 64 and d_head % 2 == 0


@pytest.mark.parametrize("d_head", range(8, 34, 2))
def test_the_reference_wins_by_the_margin_at_every_distance_the_cases_draw(d_head):
    # The cases draw d_head from 8 to 32 and t up to 64: fewer keys only remove rivals, so t = 64 covers them all.
    for delta in range(1, 64):
        q, k = ch11.look_back(d_head, delta)
        scores = ch11.rope_scores(q, k, 63, 64)
        rivals = torch.cat([scores[:delta], scores[delta + 1 :]])
        assert int(scores.argmax()) == delta
        assert scores[delta] - rivals.max() >= 2 * ch11.LOOK_MARGIN * q.norm() * k.norm(), (d_head, delta)


def test_the_scores_depend_on_the_distance_only():
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    assert torch.allclose(ch11.rope_scores(q, k, 40, 30), ch11.rope_scores(q, k, 4000, 30), atol=1e-9)


def test_the_judge_says_why_in_numbers():
    case = EX7.cases(registry.PUBLIC_SEED)[0]  # d_head = 8, 5 back, among 64 keys
    same = registry.verdict(EX7, case, (torch.ones(8), torch.ones(8)))
    assert same.startswith("with the query at position 63, the key 0 positions back scores highest")
    aliased = registry.verdict(EX7, case, ch11._look_fastest_pair(8, 5))
    assert "the key 5 back scores" in aliased and "the key 49 back" in aliased  # 44 radians: 7 turns, nearly
    assert registry.verdict(EX7, case, (torch.ones(8),)).startswith("the answer should be a pair (q, k)")
    assert "shape (8,)" in registry.verdict(EX7, case, (torch.ones(8), torch.ones(6)))
    assert "not zero" in registry.verdict(EX7, case, (torch.zeros(8), torch.ones(8)))


# --- the course's code that replaces a failed answer, and the wrong answers ------------------------------------


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_course_code_that_replaces_a_failed_answer_passes(exercise_id):
    ex = registry.get(exercise_id)
    namespace: dict = {}
    exec(compile(package_fallback(ex), f"<course code {ex.id}>", "exec"), namespace)
    for case in ex.cases(registry.PUBLIC_SEED):
        assert registry.verdict(ex, case, registry.run_case(ex, namespace[ex.name], case)) is None


WRONG = [(i, ex_id, code) for i, answers in enumerate(WRONG_ROUNDS) for ex_id, code in answers.items()]


def test_every_exercise_has_three_wrong_answers_or_more_and_every_round_all_seven():
    assert all(sum(ex_id == e for _, e, _ in WRONG) >= 3 for ex_id in IDS)
    assert all(sorted(r) == IDS for r in WRONG_ROUNDS)


@pytest.mark.parametrize("index, ex_id, code", WRONG, ids=[f"{w[1]}-round{w[0]}" for w in WRONG])
def test_every_wrong_answer_fails_on_every_seed(index, ex_id, code):
    ex = registry.get(ex_id)
    if static_problem(code, ex, {e.name for e in registry.chapter_exercises(11)}):
        assert ex_id in ("11.1", "11.2", "11.3") and index == 3  # only the round of PyTorch's built-ins is refused
        return
    namespace = {"torch": torch, "F": F, "rotate": rotary.rotate}
    exec(compile(code, f"<wrong answer {ex_id}>", "exec"), namespace)
    answer = namespace[ex.name]
    missed = []
    for seed in range(20) if ex.judge is None else range(5):
        caught = False
        for case in ex.cases(seed):
            try:
                actual, changed = registry.attempt(ex, answer, case)  # as the self-check and the grader run it
                caught = bool(changed) or registry.verdict(ex, case, actual) is not None
            except Exception:  # noqa: BLE001 - an error is a failed case, for the grader too
                caught = True
            if caught:
                break
        if not caught:
            missed.append(seed)
    assert not missed, f"wrong answer {ex_id} of round {index} passes on seeds {missed}"


def test_the_online_softmax_of_the_library_is_the_reference():
    assert registry.get("11.1").reference is tiled_attention.online_softmax
