"""check(id, obj): the one-line self-check that follows every exercise in a notebook.

It runs the exercise's public cases, prints one verdict line (and a hint when it fails), and returns
the implementation the rest of the notebook should use: the student's when it passes, the reference
otherwise, so that a blank or broken exercise never blocks the cells after it.
"""

from __future__ import annotations

import traceback
from typing import Any

from . import registry
from .registry import PUBLIC_SEED, Exercise, compare, run_case


def _matching_mistake(ex: Exercise, case: registry.Case, actual: Any) -> str | None:
    for mistake in ex.mistakes:
        try:
            wrong = run_case(ex, mistake.implementation, case)
        except Exception:
            continue
        if compare(wrong, actual, ex.atol, ex.rtol) is None:
            return mistake.hint
    return None


def _is_notebook_cell(filename: str) -> bool:
    # IPython compiles each cell under a name like /tmp/ipykernel_123/456.py; plain Python uses <string>.
    return filename.startswith("<") or "ipykernel_" in filename


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_notebook_cell(f.filename)]
    return f" (line {frames[-1].lineno} of your cell)" if frames else ""


def evaluate(ex: Exercise, obj: Any, seed: int = PUBLIC_SEED) -> tuple[str, int, int, str | None]:
    """(status, passed, total, message) with status 'passed', 'failed' or 'not attempted'."""
    cases = ex.cases(seed)
    passed = 0
    for case in cases:
        try:
            actual = run_case(ex, obj, case)
        except NotImplementedError:
            return "not attempted", 0, len(cases), None
        except KeyboardInterrupt:  # interrupted by hand, or by the grader's time limit: a failure, not a crash
            return "failed", passed, len(cases), f"on case '{case.label}' your code ran until it was interrupted (an endless loop?)"
        except Exception as exc:  # the student's code raised: report it, never crash the notebook
            return "failed", passed, len(cases), (
                f"on case '{case.label}' your code raised {type(exc).__name__}: {exc}{_where(exc)}"
            )
        expected = run_case(ex, ex.reference, case)
        problem = compare(expected, actual, ex.atol, ex.rtol)
        if problem:
            message = f"on case '{case.label}', {problem}."
            hint = _matching_mistake(ex, case, actual)
            if hint:
                message += f"\n   Hint: {hint}"
            return "failed", passed, len(cases), message
        passed += 1
    return "passed", passed, len(cases), None


def check(exercise_id: str, obj: Any) -> Any:
    """Self-check exercise ``exercise_id`` on ``obj``; print the verdict; return what later cells should use."""
    ex = registry.get(exercise_id)
    status, passed, total, message = evaluate(ex, obj)
    if status == "passed":
        print(f"✅ Exercise {ex.id} ({ex.title}): passed all {total} checks.")
        return obj
    if status == "not attempted":
        print(f"⏳ Exercise {ex.id} ({ex.title}): not attempted yet. The cells below use the reference implementation.")
    else:
        print(f"❌ Exercise {ex.id} ({ex.title}): passed {passed} of {total} checks; {message}")
        print("   The cells below use the reference implementation until this check passes.")
    return ex.reference
