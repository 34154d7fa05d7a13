"""The grader: one submitted notebook in, a score per exercise out.

The trust boundary is a process boundary. The grader's own process holds the exercise registry, the
reference implementations and a secret seed drawn per run; the student's code runs in a separate,
sandboxed worker (``sandbox.py``, ``worker.py``) that has none of them on its file system.

1. Read the submission; anything that is not a readable notebook gets a report that says so.
2. Take only its exercise cells. Each is checked statically (``submission.static_problem``, on the
   syntax tree), then sent to the worker after the definitions that the pristine student notebook's
   given cells make before it (imports, functions, classes; never the course package).
3. The grader draws the exercise's cases from the secret seed, sends their inputs to the worker as
   plain data (``codec.py``), and gets the student's outputs back as plain data, decoded strictly.
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
from pathlib import Path
from typing import Any

import torch

from . import registry, sandbox
from .codec import encode
from .given import fallback_source, given_code
from .isolation import IsolationError
from .isolation import resolve as resolve_isolation
from .registry import Exercise
from .report import Report, TestResult
from .submission import Extracted, SubmissionError, clean_source, extract, read_notebook, static_problem
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
    isolation: str = "auto",
    seed: int | None = None,
    memory_mb: int = 4096,
) -> Report:
    """Grade one submission. Never raises: whatever goes wrong is in the report.

    seed: the secret seed of the hidden cases; None draws a fresh one (see ``secret_seed`` for a keyed one).
    """
    start = time.monotonic()
    report = Report(submission=path.name)
    try:
        _grade_into(report, path, root, cell_timeout, timeout, chapter, isolation, seed, memory_mb)
    except SubmissionError as exc:
        report.problems.append(str(exc))
    except IsolationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug of the grader's own: still a report, and no points
        report.problems.append(f"internal grader error ({type(exc).__name__}: {exc}); please tell the course staff")
        report.tests = [TestResult(t.name, 0, t.max_score, t.output, "failed") for t in report.tests]
    report.seconds = time.monotonic() - start
    return report


def secret_seed(key: bytes | None, content: bytes) -> int:
    """The hidden cases' seed: keyed on the submission when the course has a key (same submission, same
    cases, every time), else drawn fresh. Either way not in the package, so not known in advance."""
    if not key:
        return secrets.randbits(40)
    return int.from_bytes(hmac.new(key, content, hashlib.sha256).digest()[:5], "big")


def _grade_into(
    report: Report,
    path: Path,
    root: Path,
    cell_timeout: int,
    timeout: int,
    chapter: int | None,
    isolation: str,
    seed: int | None,
    memory_mb: int,
) -> None:
    deadline = time.monotonic() + timeout
    data = read_notebook(path)
    extracted = extract(data, path, expected_chapter=chapter)
    report.chapter = extracted.chapter
    report.problems += extracted.notes
    mode, warning = resolve_isolation(isolation)
    report.isolation = warning or f"graded in the {mode} sandbox"
    seed = secrets.randbits(40) if seed is None else seed
    pristine = json.loads(
        (root / "notebooks" / registry.chapter_notebook(extracted.chapter)).read_text(encoding="utf-8")
    )
    given = given_code(pristine)
    exercises = registry.chapter_exercises(extracted.chapter)
    worker = sandbox.Worker(mode, memory_mb=memory_mb, cpu_seconds=timeout + STARTUP)
    try:
        if not worker.wait_ready(min(STARTUP, max(1.0, deadline - time.monotonic()))):
            raise RuntimeError(
                f"the grading worker did not start ({worker.dead}): "
                f"{bytes(worker.output[-300:]).decode(errors='replace')}"
            )
        for ex in exercises:
            report.tests.append(
                _grade_exercise(ex, extracted, given, worker, root, seed, cell_timeout, deadline, report)
            )
            if worker.dead and time.monotonic() >= deadline:
                worker.dead = f"the submission ran past the total time limit of {timeout} s"
    finally:
        worker.close()
    if worker.dead:
        report.problems.append(f"{worker.dead}; the exercises from that point on got no points")


def _grade_exercise(
    ex: Exercise,
    extracted: Extracted,
    given: dict,
    worker: sandbox.Worker,
    root: Path,
    seed: int,
    cell_timeout: int,
    deadline: float,
    report: Report,
) -> TestResult:
    name = f"Exercise {ex.id}: {ex.title}"

    def result(lines: list[str], passed: bool = False, state: str | None = None) -> TestResult:
        lines = list(dict.fromkeys(lines))  # a line said twice (two cases with one label) is said once
        output = "\n".join(lines)
        if len(output) > MAX_OUTPUT:
            output = output[:MAX_OUTPUT] + "\n… (cut)"
        return TestResult(
            name, ex.points if passed else 0, ex.points, output, state or ("passed" if passed else "failed")
        )

    def left() -> float:
        return deadline - time.monotonic()

    if worker.dead:
        return result([f"not graded: {worker.dead}"])
    if left() <= 0:
        worker.close()
        worker.dead = "the submission ran past the total time limit"
        return result(["not graded: the submission ran past the total time limit"])
    for source in given.pop(ex.id, []):  # the course's own definitions before this exercise
        answer = worker.request(
            {"op": "exec", "source": source, "label": "course code", "timeout": cell_timeout}, min(cell_timeout, left())
        )
        if answer is not None and "error" in answer:
            first = source.strip().split("\n")[0][:60]
            report.problems.append(
                f"the course's code `{first}` raised {answer['error']}; an exercise before it "
                "may define something unexpected"
            )
    source = extracted.sources.get(ex.id)
    lines: list[str] = []  # what the report says; whether the exercise passed is decided apart from the wording
    state = None
    passed = False
    if source is None:
        lines, state = ["not attempted: the exercise is missing from the submission"], "not attempted"
    else:
        problem = static_problem(source, ex, {e.name for e in registry.chapter_exercises(ex.chapter)})
        if problem:
            lines = [f"refused: {problem}"]
        else:
            code, note = clean_source(source)
            if note:
                lines.append(note)
            answer = worker.request(
                {
                    "op": "exec",
                    "source": code,
                    "label": f"exercise {ex.id}",
                    "timeout": min(cell_timeout, max(1, left())),
                },
                min(cell_timeout, max(1, left())),
            )
            if answer is None:
                return result([f"your cell stopped the grading: {worker.dead}"] + lines)
            cell_ran = "error" not in answer
            if not cell_ran:
                lines.append(
                    f"your cell raised {answer['error']}"
                    if not answer.get("timeout")
                    else f"a time-out: the cell ran longer than the {cell_timeout} s limit per cell"
                )
            cases = ex.cases(seed)
            _send_given_modules(cases, worker, root, given["__imports__"], min(cell_timeout, max(1, left())))
            call_timeout = min(cell_timeout, max(1, left()))
            answer = worker.request(
                {
                    "op": "call",
                    "exercise": ex.id,
                    "name": ex.name,
                    "kind": ex.kind,
                    "cases": [_encode_case(c) for c in cases],
                    "timeout": call_timeout,
                    "forbidden": list(ex.forbidden),
                    "grad": ex.judge is not None,
                },
                call_timeout,
            )
            if answer is None:
                return result([f"your code stopped the grading: {worker.dead}"] + lines)
            case_lines, state, every_case_right = compare_cases(ex, cases, answer)
            lines += case_lines
            passed = cell_ran and every_case_right
    if not passed:
        fallback = fallback_source(ex, root)
        answer = worker.request(
            {"op": "exec", "source": fallback, "label": f"solution {ex.id}", "timeout": cell_timeout},
            min(cell_timeout, max(1, left())),
        )
        if answer is not None and "error" in answer:
            report.problems.append(
                f"the course's solution of {ex.id} could not be loaded for the exercises after it ({answer['error']})"
            )
    return result(lines, passed, state)


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
        ex_id, init = value.course_given
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
        c.course_given[0] for case in cases for c in case.args if isinstance(c, torch.nn.Module)
    ):
        if ex_id not in worker.given:
            ex = registry.get(ex_id)
            worker.request(
                {"op": "given", "id": ex_id, "name": ex.name, "source": imports + "\n" + fallback_source(ex, root)},
                timeout,
            )
            worker.given.add(ex_id)


def submissions_in(path: Path, exclude: Path | None = None) -> list[Path]:
    """The files of a folder to consider (hidden ones, checkpoints and the folder ``exclude`` left out), or [path]."""
    if not path.is_dir():
        return [path]
    skip = exclude.resolve() if exclude is not None else None
    found = []
    for p in sorted(path.rglob("*")):
        if not p.is_file() or p.is_symlink() or ".ipynb_checkpoints" in p.parts:
            continue
        if any(part.startswith(".") for part in p.relative_to(path).parts):
            continue
        if skip is not None and (p.resolve() == skip or skip in p.resolve().parents):
            continue
        found.append(p)
    return found
