"""Exercise 8.6, train your own Transformer: the judge, its reference answer and its known mistakes.

The reference trains a model per case (about two seconds on one thread); the other tests build weights by hand.
"""

import collections
import math

import pytest
import torch

from transformer_course.exercises import ch08
from transformer_course.grading import registry

EX = registry.get("8.6")
CASES = EX.cases(registry.PUBLIC_SEED) + EX.cases(registry.HIDDEN_SEED)


def _untrained(seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = ch08.FullTransformer(ch08.COPY_VOCAB, ch08.COPY_VOCAB, **ch08.COPY_MODEL)
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_the_reference_passes_the_public_and_hidden_cases(case):
    weights = registry.run_case(EX, EX.reference, case)
    assert registry.verdict(EX, case, weights) is None
    right, *_ = ch08.copy_score(weights, case.judged["strings_seed"])
    assert right >= 0.95 * ch08.COPY_STRINGS  # a margin over the 90% the judge asks for


@pytest.mark.parametrize("mistake", EX.mistakes, ids=lambda m: m.implementation.__name__)
def test_each_mistake_fails_a_public_case(mistake):
    verdicts = [registry.verdict(EX, c, mistake.implementation(*c.args)) for c in EX.cases(registry.PUBLIC_SEED)]
    assert any(isinstance(v, str) and v for v in verdicts)


def test_the_cases_are_seeds_and_the_judge_strings_differ_between_them():
    seeds = [c.args[0] for c in CASES]
    assert all(type(s) is int for s in seeds) and len(set(seeds)) == len(seeds)
    tests = [c.judged["strings_seed"] for c in CASES]
    first, second = (ch08._copy_strings(s)[0] for s in tests[:2])
    assert first.shape == (ch08.COPY_STRINGS, 8) and not torch.equal(first, second)


def test_the_student_function_never_receives_the_seed_of_the_judge_strings():
    # Issue 32: the judge's strings came from the training seed + 7919, which a function given that seed could
    # draw and train on. Their seed is drawn apart and travels in Case.judged, which the grader never sends.
    from transformer_course.grading.host.cases import encode_case

    for seed in (registry.PUBLIC_SEED, registry.HIDDEN_SEED, 1, 2):
        for case in EX.cases(seed):
            sent = repr(encode_case(case))
            assert str(case.judged["strings_seed"]) not in sent and case.judged["strings_seed"] not in case.args


def test_untrained_weights_fail_with_the_numbers():
    case = EX.cases(registry.PUBLIC_SEED)[0]
    problem = EX.judge(case, _untrained())
    assert problem.startswith("decoded greedily, these weights repeat 0 of 200 new strings (0%; at least 90% needed)")
    assert "their loss on these strings is" in problem and "(the floor that label smoothing allows: 0.55)" in problem


def test_weights_that_write_eos_at_once_are_named_for_it():
    # What a model trained without the causal mask writes: <eos> first, whatever the string.
    case = EX.cases(registry.PUBLIC_SEED)[0]
    weights = _untrained()
    weights["out.bias"][ch08.EOS] = 100.0
    problem = EX.judge(case, weights)
    assert "repeat 0 of 200" in problem and "200 outputs start with <eos>" in problem and "-> <eos>, and" in problem


def test_the_floor_is_the_entropy_of_the_smoothed_targets():
    v, eps = ch08.COPY_VOCAB, ch08.COPY_SMOOTHING
    right, other = 1 - eps + eps / v, eps / v
    assert ch08._copy_floor() == pytest.approx(-(right * math.log(right) + (v - 1) * other * math.log(other)))


def _with(name, value):
    weights = _untrained()
    weights[name] = value
    return weights


@pytest.mark.parametrize(
    "answer, words",
    [
        ("the weights", "got a str"),
        (None, "got a NoneType"),
        (0.55, "got a float"),
        (torch.zeros(3, 3), "got a float32 tensor"),
        ([torch.zeros(3)], "got a list of 1"),
        (collections.OrderedDict({"weight": torch.zeros(3)}), "34 of its names are missing"),  # read as a dict
        ({"weight": torch.zeros(3)}, "34 of its names are missing"),
        ({**_untrained(), "extra": torch.zeros(1)}, "1 are not its own (extra"),
        (_with("out.bias", torch.zeros(15)), "should have shape (14,), got (15,)"),
        (_with("out.bias", torch.zeros(14, dtype=torch.long)), "should be a floating-point tensor"),
        (_with("out.bias", "zeros"), "should be a floating-point tensor, got a str"),
        (_with("out.weight", torch.full((14, 32), math.nan)), "NaN or infinite"),
        (_with("out.weight", torch.full((14, 32), 1e30)), "repeat"),
    ],
    ids=[
        "string",
        "None",
        "number",
        "tensor",
        "list",
        "OrderedDict",
        "other names",
        "extra name",
        "wrong shape",
        "integers",
        "not a tensor",
        "NaN",
        "huge",
    ],
)
def test_garbage_gets_a_sentence_not_an_exception(answer, words):
    problem = EX.judge(EX.cases(registry.PUBLIC_SEED)[0], answer)
    assert isinstance(problem, str) and words in problem, problem


def test_float64_weights_are_weights_too():
    case = EX.cases(registry.PUBLIC_SEED)[0]
    weights = {name: value.double() for name, value in _untrained().items()}
    assert "repeat 0 of 200" in EX.judge(case, weights)
