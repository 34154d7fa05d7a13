"""The grader: one submitted notebook in, a score per exercise out.

The trust boundary is a process boundary. The grader's own process holds the exercise registry, the
reference implementations and a secret seed drawn per run; the student's code runs in a separate,
sandboxed worker (``host/sandbox.py`` starts ``inside/worker.py``) that has none of them on its file system.

1. Read the submission; anything that is not a readable notebook gets a report that says so.
2. Take only its exercise cells. Each is checked statically (``static_check.static_problem``, on the
   syntax tree), then sent to the worker after the definitions that the pristine student notebook's
   given cells make before it (imports, functions, classes; never the course package).
3. The grader draws the exercise's cases from the secret seed, sends their inputs to the worker as
   plain data (the shared ``codec``), and gets the student's outputs back as plain data, decoded strictly.
   The worker also reports the forbidden PyTorch built-ins that were called while the function ran.
4. The outputs are compared here with the reference run on the same inputs. All or nothing per
   exercise. An exercise that fails is replaced in the worker by the course's solution of it, so that
   a later exercise that builds on it is graded on its own merit, as the notebook's self-check does.
5. The worker and every process it started are ended before the report is written.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from .. import registry
from ..codec import encode
from ..given import given_code
from ..registry import Exercise
from ..static_check import clean_source, static_problem
from . import sandbox
from .fallback import fallback_source
from .isolation import Isolation, IsolationError
from .isolation import resolve as resolve_isolation
from .limits import Deadline, missing_groups
from .report import Report, TestResult
from .submission import Extracted, SubmissionError, extract, read_notebook
from .verdicts import compare_cases

MAX_OUTPUT = 4000  # characters of report text per exercise
STARTUP = 120  # seconds the worker may take to start (importing PyTorch: 1-3 s, far more on a loaded machine)


def grade_notebook(
    path: Path,
    root: Path,
    cell_timeout: int = 60,
    timeout: int = 600,
    *,
    chapter: int | None = None,
    isolation: str | Isolation = "auto",
    seed: int | None = None,
    memory_mb: int = 4096,
) -> Report:
    """Grade one submission. Never raises: whatever goes wrong is in the report.

    isolation: a mode ("auto", "bwrap", "process"), or one already resolved (``isolation.resolve``) by a caller
    that grades many. seed: the secret seed of the hidden cases; None draws a fresh one (see ``secret_seed`` for a
    keyed one).
    """
    start = time.monotonic()
    report = Report(submission=path.name)
    # One thread, as the worker's: two spin-waiting ones beside it made chapter 1's verdicts several times slower
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        resolved = isolation if isinstance(isolation, Isolation) else resolve_isolation(isolation)
        _grade_into(report, path, root, Deadline(timeout, cell_timeout), chapter, resolved, seed, memory_mb)
    except SubmissionError as exc:
        report.problems.append(str(exc))
    except IsolationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug of the grader's own: still a report, and no points
        report.problems.append(f"internal grader error ({type(exc).__name__}: {exc}); please tell the course staff")
        report.tests = [TestResult(t.name, 0, t.max_score, t.output, "failed") for t in report.tests]
    finally:
        torch.set_num_threads(threads)
    report.seconds = time.monotonic() - start
    return report


def secret_seed(key: bytes | None, content: bytes) -> int:
    """The hidden cases' seed: keyed on the submission when the course has a key (same submission, same
    cases, every time), else drawn fresh. Either way not in the package, so not known in advance."""
    if not key:
        return secrets.randbits(40)
    return int.from_bytes(hmac.new(key, content, hashlib.sha256).digest()[:5], "big")


@dataclass
class _Grading:
    """One submission being graded: what the grading of each of its exercises reads, and adds to."""

    extracted: Extracted
    given: dict  # the pristine notebook's definitions before each exercise (given.given_code)
    worker: sandbox.Worker
    root: Path
    seed: int
    clock: Deadline
    report: Report


def _grade_into(
    report: Report,
    path: Path,
    root: Path,
    clock: Deadline,
    chapter: int | None,
    isolation: Isolation,
    seed: int | None,
    memory_mb: int,
) -> None:
    extracted = extract(read_notebook(path), path, expected_chapter=chapter)
    report.chapter = extracted.chapter
    report.problems += extracted.notes
    report.isolation = isolation.warning or f"graded in the {isolation.mode} sandbox"
    pristine = json.loads(
        (root / "notebooks" / registry.chapter_notebook(extracted.chapter)).read_text(encoding="utf-8")
    )
    worker = sandbox.Worker(isolation.mode, memory_mb=memory_mb, cpu_seconds=clock.seconds + STARTUP)
    grading = _Grading(
        extracted, given_code(pristine), worker, root, secrets.randbits(40) if seed is None else seed, clock, report
    )
    try:
        if not worker.wait_ready(min(STARTUP, max(1.0, clock.left()))):
            raise RuntimeError(
                f"the grading worker did not start ({worker.dead}): "
                f"{bytes(worker.output[-300:]).decode(errors='replace')}"
            )
        report.isolation += missing_groups(worker.cgroups, worker.tasks_frozen)
        for ex in registry.chapter_exercises(extracted.chapter):
            report.tests.append(_grade_exercise(grading, ex))
            if worker.dead and clock.left() <= 0:
                worker.dead = f"the submission ran past the total time limit of {clock.seconds} s"
    finally:
        worker.close()
    if worker.dead:
        report.problems.append(f"{worker.dead}; the exercises from that point on got no points")


def _grade_exercise(g: _Grading, ex: Exercise) -> TestResult:
    """Run the course's code before the exercise, then the student's cell and the calls on the hidden cases, and
    compare; an exercise that fails is replaced in the worker by the course's solution, for the ones after it."""
    name = f"Exercise {ex.id}: {ex.title}"

    def result(lines: list[str], passed: bool = False, state: str | None = None) -> TestResult:
        lines = list(dict.fromkeys(lines))  # a line said twice (two cases with one label) is said once
        output = "\n".join(lines)
        if len(output) > MAX_OUTPUT:
            output = output[:MAX_OUTPUT] + "\n… (cut)"
        return TestResult(
            name, ex.points if passed else 0, ex.points, output, state or ("passed" if passed else "failed")
        )

    if g.worker.dead:
        return result([f"not graded: {g.worker.dead}"])
    if g.clock.left() <= 0:
        g.worker.close()
        g.worker.dead = "the submission ran past the total time limit"
        return result(["not graded: the submission ran past the total time limit"])
    _run_course_code(g, ex)
    source = g.extracted.sources.get(ex.id)
    state: str | None  # the report's state: None for the usual one, passed or failed
    if source is None:
        lines, state, passed = ["not attempted: the exercise is missing from the submission"], "not attempted", False
    else:
        lines, state, passed, stopped = _run_submission(g, ex, source)
        if stopped:  # the worker is gone: nothing more runs, not even the course's solution
            return result(lines)
    if not passed:
        _load_solution(g, ex)
    return result(lines, passed, state)


