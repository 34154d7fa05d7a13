"""Trying an answer on an exercise's public cases, for the self-check: every case is run, the ones that passed
are counted, the first failure is explained (with a known mistake's hint) and the others are named; an error
says where it was raised, in the exercise cell or in a helper of another cell.
"""

from __future__ import annotations

import traceback
from typing import Any

from ..registry import PUBLIC_SEED, Exercise, attempt, changed_message, matching_mistake, verdict


def _is_notebook_cell(filename: str) -> bool:
    # IPython compiles each cell under a name like /tmp/ipykernel_123/456.py; plain Python uses <string>.
    return filename.startswith("<") or "ipykernel_" in filename


def _cell_file(obj: Any) -> str | None:
    """The file name under which the answer's code was compiled (its exercise cell's), if it can be told."""
    functions = [obj] if not isinstance(obj, type) else [v for v in vars(obj).values() if callable(v)]
    for function in functions:
        code = getattr(function, "__code__", None)
        if code is not None:
            return code.co_filename
    return None


def where(exc: BaseException, cell_file: str | None = None) -> str:
    """Where the error was raised: a line of the exercise cell, or a line of another cell (a helper defined
    elsewhere in the notebook) and the line of the exercise cell that called it."""
    if isinstance(exc, SyntaxError):  # raised while compiling the cell: no traceback frame of the cell
        return f" (line {exc.lineno} of your cell)" if exc.lineno else ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_notebook_cell(f.filename)]
    if not frames:
        return ""
    last = frames[-1]
    if cell_file is None or last.filename == cell_file:
        return f" (line {last.lineno} of your cell)"
    mine = [f for f in frames if f.filename == cell_file]
    called = f", called from line {mine[-1].lineno} of your cell" if mine else ""
    return f" (in {last.name}, line {last.lineno} of another cell{called})"


def describe_error(exc: BaseException) -> str:
    text: str | list[str]  # the message, then its lines
    text = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    text = (text or "").strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def evaluate(
    ex: Exercise, obj: Any, seed: int = PUBLIC_SEED, mistake_hint: bool = True
) -> tuple[str, int, int, str | None]:
    """(status, passed, total, message) with status 'passed', 'failed' or 'not attempted'. Every case is tried, so
    that `passed` counts the cases that passed; the message explains the first failure (with the known mistake
    that the answer matches, if any, when ``mistake_hint``) and names the other cases that failed."""
    cases = ex.cases(seed)
    passed, failures, stopped = 0, [], False
    for case in cases:
        try:
            actual, changed = attempt(ex, obj, case)  # on a copy: the case stays as the reference will see it
        except NotImplementedError:
            return "not attempted", 0, len(cases), None
        except KeyboardInterrupt:  # interrupted by hand, or by the grader's time limit: a failure, not a crash
            failures.append((case, f"on case '{case.label}' your code ran until it was interrupted (an endless loop?)"))
            stopped = True
            break
        except Exception as exc:  # noqa: BLE001 - the student's code raised: report it, never crash the notebook
            failures.append(
                (
                    case,
                    f"on case '{case.label}' your code raised {type(exc).__name__}: {exc}{where(exc, _cell_file(obj))}",
                )
            )
            continue
        problem = changed_message(changed) if changed else verdict(ex, case, actual)
        if problem:
            message = f"on case '{case.label}', {problem}."
            hint = matching_mistake(ex, case, actual) if mistake_hint and not failures and not changed else None
            if hint:
                message += f"\n   Hint: {hint}"
            failures.append((case, message))
            continue
        passed += 1
    if not failures:
        return "passed", passed, len(cases), None
    message = failures[0][1]
    if len(failures) > 1:
        message += "\n   Failed as well: " + "; ".join(f"'{case.label}'" for case, _ in failures[1:]) + "."
    if stopped:
        message += f"\n   The check stopped there: {len(cases) - passed - len(failures)} case(s) did not run."
    return "failed", passed, len(cases), message
