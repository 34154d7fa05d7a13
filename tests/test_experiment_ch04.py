"""Exercise 4.4, steer the attention: the judge, the cases, the reference answer and the known mistakes."""

import math

import pytest
import torch

from transformer_course.exercises import ch04
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict

EX = registry.get("4.4")


@pytest.fixture(scope="module")
def public():
    return EX.cases(PUBLIC_SEED)


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED, 1, 2, 3])
def test_the_reference_passes_every_case_with_room_to_spare(seed):
    for case in EX.cases(seed):
        s = run_case(EX, EX.reference, case)
        assert verdict(EX, case, s) is None, case.label
        h, W, U, v, j = case.args
        assert s.shape == (1, W.shape[1]) and s.abs().max() <= 1
        assert ch04._steer_weights(s, h, W, U, v)[j] >= 0.95, case.label  # the threshold is 0.9


def test_the_cases_cover_the_first_an_inner_and_the_last_position(public):
    targets = [(case.args[0].shape[1], case.args[4]) for case in public]
    assert [t for t, _ in targets] == [5, 8, 12]
    assert targets[0][1] == 0 and 0 < targets[1][1] < 7 and targets[2][1] == 11
    for case in public:
        h, W, U, v, j = case.args
        assert h.abs().max() < 1  # encoder states as a GRU makes them
        assert ch04._steer_room(h, U, v, j) >= ch04._STEER_ROOM


@pytest.mark.parametrize("index", range(len(EX.mistakes)))
def test_each_mistake_fails_a_public_case(public, index):
    mistake = EX.mistakes[index].implementation
    problems = [verdict(EX, case, run_case(EX, mistake, case)) for case in public]
    assert any(problems), mistake.__name__


def test_the_encoder_state_as_the_query_reports_the_weights(public):
    problem = verdict(EX, public[1], run_case(EX, ch04._steer_own_state, public[1]))
    j = public[1].args[4]
    assert problem.startswith(f"the attention weight on position {j} is ")
    assert "the largest elsewhere is" in problem and "at least 0.9" in problem


def test_a_state_outside_the_range_is_rejected_in_words(public):
    problem = verdict(EX, public[0], run_case(EX, ch04._steer_raw_score, public[0]))
    assert "outside [-1, 1]" in problem and "GRU" in problem
    # A scaled-up state that would win is still rejected: the bound comes first.
    h, W, U, v, j = public[0].args
    assert "outside [-1, 1]" in verdict(EX, public[0], 3 * ch04.steer_attention(h, W, U, v, j))


@pytest.mark.parametrize(
    "answer",
    [
        "a string",
        None,
        [0.0, 1.0],
        0.5,
        torch.zeros(16),
        torch.zeros(2, 16),
        torch.zeros(1, 15),
        torch.zeros(1, 16, dtype=torch.long),
        torch.full((1, 16), math.nan),
        torch.full((1, 16), math.inf),
        torch.zeros(1, 16, dtype=torch.complex64),
    ],
    ids=repr,
)
def test_the_judge_answers_garbage_with_a_sentence(public, answer):
    problem = EX.judge(public[0], answer)
    assert isinstance(problem, str) and problem and "\n" not in problem


def test_a_float32_state_in_range_is_measured_not_refused(public):
    case = public[2]
    s = run_case(EX, EX.reference, case).float()
    assert verdict(EX, case, s) is None