def _run_course_code(g: _Grading, ex: Exercise) -> None:
    """The course's own definitions between the previous exercise and this one (the pristine notebook's)."""
    for source in g.given.pop(ex.id, []):
        answer = g.worker.request(
            {"op": "exec", "source": source, "label": "course code", "timeout": g.clock.cell_timeout},
            g.clock.for_cell(),
        )
        if answer is not None and "error" in answer:
            first = source.strip().split("\n")[0][:60]
            g.report.problems.append(
                f"the course's code `{first}` raised {answer['error']}; an exercise before it "
                "may define something unexpected"
            )


def _time_out(g: _Grading, timeout: float) -> str:
    """Which limit stopped a cell: the one per cell, or what was left of the submission's total."""
    if timeout < g.clock.cell_timeout:
        left = f"{g.clock.seconds:g} s ({timeout:.0f} s were left when it started)"
        return f"a time-out: the cell ran past what was left of the submission's total time limit of {left}"
    return f"a time-out: the cell ran longer than the {g.clock.cell_timeout} s limit per cell"


def _run_submission(g: _Grading, ex: Exercise, source: str) -> tuple[list[str], str | None, bool, bool]:
    """The student's cell, checked, run, then called on the hidden cases and compared with the reference.

    -> (what the report says, its state, whether the exercise passed, whether the worker stopped). Whether it
    passed is decided apart from the wording."""
    names = {e.name for e in registry.chapter_exercises(ex.chapter)}
    problem = static_problem(source, ex, names, g.given["__imports__"])
    if problem:
        return [f"refused: {problem}"], None, False, False
    lines: list[str] = []
    code, note = clean_source(source)
    if note:
        lines.append(note)
    timeout = g.clock.for_cell()
    answer = g.worker.request({"op": "exec", "source": code, "label": f"exercise {ex.id}", "timeout": timeout}, timeout)
    if answer is None:
        return [f"your cell stopped the grading: {g.worker.dead}"] + lines, None, False, True
    cell_ran = "error" not in answer
    if not cell_ran:
        lines.append(f"your cell raised {answer['error']}" if not answer.get("timeout") else _time_out(g, timeout))
    cases = ex.cases(g.seed)
    _send_given_modules(cases, g.worker, g.root, g.given["__imports__"], g.clock.for_cell())
    timeout = g.clock.for_cell()
    answer = g.worker.request(
        {
            "op": "call",
            "exercise": ex.id,
            "name": ex.name,
            "kind": ex.kind,
            "cases": [_encode_case(c) for c in cases],
            "timeout": timeout,
            "forbidden": list(ex.forbidden),
            "grad": ex.judge is not None,
        },
        timeout,
    )
    if answer is None:
        return [f"your code stopped the grading: {g.worker.dead}"] + lines, None, False, True
    case_lines, state, every_case_right = compare_cases(ex, cases, answer)
    return lines + case_lines, state, cell_ran and every_case_right, False


