"""The verdict on one exercise: the worker's answers to its cases, decoded strictly and compared with the
reference run here on the same inputs, a line per case for the report and, apart from the wording, whether
every case passed. A wrong answer that matches a known mistake gets that mistake's hint, as in the notebook.
"""

from __future__ import annotations

from typing import Any

from .. import registry
from ..codec import CodecError, decode
from ..registry import Exercise, changed_message, input_names, matching_mistake, verdict

__all__ = ["compare_cases"]


def compare_cases(ex: Exercise, cases: list[registry.Case], answer: dict) -> tuple[list[str], str | None, bool]:
    """(a line per case for the report, the exercise's state if not plain pass or fail, whether every case passed
    and no forbidden built-in was called)."""
    if "error" in answer and "results" not in answer:
        return [str(answer["error"])[:500]], None, False
    results = answer.get("results")
    forbidden = answer.get("forbidden")
    lines: list[str] = []
    if isinstance(forbidden, list) and forbidden:
        called = ", ".join(f"`{str(f)[:80]}`" for f in forbidden[:5])
        lines.append(f"your code called PyTorch's built-in {called}, which this exercise asks you to build yourself")
    if not isinstance(results, list) or len(results) > len(cases):
        return lines + ["the grading process sent malformed results"], None, False
    results = results + [{"error": "not run: an earlier case ran out of time"}] * (len(cases) - len(results))
    if all(isinstance(r, dict) and r.get("not_attempted") for r in results):
        return lines + ["not attempted (the cell still raises NotImplementedError)"], "not attempted", False
    right = 0
    for case, result in zip(cases, results):
        label = f"case '{case.label}'"
        if not isinstance(result, dict) or ("error" not in result and "value" not in result):
            lines.append(f"✗ {label}: malformed result")
            continue
        if "error" in result:
            lines.append(f"✗ {label}: {str(result['error'])[:300]}")
            continue
        try:
            actual = decode(result["value"])
        except CodecError as exc:
            lines.append(f"✗ {label}: the result could not be read ({exc})")
            continue
        changed = result.get("changed")
        if isinstance(changed, list) and changed and not ex.judge:  # an input edited in place (see registry.attempt)
            lines.append(f"✗ {label}: {changed_message(input_names(ex, changed[:8]) or ['?'])}")
            continue
        problem = _safe_verdict(ex, case, actual)
        if problem is None:
            lines.append(f"✓ {label}")
            right += 1
            continue
        hint = matching_mistake(ex, case, actual)
        lines.append(f"✗ {label}: {problem}" + (f"\n  Hint: {hint}" if hint else ""))
    called_forbidden = isinstance(forbidden, list) and bool(forbidden)
    return lines, None, bool(cases) and right == len(cases) and not called_forbidden


def _safe_verdict(ex: Exercise, case: registry.Case, actual: Any) -> str | None:
    try:
        return verdict(ex, case, actual)
    except Exception as exc:  # noqa: BLE001 - an unexpected value is a wrong answer, never a crash
        return f"the result could not be compared with the reference ({type(exc).__name__})"
