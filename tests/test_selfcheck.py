"""The in-notebook self-check: verdicts, hints for known mistakes, and the fallback to the reference.

The generic tests run over every registered exercise of every chapter.
"""

import dataclasses

import pytest
import torch

from transformer_course import attention as ref
from transformer_course.grading import check, registry, selfcheck
from transformer_course.grading.codec import encode
from transformer_course.grading.selfcheck import evaluate

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
def test_reference_passes_its_own_cases(exercise_id):
    ex = registry.get(exercise_id)
    assert evaluate(ex, ex.reference)[0] == "passed"


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_a_check_never_passes_the_reference(exercise_id, capsys):
    ex = registry.get(exercise_id)
    assert check(exercise_id, ex.reference) is ex.reference
    out = capsys.readouterr().out
    assert out.startswith(f"❌ Exercise {exercise_id}") and "reference implementation, not yours" in out


@pytest.mark.parametrize(
    "exercise_id, index", [(e, i) for e in EXERCISES for i in range(len(registry.get(e).mistakes))]
)
def test_each_known_mistake_fails_with_its_own_hint(exercise_id, index, capsys, monkeypatch):
    # Hints escalate: the first failure recalls the exercise's idea, the next one names the mistake.
    monkeypatch.setattr(selfcheck, "_FAILURES", {})
    ex = registry.get(exercise_id)
    mistake = ex.mistakes[index]
    returned = check(exercise_id, mistake.implementation)
    first = capsys.readouterr().out
    assert first.startswith(f"❌ Exercise {exercise_id}")
    assert f"The idea: {ex.idea}" in first and mistake.hint not in first
    assert returned is ex.reference  # later cells go on with a working implementation
    check(exercise_id, mistake.implementation)
    again = capsys.readouterr().out
    assert mistake.hint in again and "The idea:" not in again


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_every_exercise_has_an_idea_in_words_not_code(exercise_id):
    idea = registry.get(exercise_id).idea
    assert len(idea.split()) >= 8, idea
    assert not any(token in idea for token in ("`", "torch.", "nn.", "F.", " @ ", ".T", "[:", "()")), idea


def test_a_pass_resets_the_hints(capsys, monkeypatch):
    monkeypatch.setattr(selfcheck, "_FAILURES", {})
    ex = registry.get("5.2")
    wrong = ex.mistakes[0].implementation
    check("5.2", wrong)
    check("5.2", lambda lengths, t: ex.reference(lengths, t))  # solved
    assert "✅" in capsys.readouterr().out
    check("5.2", wrong)  # the first failure since the pass: the idea again, not the mistake
    out = capsys.readouterr().out
    assert "The idea:" in out and ex.mistakes[0].hint not in out


def test_not_attempted_falls_back_to_the_reference(capsys):
    def attention_scores(q, k):
        raise NotImplementedError("Exercise 5.1")

    assert check("5.1", attention_scores) is ref.attention_scores
    assert "not attempted yet" in capsys.readouterr().out


def test_an_exception_is_reported_not_raised(capsys):
    def decoder_mask(lengths, t):
        return torch.ones(t).foo

    check("5.2", decoder_mask)
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


# --- in a notebook: the check tests what the exercise cell's latest run defined -------------------------------

SOLVED_5_1 = '''# EXERCISE 5.1 (2 points): attention scores
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
'''
BLANK_5_1 = '''# EXERCISE 5.1 (2 points): attention scores
def attention_scores(q, k):
    raise NotImplementedError("Exercise 5.1: replace this line with your code")
'''
CHECK_5_1 = 'attention_scores = check("5.1", attention_scores)'
PASSED_5_1 = "✅ Exercise 5.1 (attention scores): passed all 3 checks.\n"


@pytest.fixture
def shell():
    """An IPython shell, as in a kernel, with the course's setup cell run."""
    from IPython.core.interactiveshell import InteractiveShell

    from transformer_course.grading import selfcheck

    ipython = InteractiveShell.instance()
    tracker = selfcheck.track(ipython)
    ipython.run_cell("import math\nimport torch\nfrom transformer_course.grading import check", store_history=True)
    yield ipython
    tracker.unregister()
    InteractiveShell.clear_instance()


def _run(shell, source):
    result = shell.run_cell(source, store_history=True)
    return result


def test_in_a_notebook_a_solved_exercise_passes_with_the_same_words(shell, capsys):
    _run(shell, SOLVED_5_1)
    capsys.readouterr()
    assert _run(shell, CHECK_5_1).success
    assert capsys.readouterr().out == PASSED_5_1
    assert shell.user_ns["attention_scores"].__module__ == "__main__"


