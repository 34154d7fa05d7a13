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

import torch

from .. import registry
from ..cells import exercise_id
from ..given import definitions, given_code
from ..registry import Exercise
from ..static_check import clean_source, notebook_definitions, static_problem
from . import sandbox
from .cases import call_command, send_given_modules
from .fallback import fallback_source
from .isolation import Isolation, IsolationError
from .isolation import resolve as resolve_isolation
from .limits import Deadline, missing_groups
from .report import Report, TestResult
from .submission import Extracted, SubmissionError, extract, read_notebook
from .verdicts import compare_cases
from .witness import witness

MAX_OUTPUT = 4000  # characters of report text per exercise
STARTUP = sandbox.STARTUP


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
    notebook: tuple[frozenset[str], frozenset[str]]  # names and attributes the given code and the cells define
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

    def start() -> sandbox.Worker:
        return sandbox.Worker(isolation.mode, memory_mb=memory_mb, cpu_seconds=clock.seconds + STARTUP)

    worker = start()
    # The witness's worker (witness.py) starts beside the first run's where the student changed the cell of an
    # exercise that forbids built-ins (its start then costs no time of its own), else once such an exercise passed;
    # a blank submission costs no second worker.
    texts = ({**c, "source": "".join(c.get("source", ""))} for c in pristine["cells"])
    starters = {exercise_id(c): c["source"] for c in texts if exercise_id(c)}
    attempted = [e.id for e in registry.chapter_exercises(extracted.chapter) if e.forbidden]
    attempted = [i for i in attempted if extracted.sources.get(i, starters.get(i)) != starters.get(i)]
    second: sandbox.Worker | None = start() if attempted else None
    given = given_code(pristine)
    notebook = notebook_definitions(definitions(given) + list(extracted.sources.values()))
    seed = secrets.randbits(40) if seed is None else seed
    grading = _Grading(extracted, given, notebook, worker, root, seed, clock, report)
    try:
        if not worker.wait_ready(min(STARTUP, max(1.0, clock.left()))):
            raise RuntimeError(
                f"the grading worker did not start ({worker.dead}): "
                f"{bytes(worker.output[-300:]).decode(errors='replace')}"
            )
        report.isolation += missing_groups(worker.cgroups, worker.tasks_frozen)
        for ex in registry.chapter_exercises(extracted.chapter):
            report.tests.append(_grade_exercise(grading, ex))
            if second is None and ex.forbidden and report.tests[-1].score == ex.points > 0:
                second = start()
            if worker.dead and clock.left() <= 0:
                worker.dead = f"the submission ran past the total time limit of {clock.seconds} s"
        worker.close()
        if worker.dead:
            report.problems.append(f"{worker.dead}; the exercises from that point on got no points")
        elif second is not None:
            _witness(grading, given_code(pristine), second)
    finally:
        worker.close()
        if second is not None:
            second.close()


def _witness(g: _Grading, given: dict, second: sandbox.Worker) -> None:
    """The second run, in a fresh worker, of the exercises that passed and forbid built-ins (``witness.py``): one
    whose cell it saw call a forbidden built-in gets no points, as in the first run."""
    exercises = registry.chapter_exercises(g.extracted.chapter)
    passed = [ex for ex, t in zip(exercises, g.report.tests) if ex.forbidden and t.score == t.max_score > 0]
    if not passed:
        return
    sources = g.extracted.sources
    seen, stopped = witness(g.extracted.chapter, passed, sources, given, (g.root, g.seed, g.clock, second))
    for i, (ex, t) in enumerate(zip(exercises, g.report.tests)):
        if ex.id in seen:
            called = ", ".join(f"`{name}`" for name in seen[ex.id])
            line = f"a second run of your cell alone, watched from its first line, called PyTorch's {called}, "
            line += "which this exercise asks you to build yourself"
            g.report.tests[i] = TestResult(t.name, 0, t.max_score, f"{t.output}\n{line}".strip(), "failed")
    if stopped:
        g.report.problems.append(f"the second run that checks forbidden built-ins did not finish: {stopped}")


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
    imports = g.given["__imports__"] + "\n" + g.given["__course_imports__"]
    problem = static_problem(source, ex, names, imports, g.notebook)
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
    send_given_modules(cases, g.worker, g.root, g.given["__imports__"], g.clock.for_cell())
    timeout = g.clock.for_cell()
    answer = g.worker.request(call_command(ex, cases, timeout), timeout)
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
