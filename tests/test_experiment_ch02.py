"""Exercise 2.5, how long the LSTM remembers: the judge, the reference answer and the known mistakes."""

import math

import pytest
import torch

from transformer_course.exercises import ch02
from transformer_course.grading import registry
from transformer_course.models import lstm as ref

EXERCISE = registry.get("2.5")
SEEDS = (registry.PUBLIC_SEED, registry.HIDDEN_SEED, 12345)  # 12345: the grader tests' hidden seed


def _failures(answer_of, seed=registry.PUBLIC_SEED) -> list[str]:
    return [
        problem
        for case in EXERCISE.cases(seed)
        if (problem := registry.verdict(EXERCISE, case, registry.run_case(EXERCISE, answer_of, case)))
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_reference_answer_passes_every_case(seed):
    assert _failures(EXERCISE.reference, seed) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_reference_lands_on_the_target(seed):
    for case in EXERCISE.cases(seed):
        *inputs, target = case.args
        bias = ch02.choose_forget_bias(*case.args)
        assert ch02.belt_retention(bias, *inputs)[-1].item() == pytest.approx(target, abs=1e-4)


@pytest.mark.parametrize("index", range(len(EXERCISE.mistakes)))
def test_each_known_mistake_fails_a_public_case(index):
    assert _failures(EXERCISE.mistakes[index].implementation)


def _bisect(kept, target):
    low, high = -10.0, 30.0
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if kept(middle) < target else (low, middle)
    return (low + high) / 2


def _forget_gates(bias, x, w_ih, w_hh, b_ih, b_hh, both=False):
    hidden = w_hh.shape[1]
    raised, raised_hh = b_ih.clone(), b_hh.clone()
    raised[hidden : 2 * hidden] += bias
    if both:
        raised_hh[hidden : 2 * hidden] += bias
    state, gates = (x.new_zeros(x.shape[0], hidden), x.new_zeros(x.shape[0], hidden)), []
    for t in range(x.shape[1]):
        gates.append(ref.lstm_gates(x[:, t], state[0], w_ih, w_hh, raised, raised_hh)[1])
        state = ref.lstm_cell(x[:, t], state, w_ih, w_hh, raised, raised_hh)
    return torch.stack(gates, dim=1)  # (B, T, H)


def _raised_in_both_biases(x, w_ih, w_hh, b_ih, b_hh, target):
    return _bisect(lambda b: _forget_gates(b, x, w_ih, w_hh, b_ih, b_hh, both=True).prod(1).mean().item(), target)


def _mean_gate_to_the_power_t(x, w_ih, w_hh, b_ih, b_hh, target):
    return _bisect(lambda b: _forget_gates(b, x, w_ih, w_hh, b_ih, b_hh).mean().item() ** x.shape[1], target)


@pytest.mark.parametrize("near_miss", [_raised_in_both_biases, _mean_gate_to_the_power_t])
@pytest.mark.parametrize("seed", SEEDS)
def test_near_misses_fail_on_every_seed(near_miss, seed):
    assert _failures(near_miss, seed)


def test_a_judge_says_by_how_much_and_which_way():
    case = EXERCISE.cases(registry.PUBLIC_SEED)[0]
    low = ch02._judge_retention(case, 0.0)
    high = ch02._judge_retention(case, 20.0)
    assert "forgets too fast" in low and "between 0.45 and 0.55" in low
    assert "holds on too long" in high
    assert ch02._judge_retention(case, torch.tensor(ch02.choose_forget_bias(*case.args))) is None


@pytest.mark.parametrize(
    "garbage",
    ["4.5", None, True, (4.0, 5.0), torch.zeros(3), torch.tensor(math.nan), math.inf, -math.inf, torch.tensor(1 + 2j)],
)
def test_garbage_gets_a_sentence_not_an_exception(garbage):
    case = EXERCISE.cases(registry.PUBLIC_SEED)[0]
    problem = ch02._judge_retention(case, garbage)
    assert isinstance(problem, str) and problem


def test_the_measure_is_the_formula_when_the_gates_hear_only_their_biases():
    # zero weights: every forget gate is sigmoid(b_f + bias) at every step, so the belt keeps its t-th power
    hidden, steps = 3, 20
    b_ih = torch.zeros(4 * hidden, dtype=torch.float64)
    b_ih[hidden : 2 * hidden] = torch.tensor([-1.0, 0.0, 2.0])
    zeros = [torch.zeros(4 * hidden, 2, dtype=torch.float64), torch.zeros(4 * hidden, hidden, dtype=torch.float64)]
    x = torch.randn(5, steps, 2, dtype=torch.float64)
    curve = ch02.belt_retention(1.5, x, *zeros, b_ih, torch.zeros_like(b_ih))
    t = torch.arange(1, steps + 1, dtype=torch.float64)[:, None]
    expected = (torch.sigmoid(torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64) + 1.5) ** t).mean(dim=1)
    assert torch.allclose(curve, expected, atol=1e-12)


def test_the_judge_leaves_the_case_inputs_as_they_were():
    case = EXERCISE.cases(registry.PUBLIC_SEED)[1]
    before = [a.clone() for a in case.args[:-1]]
    ch02._judge_retention(case, 4.0)
    ch02.choose_forget_bias(*case.args)
    assert all(torch.equal(a, b) for a, b in zip(before, case.args[:-1]))
