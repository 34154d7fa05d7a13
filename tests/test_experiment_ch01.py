"""Exercise 1.4, the knife edge: the judge measures a gain, and the edge moves from case to case."""

import math

import pytest
import torch

from transformer_course.exercises import ch01
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict

EX = registry.get("1.4")


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED])
def test_the_reference_balances_every_case_and_the_edge_moves(seed):
    gains = []
    for case in EX.cases(seed):
        gain = run_case(EX, EX.reference, case)
        assert verdict(EX, case, gain) is None
        assert 1 / ch01.EDGE <= ch01.gradient_ratio(gain, *case.args) <= ch01.EDGE
        gains.append(gain)
    assert max(gains) - min(gains) > 0.2  # no single gain is right for every case


def test_the_ratio_grows_with_the_gain():
    case = EX.cases(PUBLIC_SEED)[0]
    ratios = [ch01.gradient_ratio(g, *case.args) for g in (0.5, 1.0, 1.5, 2.0, 3.0)]
    assert ratios == sorted(ratios) and ratios[0] < 1e-6 and ratios[-1] > 1e3


@pytest.mark.parametrize(
    "answer, words",
    [
        ("1.5", "one number"),
        (torch.ones(3), "one number"),
        (float("nan"), "positive finite"),
        (-1.0, "positive finite"),
        (True, "one number"),
        (1.0, "vanishes"),
        (3.0, "explodes"),
    ],
)
def test_a_wrong_or_malformed_gain_gets_a_sentence(answer, words):
    problem = verdict(EX, EX.cases(PUBLIC_SEED)[0], answer)
    assert problem is not None and words in problem


def test_a_gain_as_a_tensor_is_accepted():
    case = EX.cases(PUBLIC_SEED)[0]
    gain = run_case(EX, EX.reference, case)
    assert verdict(EX, case, torch.tensor(gain, dtype=torch.float64)) is None
    assert math.isfinite(gain)
