"""Exercise 6.4, two heads built by hand: the judge measures the heads' maps with the reference layer."""

import math

import pytest
import torch

from transformer_course.exercises import ch06
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict

EX = registry.get("6.4")


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED])
def test_the_reference_passes_every_case(seed):
    for case in EX.cases(seed):
        assert verdict(EX, case, run_case(EX, EX.reference, case)) is None


@pytest.mark.parametrize("T", range(2, 17))
def test_the_reference_makes_both_heads_sharp_at_every_length(T):
    maps = ch06.head_weights(T, *ch06.two_heads(T))
    t = torch.arange(T)
    assert maps[0, t[1:], t[:-1]].min() > 0.999 and maps[1, t, t].min() > 0.999
    assert torch.allclose(maps[0, 0], torch.full((T,), 1 / T, dtype=torch.float64))  # query 0 asks for nothing


def test_the_maps_are_the_softmax_of_the_scaled_column_products():
    T = 5
    w_q, w_k = torch.randn(2 * T, 2 * T, dtype=torch.float64), torch.randn(2 * T, 2 * T, dtype=torch.float64)
    maps = ch06.head_weights(T, w_q, w_k)
    for head in range(2):
        rows = slice(head * T, (head + 1) * T)
        scores = w_q[rows, :T].T @ w_k[rows, :T] / math.sqrt(T)  # (query t, key s): column t . column s
        assert torch.allclose(maps[head], torch.softmax(scores, dim=-1), atol=1e-12)


@pytest.mark.parametrize("index", range(len(EX.mistakes)))
def test_each_mistake_fails_a_public_case(index):
    mistake = EX.mistakes[index].implementation
    problems = [verdict(EX, case, run_case(EX, mistake, case)) for case in EX.cases(PUBLIC_SEED)]
    assert any(problems)
    assert all("head 0" in p and "head 1" in p and "at least 0.9" in p for p in problems if p)


def test_the_sentence_gives_both_heads_measurements():
    case = EX.cases(PUBLIC_SEED)[-1]
    T = case.args[0]
    soft = ch06._heads_soft(T)
    problem = verdict(EX, case, soft)
    maps = ch06.head_weights(T, *soft)
    t = torch.arange(T)
    assert f"{maps[0, t[1:], t[:-1]].min().item():.3g}" in problem and f"{maps[1, t, t].min().item():.3g}" in problem


def test_a_factor_that_does_not_grow_with_T_passes_short_sequences_only():
    unscaled = ch06._heads_unscaled
    assert verdict(EX, registry.Case("T = 4", (4,)), unscaled(4)) is None
    assert verdict(EX, registry.Case("T = 12", (12,)), unscaled(12)) is not None


def _reference(T=4):
    return ch06.two_heads(T)


@pytest.mark.parametrize(
    "answer, words",
    [
        ("weights", "a pair (w_q, w_k)"),
        (_reference()[0], "a pair (w_q, w_k)"),
        ((_reference()[0],), "a pair (w_q, w_k)"),
        ((_reference()[0], "keys"), "w_k should be a floating-point tensor"),
        ((_reference()[0].long(), _reference()[1]), "w_q should be a floating-point tensor"),
        ((_reference()[0][:4], _reference()[1]), "w_q should have shape (8, 8)"),
        (_reference(5), "w_q should have shape (8, 8)"),
        ((_reference()[0], torch.full((8, 8), float("nan"))), "NaN or infinite"),
        ((_reference()[0] * float("inf"), _reference()[1]), "NaN or infinite"),
        ((_reference()[0] * 1e300, _reference()[1] * 1e300), "overflow"),
    ],
)
def test_a_malformed_answer_gets_a_sentence(answer, words):
    problem = verdict(EX, EX.cases(PUBLIC_SEED)[0], answer)
    assert problem is not None and words in problem, problem


def test_float32_weights_and_a_list_are_accepted():
    case = EX.cases(PUBLIC_SEED)[0]
    w_q, w_k = ch06.two_heads(case.args[0])
    assert verdict(EX, case, [w_q.float(), w_k.float()]) is None
