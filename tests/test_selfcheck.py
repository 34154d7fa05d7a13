"""The in-notebook self-check: verdicts, hints for known mistakes, and the fallback to the reference.

The generic tests run over every registered exercise of every chapter.
"""

import ast
import dataclasses
import json
import re
import textwrap

import pytest
import torch

from transformer_course.authoring import manifest, mistakes
from transformer_course.grading import check, registry
from transformer_course.grading.cells import BEGIN, END
from transformer_course.grading.cells import exercise_id as cell_exercise
from transformer_course.grading.codec import encode
from transformer_course.grading.given import given_code
from transformer_course.grading.kernel import selfcheck
from transformer_course.grading.kernel.selfcheck import evaluate
from transformer_course.models import attention as ref

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


SEEDS = range(20)  # the grader draws its hidden cases from a fresh seed on every run


def _caught(ex, answer, cases) -> bool:
    """Whether some case fails the answer (an exception counts: the grader fails it too)."""
    for case in cases:
        try:
            if registry.verdict(ex, case, registry.run_case(ex, answer, case)) is not None:
                return True
        except Exception:  # noqa: BLE001 - any error is a failed case
            return True
    return False


@pytest.fixture(scope="module")
def mistakes_page(course_root) -> str:
    """The pages of known mistakes, the introduction first, then a page per chapter (book/mistakes/chNN.md)."""
    pages = [course_root / mistakes.PAGE, *sorted((course_root / mistakes.CHAPTER_PAGES).glob("ch*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in pages)


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_every_known_mistake_is_caught_by_a_fixed_case_and_the_page_says_which(exercise_id, mistakes_page):
    # A fixed edge case catches each known mistake on every seed, so a wrong answer never passes by the luck of
    # the draw (the public self-check's seed, the grader's per-run seeds: each draw has the case). The
    # instructor's page of known mistakes (book/mistakes.md) names that case for each.
    ex = registry.get(exercise_id)
    caught = {id(m): mistakes.catching_cases(ex, m.implementation) for m in ex.mistakes}
    missed = [m.hint[:60] for m in ex.mistakes if not caught[id(m)]]
    assert not missed, f"no case catches these on every seed of {mistakes.seeds_for(ex)}: {missed}"
    section = "\n".join(mistakes.section(ex, caught))
    assert section in mistakes_page, f"book/mistakes.md is out of date for {exercise_id}: run `make release`"


def test_the_beam_steps_off_by_one_is_caught_whatever_the_seed():
    # Exercise 9.2 with `rank <= beam_size` (a candidate that ends in <eos> just after the best K finishes too)
    # passed the self-check every time and the grader 9 times in 15; every wrong beam step of
    # tests/wrong_answers/ch09.py, as the student's code, now fails on every seed.
    from wrong_answers.ch09 import WRONG_ROUNDS

    ex = registry.get("9.2")
    answers = [r["9.2"] for r in WRONG_ROUNDS if "9.2" in r]
    assert any("rank <= beam_size" in a for a in answers)
    draws = [ex.cases(seed) for seed in SEEDS]
    for code in answers:
        namespace = {"torch": torch}
        exec(compile(code, "<wrong answer>", "exec"), namespace)
        assert all(_caught(ex, namespace["beam_step"], cases) for cases in draws), code


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
    # 8.6 trains a model per case: one training, judged on 200 strings, is its one case (see ch08._copy_cases).
    assert len(public) == len(hidden) >= (1 if exercise_id == "8.6" else 3)
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

    from transformer_course.grading.kernel import selfcheck

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


def test_a_deleted_exercise_cell_is_named_as_deleted_not_as_not_run(shell, capsys, tmp_path, monkeypatch):
    # Jupyter Server names the kernel's notebook in JPY_SESSION_NAME: the check reads it as last saved
    notebook = tmp_path / "05_self_attention.ipynb"
    cells = [{"cell_type": "code", "metadata": {}, "source": ["x = 1\n"]}]
    notebook.write_text(json.dumps({"cells": cells}))
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    capsys.readouterr()
    _run(shell, CHECK_5_1.replace("attention_scores)", "None)"))
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 5.1") and "no exercise cell for 5.1 any more" in out and "Undo Delete" in out
    # the cell is there, only not run: the old words
    cells.append({"cell_type": "code", "metadata": {}, "source": ["# EXERCISE 5.1 (2 points): attention scores\n"]})
    notebook.write_text(json.dumps({"cells": cells}))
    _run(shell, CHECK_5_1.replace("attention_scores)", "None)"))
    assert "has not run in this kernel yet" in capsys.readouterr().out
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "missing.ipynb"))  # unreadable: nothing known
    _run(shell, CHECK_5_1.replace("attention_scores)", "None)"))
    assert "has not run in this kernel yet" in capsys.readouterr().out


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


def _verdicts_on_the_exercises_page(course_root) -> list[str]:
    text = (course_root / "book" / "exercises.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```text\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if b.startswith("❌ Exercise") and "checks;" in b]


def test_the_verdicts_the_exercises_page_shows_are_what_a_check_prints(course_root, capsys, monkeypatch):
    # book/exercises.md shows three verdicts: 5.3 with the mask ignored, failing once (the idea) and again (the
    # hint), and 1.4 answered with the gain 1. Each block is what `check` prints, line for line, from its start.
    monkeypatch.setattr(selfcheck, "_FAILURES", {})
    ignored = next(m for m in registry.get("5.3").mistakes if "ignored" in m.hint).implementation
    printed = []
    for exercise_id, answer in (("5.3", ignored), ("5.3", ignored), ("1.4", lambda *args, **kwargs: 1.0)):
        check(exercise_id, answer)
        printed.append(capsys.readouterr().out)
    shown = _verdicts_on_the_exercises_page(course_root)
    assert len(shown) == 3
    for block, out in zip(shown, printed):
        assert out.startswith(block), (block, out)
    assert "passed 1 of 4 checks" in shown[0] and "Failed as well" in shown[0]  # every case tried and counted


# --- no hint hands over the solution ---------------------------------------------------------------------------

_CODE_CALL = re.compile(r"(?:[A-Za-z_][\w.]*)?\.(\w+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")  # x.f(args), torch.cat(...)


def _call_shape(method: str, args: str) -> str:
    # the call with its arguments, any names in them abstracted: a hint that spells the solution's call with
    # other variable names (h for n_heads) still hands it over
    return method + "(" + re.sub(r"[A-Za-z_]\w*", "_", re.sub(r"\s+", "", args)) + ")"


def _solution_calls(source: str) -> set[str]:
    """The method calls with arguments in an exercise cell's solution blocks, as _call_shape."""
    body, inside = [], False
    for line in source.splitlines():  # the release tool's markers (grading.cells)
        if BEGIN.match(line) or END.match(line):
            inside = bool(BEGIN.match(line))
        elif inside:
            body.append(line)
    code = textwrap.dedent("\n".join(body))
    tree = ast.parse(code)
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (node.args or node.keywords):
            args = ", ".join(ast.get_source_segment(code, a) for a in [*node.args, *node.keywords])
            calls.add(_call_shape(node.func.attr, args))
    return calls


def _exercise_solutions(course_root) -> dict[str, str]:
    sources = {}
    for path in sorted((course_root / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            exercise = cell_exercise({**cell, "source": "".join(cell.get("source", ""))})
            if exercise and "### BEGIN SOLUTION" in "".join(cell["source"]):
                sources[exercise] = "".join(cell["source"])
    return sources


def test_no_hint_contains_the_solutions_code(course_root):
    # The exercises page promises that no hint contains the solution's code: a hint may name an axis, a shape or a
    # formula, but not a call of the solution with its arguments (6.1's "x.reshape(B, T, h, d_k) ... .transpose(1,
    # 2)" did). Every hint of every exercise, against the method calls of that exercise's solution.
    solutions = _exercise_solutions(course_root)
    assert len(solutions) >= 30
    handed_over = []
    for exercise, source in solutions.items():
        calls = _solution_calls(source)
        for mistake in registry.get(exercise).mistakes:
            shown = {_call_shape(m.group(1), m.group(2)) for m in _CODE_CALL.finditer(mistake.hint)}
            handed_over += [f"{exercise}: {call} in {mistake.hint[:70]!r}" for call in sorted(shown & calls)]
    assert not handed_over, handed_over


def test_the_hint_check_recognises_a_solution_call_under_other_names():
    calls = _solution_calls(
        "    ### BEGIN SOLUTION\n    return x.reshape(B, T, n_heads, d_k).transpose(1, 2)\n    ### END SOLUTION\n"
    )
    assert calls == {"reshape(_,_,_,_)", "transpose(1,2)"}
    hint = "Split the last axis, x.reshape(B, T, h, d_k), then add .transpose(1, 2)."
    assert {_call_shape(m.group(1), m.group(2)) for m in _CODE_CALL.finditer(hint)} == calls


def test_an_error_in_a_helper_of_another_cell_says_where_it_was_raised_and_called():
    # A helper defined in an earlier cell raises: the verdict names the helper's line in that cell and the line of
    # the exercise cell that called it (it said "line 3 of your cell", a line of another cell).
    scope = {"torch": torch}
    helper = "def scale(x):\n    # the helper\n    raise ValueError('no scale for you')\n"
    exec(compile(helper, "/tmp/ipykernel_1/100.py", "exec"), scope)  # a cell, named as IPython names them
    answer = "def attention_scores(q, k):\n    s = q @ k.transpose(-2, -1)\n    return scale(s)\n"
    exec(compile(answer, "/tmp/ipykernel_1/200.py", "exec"), scope)
    status, passed, total, message = evaluate(registry.get("5.1"), scope["attention_scores"])
    assert status == "failed" and passed == 0 and total >= 3
    assert "ValueError: no scale for you (in scale, line 3 of another cell, called from line 3 of your cell)" in message


def _shapes(value):
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_shapes(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _shapes(v)) for k, v in value.items()))
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1000:
        return value  # a size (T, a vocabulary, a beam width); larger ints are seeds, not sizes
    return type(value).__name__  # a value, not a size: strings, floats, seeds


def _other_shapes(ex) -> bool:
    public = [_shapes((c.args, c.kwargs, c.init)) for c in ex.cases(registry.PUBLIC_SEED)]
    return any(public != [_shapes((c.args, c.kwargs, c.init)) for c in ex.cases(seed)] for seed in (1, 2, 3))


def test_the_exercises_page_says_truly_which_exercises_get_other_shapes(course_root):
    # The page's promise: "for exercises <list> other shapes and sizes as well", and only for those.
    text = " ".join((course_root / "book" / "exercises.md").read_text(encoding="utf-8").split())
    listed = re.search(r"and for exercises ([\d., and]+?) other shapes and sizes as well", text)
    assert listed, "the exercises page no longer lists the exercises whose hidden cases have other shapes"
    promised = set(re.findall(r"\d+\.\d+", listed.group(1)))
    assert promised == {e for e in EXERCISES if _other_shapes(registry.get(e))}


@pytest.mark.parametrize("exercise_id", ["6.1", "6.2", "6.3", "6.4", "9.2", "9.4"])
def test_hidden_cases_have_other_shapes_and_their_labels_show_them(exercise_id):
    # Issue 36: these exercises' grader cases had the public labels and shapes. Now sizes are drawn per seed, the
    # label states them, and the fixed edge cases are there on every seed (tested with the known mistakes).
    ex = registry.get(exercise_id)
    labels = {tuple(c.label for c in ex.cases(seed)) for seed in range(10)}
    assert len(labels) >= 5, labels
    for seed in range(10):
        for case in ex.cases(seed):
            sizes = {n for t in _tensors((case.args, case.kwargs)) for n in t.shape}
            numbers = {int(n) for n in re.findall(r"\d+", case.label)}
            assert sizes - {0, 1} <= numbers | {n * m for n in numbers for m in numbers}, (case.label, sizes)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        yield from _tensors(list(value.values()))


def test_a_mismatch_names_the_part_of_the_result_and_shows_small_values():
    # Was: "item 0 of item 1 of the result should be a tuple of 0 (), got a tuple of 1 (a tuple of 1 (a int))".
    ex = registry.get("9.2")
    case = next(c for c in ex.cases(registry.PUBLIC_SEED) if "none of the best" in c.label)
    (live, live_scores), _ = ex.reference(*case.args)
    wrong = ((live, live_scores), (((7, 2),), live_scores[:1]))
    assert registry.verdict(ex, case, wrong) == "the finished hypotheses: expected none, got 1 item: ((7, 2),)"
    swapped = ((live[::-1], live_scores), ((), live_scores[:0]))
    # as many as expected, in another order: shown as they are, without a count that would say nothing
    assert registry.verdict(ex, case, swapped) == f"the live hypotheses: expected {live}, got {live[::-1]}"
    ex = registry.get("6.3")
    case = ex.cases(registry.PUBLIC_SEED)[0]
    out, weights = registry.run_case(ex, ex.reference, case)
    assert registry.verdict(ex, case, (out, weights.mean(dim=1))).startswith("the tensor of weights should have shape")
    assert all(ex.parts for ex in map(registry.get, ("1.2", "2.3", "3.1", "4.3", "5.3", "6.3", "9.2", "9.4")))


def test_the_mistakes_page_has_one_section_per_exercise_in_order(mistakes_page, course_root):
    headings = re.findall(r"^## Exercise (\S+):", mistakes_page, flags=re.M)
    assert headings == EXERCISES
    assert mistakes.NOT_CAUGHT not in mistakes_page
    # The introduction is what make release writes; a page per graded chapter, titled as the manifest names it.
    assert (course_root / mistakes.PAGE).read_text(encoding="utf-8") == mistakes.intro()
    pages = sorted((course_root / mistakes.CHAPTER_PAGES).glob("ch*.md"))
    assert [p.stem for p in pages] == [f"ch{c:02d}" for c in sorted(registry.CHAPTER_MODULES)]
    for page in pages:
        title = page.read_text(encoding="utf-8").splitlines()[0]
        chapter = int(page.stem[2:])
        assert title == f"# Known mistakes: chapter {chapter}, {manifest.load().chapter(chapter).title}", title


def test_a_tuple_of_floats_is_compared_within_the_tolerance_and_ids_exactly():
    assert registry.compare((1.0, 2.0), (1.0 + 1e-12, 2.0), 1e-6, 1e-6) is None
    assert registry.compare((1.0, 2.0), (1.1, 2.0), 1e-6, 1e-6) is not None
    assert registry.compare(((1, 2),), ((1, 3),), 1e-6, 1e-6) == "the result: expected ((1, 2),), got ((1, 3),)"


def test_the_instructor_guide_names_every_exercise_graded_by_measurement(course_root):
    # The guide's "Teaching with the course" tells instructors which exercises an assessment can rest on: the judged
    # ones.
    judged = [e.id for ch in registry.CHAPTER_MODULES for e in registry.chapter_exercises(ch) if e.judge is not None]
    guide = (course_root / "book" / "instructor" / "teach.md").read_text()
    listed = re.search(r"\*\*experiment and analysis\s+exercises\*\* \(([\d., ]+), graded", guide)
    assert listed, "the instructor guide no longer lists the exercises graded by measurement"
    assert [x.strip() for x in listed.group(1).split(",")] == judged


def test_a_cell_the_grader_would_refuse_does_not_pass_the_self_check(shell, capsys):
    """Issue 32: a right answer in a cell outside the grader's closed world (here `import sys`) would get 0 points
    when graded; the self-check says so, with the grader's reason, instead of passing."""
    _run(shell, SOLVED_5_1.replace("def attention_scores", "import sys\ndef attention_scores"))
    capsys.readouterr()
    assert _run(shell, CHECK_5_1).success
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 5.1") and "would refuse" in out and "`sys`" in out, out
    assert shell.user_ns["attention_scores"] is ref.attention_scores


def test_the_self_check_reads_the_chapters_given_imports_as_the_grader_does(shell, capsys, course_root):
    """Chapter 9's given code imports `mock` (unittest.mock). The grader reads a cell with the chapter's own imports
    (given_code of the pristine notebook), so it refuses a cell that uses `mock`; the self-check must say so too,
    rather than read the cell with the usual imports, find nothing, and run it."""
    pristine = json.loads((course_root / "notebooks" / registry.chapter_notebook(9)).read_text())
    assert selfcheck.given_imports(9) == given_code(pristine)["__imports__"]
    ex = registry.get("9.1")
    cell = f"# EXERCISE 9.1 ({ex.points} points): {ex.title}\n"
    cell += f"def {ex.name}(*args, **kwargs):\n    return mock.sentinel\n"
    _run(shell, cell)
    capsys.readouterr()
    assert _run(shell, f'{ex.name} = check("9.1", {ex.name})').success
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 9.1") and "would refuse" in out and "`unittest.mock`" in out, out
    assert shell.user_ns[ex.name] is ex.reference
