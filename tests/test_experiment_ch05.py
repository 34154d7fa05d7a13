"""Exercise 5.5, a test input that catches every bug: what the judge accepts and the words it refuses with."""

import pytest
import torch

from transformer_course.exercises import ch05
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict

EX = registry.get("5.5")


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED])
def test_the_reference_input_catches_every_bug(seed):
    for case in EX.cases(seed):
        assert verdict(EX, case, run_case(EX, EX.reference, case)) is None


def test_random_inputs_let_bugs_through_by_name():
    case = EX.cases(PUBLIC_SEED)[0]
    t, d_k = case.args
    q, k, v = torch.randn(t, d_k), torch.randn(t, d_k), torch.randn(t, d_k)
    problem = verdict(EX, case, (q, k, v, torch.ones(t, t, dtype=torch.bool).tril()))
    assert "divided by sqrt(d_v)" in problem and "without subtracting the largest score" in problem


def test_every_bug_is_a_bug():
    # each bug differs from the right attention on the reference input: none of them is correct by accident
    q, k, v, mask = ch05.catch_every_bug(4, 3)
    right, _ = ch05.ref.scaled_dot_product_attention(q, k, v, mask)
    for bug in ch05.BUGS.values():
        out, _ = bug(q, k, v, mask)
        assert not (torch.isfinite(out).all() and torch.allclose(out, right))


def _valid():
    return ch05.catch_every_bug(3, 2)


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda a: a[:3], "the four tensors"),
        (lambda a: "q k v mask", "the four tensors"),
        (lambda a: (a[0][:, :1], *a[1:]), "q should have shape (3, 2)"),
        (lambda a: (a[0].long(), *a[1:]), "q should be a 2-D floating-point tensor"),
        (lambda a: (a[0], a[1], torch.full_like(a[2], float("nan")), a[3]), "v holds infinite or NaN"),
        (lambda a: (*a[:3], a[3].double()), "mask should be a (3, 3) boolean tensor"),
        (lambda a: (*a[:3], torch.zeros(3, 3, dtype=torch.bool)), "may see no key at all"),
        (lambda a: (a[0], a[1], torch.ones(3, 65, dtype=torch.float64), a[3]), "between 1 and 64 columns"),
    ],
)
def test_a_malformed_input_gets_a_sentence(edit, words):
    case = registry.Case("t = 3, d_k = 2", (3, 2))
    problem = verdict(EX, case, edit(_valid()))
    assert problem is not None and words in problem, problem


def test_an_input_on_which_the_correct_attention_overflows_catches_nothing():
    # Issue 32: q = k = 1e160 made every score overflow; the correct attention was NaN and so "every bug failed".
    case = EX.cases(PUBLIC_SEED)[0]
    t, d_k = case.args
    huge = torch.full((t, d_k), 1e160, dtype=torch.float64)
    answer = (huge, huge.clone(), torch.randn(t, 2, dtype=torch.float64), torch.ones(t, t, dtype=torch.bool).tril())
    assert "the correct attention itself is not finite" in verdict(EX, case, answer)