def _load_solution(g: _Grading, ex: Exercise) -> None:
    """The course's solution in place of a failed answer, so that a later exercise that builds on it is graded on
    its own merit (as the notebook's self-check does)."""
    answer = g.worker.request(
        {
            "op": "exec",
            "source": fallback_source(ex, g.root),
            "label": f"solution {ex.id}",
            "timeout": g.clock.cell_timeout,
        },
        g.clock.for_cell(),
    )
    if answer is not None and "error" in answer:
        g.report.problems.append(
            f"the course's solution of {ex.id} could not be loaded for the exercises after it ({answer['error']})"
        )


def _encode_case(case: registry.Case) -> dict:
    return {
        "args": _encode_input(tuple(case.args)),
        "kwargs": _encode_input(dict(case.kwargs)),
        "init": None if case.init is None else _encode_input(dict(case.init)),
        "state": None if case.state is None else _encode_input(dict(case.state)),
    }


def _encode_input(value: Any) -> Any:
    """A case input as plain data; a given module (chapter 3's decoder step) as its exercise, sizes and weights."""
    if isinstance(value, torch.nn.Module):
        # course_given: a plain attribute, (exercise, sizes), that the exercise set (ch03._given_step)
        ex_id, init = cast(tuple, value.course_given)
        return {"__given__": ex_id, "init": encode(tuple(init)), "state": encode(dict(value.state_dict()))}
    if isinstance(value, tuple) and any(isinstance(v, torch.nn.Module) for v in value):
        return {"__seq__": "tuple", "items": [_encode_input(v) for v in value]}
    return encode(value)


def _send_given_modules(
    cases: list[registry.Case], worker: sandbox.Worker, root: Path, imports: str, timeout: float
) -> None:
    """Define in the worker the classes of the modules that cases take as input (built from the course's code
    of an exercise graded before, never of this one)."""
    for ex_id in dict.fromkeys(
        cast(tuple, c.course_given)[0] for case in cases for c in case.args if isinstance(c, torch.nn.Module)
    ):
        if ex_id not in worker.given:
            ex = registry.get(ex_id)
            worker.request(
                {"op": "given", "id": ex_id, "name": ex.name, "source": imports + "\n" + fallback_source(ex, root)},
                timeout,
            )
            worker.given.add(ex_id)