@pytest.mark.parametrize(
    "broken, error",
    [
        ("# EXERCISE 5.1 (2 points): attention scores\ndef attention_scores(q, k)\n    return q\n", "SyntaxError"),
        ("# EXERCISE 5.1 (2 points): attention scores\ndef attention_scores(q, k):\nreturn q\n", "IndentationError"),
        (
            "# EXERCISE 5.1 (2 points): attention scores\nscale = undefined_name\ndef attention_scores(q, k):\n    return q\n",
            "NameError",
        ),
    ],
)
def test_a_broken_exercise_cell_never_passes_on_the_earlier_binding(shell, capsys, broken, error):
    # The notebook ran once with the exercise blank: the check bound the name to the reference.
    _run(shell, BLANK_5_1)
    _run(shell, CHECK_5_1)
    assert shell.user_ns["attention_scores"] is ref.attention_scores
    # Then the student breaks the cell and runs the check: it must not test the reference.
    assert not _run(shell, broken).success
    capsys.readouterr()
    assert _run(shell, CHECK_5_1).success
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 5.1") and "did not run to the end" in out and error in out, out
    assert "passed" not in out
    assert shell.user_ns["attention_scores"] is ref.attention_scores


def test_a_broken_solution_after_a_pass_is_not_the_old_pass(shell, capsys):
    _run(shell, SOLVED_5_1)
    _run(shell, CHECK_5_1)
    _run(shell, "# EXERCISE 5.1 (2 points): attention scores\ndef attention_scores(q, k)\n    return q\n")
    capsys.readouterr()
    _run(shell, CHECK_5_1)
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 5.1") and "SyntaxError" in out and "(line 2 of your cell)" in out, out


def test_the_check_again_without_running_the_exercise_tests_its_latest_run_not_the_reference(shell, capsys):
    _run(shell, BLANK_5_1)
    _run(shell, CHECK_5_1)  # binds the reference
    capsys.readouterr()
    _run(shell, CHECK_5_1)
    assert "not attempted yet" in capsys.readouterr().out


def test_restart_and_run_all_reaches_the_end_after_a_broken_exercise(shell, capsys):
    # A fresh kernel: the exercise cell fails before it defines anything, so the name does not exist.
    assert not _run(
        shell, "# EXERCISE 5.1 (2 points): attention scores\ndef attention_scores(q, k):\nreturn q\n"
    ).success
    assert "attention_scores" not in shell.user_ns
    result = _run(shell, CHECK_5_1)
    assert result.success, result.error_in_exec  # not a NameError: Run All goes on
    assert "IndentationError" in capsys.readouterr().out
    later = _run(shell, "print(attention_scores(torch.eye(2), torch.eye(2)).shape)")
    assert later.success and "torch.Size([2, 2])" in capsys.readouterr().out


def test_a_check_whose_exercise_cell_never_ran_says_so(shell, capsys):
    assert _run(shell, CHECK_5_1).success
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 5.1") and "has not run in this kernel" in out
    assert shell.user_ns["attention_scores"] is ref.attention_scores


def test_an_exercise_cell_that_does_not_define_the_name_is_reported(shell, capsys):
    _run(shell, BLANK_5_1)
    _run(shell, CHECK_5_1)
    _run(shell, "# EXERCISE 5.1 (2 points): attention scores\ndef my_scores(q, k):\n    return q @ k.mT\n")
    capsys.readouterr()
    _run(shell, CHECK_5_1)
    assert "did not define `attention_scores`" in capsys.readouterr().out


def test_a_name_rebound_outside_the_exercise_cell_is_not_what_is_checked(shell, capsys):
    _run(shell, BLANK_5_1)
    _run(shell, "def attention_scores(q, k):\n    return q @ k.mT / math.sqrt(k.shape[-1])")  # not the exercise cell
    capsys.readouterr()
    _run(shell, CHECK_5_1)
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "not the object passed to `check`" in out


def test_a_judge_that_cannot_measure_an_answer_fails_it_with_words(capsys):
    # An experiment's judge measures the answer; an answer it cannot measure is wrong, never a crash.
    def judge(case, answer):
        return None if float(answer) > 0 else "the answer must be positive"

    ex = registry.Exercise(
        id="0.9",
        title="a judged toy",
        points=1,
        name="f",
        kind="function",
        reference=lambda: 1.0,
        make_cases=lambda g: [registry.Case("no inputs")],
        judge=judge,
        idea="any positive number passes this toy",
    )
    assert evaluate(ex, lambda: 2.0)[0] == "passed"
    status, _, _, message = evaluate(ex, lambda: -1.0)
    assert status == "failed" and "the answer must be positive" in message
    status, _, _, message = evaluate(ex, lambda: "many")
    assert status == "failed" and "could not be measured (ValueError" in message


def test_a_judged_exercise_may_use_autograd_and_an_implementation_may_not_need_it():
    def needs_grad():
        x = torch.ones(2, requires_grad=True)
        (x * x).sum().backward()
        return x.grad.sum().item()

    judged = registry.Exercise(
        id="0.8",
        title="t",
        points=1,
        name="f",
        kind="function",
        reference=needs_grad,
        make_cases=lambda g: [registry.Case("c")],
        judge=lambda case, answer: None,
        idea="x",
    )
    assert registry.run_case(judged, needs_grad, registry.Case("c")) == 4.0
    compared = dataclasses.replace(judged, id="0.7", judge=None)
    assert registry.run_case(compared, lambda: torch.ones(1).requires_grad, registry.Case("c")) is False
