"""The in-notebook self-check: verdicts, hints for known mistakes, and the fallback to the reference.

The generic tests run over every registered exercise of every chapter.
"""

import pytest
import torch

from transformer_course import attention as ref
from transformer_course.grading import check, registry
from transformer_course.grading.selfcheck import evaluate

from transformer_course.grading.codec import encode

EXERCISES = [e.id for chapter in sorted(registry.CHAPTER_MODULES) for e in registry.chapter_exercises(chapter)]


def _plain(value):
    """Case inputs as encodable data; a module given as an input is described by its weights."""
    if isinstance(value, torch.nn.Module):
        return {"module": type(value).__name__, "state": dict(value.state_dict())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _inputs(case) -> str:
    return repr(encode(_plain((case.args, case.kwargs, case.init, case.state))))


@pytest.mark.parametrize("chapter", sorted(registry.CHAPTER_MODULES))
def test_every_chapter_has_at_least_three_exercises(chapter):
    assert len(registry.chapter_exercises(chapter)) >= 3


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_reference_passes_and_is_returned(exercise_id, capsys):
    ex = registry.get(exercise_id)
    assert check(exercise_id, ex.reference) is ex.reference
    assert capsys.readouterr().out.startswith(f"✅ Exercise {exercise_id}")


@pytest.mark.parametrize(
    "exercise_id, index", [(e, i) for e in EXERCISES for i in range(len(registry.get(e).mistakes))]
)
def test_each_known_mistake_fails_with_its_own_hint(exercise_id, index, capsys):
    ex = registry.get(exercise_id)
    mistake = ex.mistakes[index]
    returned = check(exercise_id, mistake.implementation)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ Exercise {exercise_id}")
    assert mistake.hint in out
    assert returned is ex.reference  # later cells go on with a working implementation


def test_not_attempted_falls_back_to_the_reference(capsys):
    def attention_scores(q, k):
        raise NotImplementedError("Exercise 5.1")

    assert check("5.1", attention_scores) is ref.attention_scores
    assert "not attempted yet" in capsys.readouterr().out


def test_an_exception_is_reported_not_raised(capsys):
    def causal_mask(t):
        return torch.ones(t).foo

    check("5.2", causal_mask)
    out = capsys.readouterr().out
    assert "raised AttributeError" in out and "foo" in out


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_hidden_cases_differ_from_public_ones(exercise_id):
    ex = registry.get(exercise_id)
    public, hidden = ex.cases(registry.PUBLIC_SEED), ex.cases(registry.HIDDEN_SEED)
    assert len(public) == len(hidden) >= 3
    assert [_inputs(c) for c in public] != [_inputs(c) for c in hidden]


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_cases_are_deterministic_and_do_not_depend_on_the_default_dtype(exercise_id):
    # The grading kernel may run with float64 as the default dtype (chapter 5 does), the grader with float32.
    ex = registry.get(exercise_id)
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        in_float64 = ex.cases(registry.HIDDEN_SEED)
    finally:
        torch.set_default_dtype(previous)
    assert [_inputs(c) for c in in_float64] == [_inputs(c) for c in ex.cases(registry.HIDDEN_SEED)]


def test_unknown_exercise_is_a_clear_error():
    with pytest.raises(ValueError, match=r"there is no exercise '9.9'; the exercises are .*5\.1, 5\.2, 5\.3, 5\.4"):
        check("9.9", print)


def test_wrong_kind_of_object_is_reported():
    status, _, _, message = evaluate(registry.get("5.4"), ref.scaled_dot_product_attention)
    assert status == "failed" and "should be a class" in message
