"""check(id, obj): the one-line self-check that follows every exercise in a notebook.

It runs the exercise's public cases, prints one verdict line (and a hint when it fails), and returns
the implementation the rest of the notebook should use: the student's when it passes, the reference
otherwise, so that a blank or broken exercise never blocks the cells after it.

In a notebook the check tests what the exercise cell defined *the last time it ran*, never whatever the
name happens to hold. An IPython hook (installed when ``check`` is first imported in the kernel)
records each run of a cell whose first line is ``# EXERCISE N.M``: whether it ran to the end, and the
object it bound to the exercise's name. It answers two cases that the name alone gets wrong:

- After the notebook has run once, the name is bound to whatever the earlier check returned (often the
  reference). When a student then breaks the exercise cell (a SyntaxError, an IndentationError, an error
  while it runs), the check says that the cell did not run, rather than checking the reference.
- In Restart Kernel and Run All, an exercise cell that fails to run leaves its name undefined, which
  would stop the whole run at the check cell with a NameError. Before a self-check cell runs, the hook
  binds a missing name to a placeholder, so the check reports the problem and the notebook goes on with
  the reference.

Outside IPython (plain Python, the tests) there is no cell to track: the check tests ``obj`` itself,
and still refuses to pass the reference implementation.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import registry
from ..cells import HEADER
from ..registry import Exercise
from ..static_check import notebook_definitions, static_problem
from .attempt import describe_error, evaluate, where
from .given_names import given_imports, given_sources

REFERENCE_FALLBACK = "   The cells below use the reference implementation until this check passes."

# A self-check cell: `scaled_dot_product_attention = check("5.3", scaled_dot_product_attention)`.
CHECK_CALL = re.compile(r"""\bcheck\(\s*["'](\d+\.\d+)["']\s*,\s*([A-Za-z_]\w*)\s*\)""")


# --- what ran: the exercise cells' latest runs, recorded by IPython hooks ------------------------------------


class NotRun:
    """What a self-check cell receives when the exercise cell never defined the name (it did not run, or failed)."""

    def __init__(self, exercise_id: str, name: str):
        self.exercise_id, self.name = exercise_id, name

    def __repr__(self) -> str:
        return f"<{self.name}: exercise {self.exercise_id}'s cell has not defined it; run that cell>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"`{self.name}` is not defined: exercise {self.exercise_id}'s cell has not run successfully")


@dataclass
class Run:
    """The latest run of one exercise cell."""

    execution_count: int | None
    error: BaseException | None  # why it stopped before its end, if it did
    defined: bool  # whether that run bound the exercise's name to a new object
    obj: Any = None
    refused: str | None = None  # why the grader would refuse the cell before running it (static_check.static_problem)


class Tracker:
    """Records, per exercise, the latest run of its cell; binds missing names before a self-check cell runs."""

    def __init__(self, shell: Any):
        self.shell = shell
        self.runs: dict[str, Run] = {}
        self.cells: dict[str, str] = {}  # exercise id -> the source of its cell's latest run
        self._running: tuple[str, Any, str] | None = None  # (exercise id, what its name held before, the cell)
        shell.events.register("pre_run_cell", self.pre_run_cell)
        shell.events.register("post_run_cell", self.post_run_cell)

    def unregister(self) -> None:
        self.shell.events.unregister("pre_run_cell", self.pre_run_cell)
        self.shell.events.unregister("post_run_cell", self.post_run_cell)

    @staticmethod
    def _exercise(raw_cell: str) -> Exercise | None:
        match = HEADER.match(raw_cell.lstrip("\n").split("\n", 1)[0])
        if not match:
            return None
        try:
            return registry.get(match.group(1))
        except ValueError:
            return None

    def pre_run_cell(self, info: Any) -> None:
        try:
            self._before(getattr(info, "raw_cell", "") or "")
        except Exception:  # noqa: BLE001 - never let the course's bookkeeping break a student's cell
            self._running = None

    def post_run_cell(self, result: Any) -> None:
        try:
            self._after(result)
        except Exception:  # noqa: BLE001 - as above: the bookkeeping after a cell never breaks it either
            pass
        finally:
            self._running = None

    def _before(self, raw: str) -> None:
        ns = self.shell.user_ns
        ex = self._exercise(raw)
        self._running = (ex.id, ns.get(ex.name, NotRun), raw) if ex else None
        if ex is None:
            for exercise_id, name in CHECK_CALL.findall(raw):
                if name not in ns:  # the exercise cell did not define it: let the check say so, not a NameError
                    ns[name] = NotRun(exercise_id, name)

    def _after(self, result: Any) -> None:
        if self._running is None or result is None:
            return
        exercise_id, before, raw = self._running
        ex = registry.get(exercise_id)
        error = result.error_before_exec or result.error_in_exec
        after = self.shell.user_ns.get(ex.name, NotRun)
        defined = after is not before and after is not NotRun and not isinstance(after, NotRun)
        names = {e.name for e in registry.chapter_exercises(ex.chapter)}
        self.cells[exercise_id] = raw  # the notebook's exercise cells so far: what a cell may use of theirs
        notebook = notebook_definitions([*given_sources(ex.chapter), *self.cells.values()])
        refused = static_problem(raw, ex, names, given_imports(ex.chapter, course=True), notebook)
        self.runs[exercise_id] = Run(result.execution_count, error, defined, after if defined else None, refused)


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the course
        return None
    return get_ipython()


def track(shell: Any) -> Tracker:
    """The tracker of this IPython shell, installed on first use."""
    tracker = getattr(shell, "_transformer_course_tracker", None)
    if tracker is None:
        tracker = Tracker(shell)
        shell._transformer_course_tracker = tracker
    return tracker


def _tracker() -> Tracker | None:
    shell = _shell()
    if shell is None or not hasattr(shell, "events"):
        return None
    return getattr(shell, "_transformer_course_tracker", None)


# --- the check ------------------------------------------------------------------------------------------------


_FAILURES: dict[str, int] = {}  # failed checks per exercise since its last pass: how much a hint may give away


def _refuse(ex: Exercise, reason: str) -> Any:
    print(f"❌ Exercise {ex.id} ({ex.title}): {reason}")
    print(REFERENCE_FALLBACK)
    return ex.reference


def _saved_without(exercise_id: str) -> bool:
    """Whether the notebook this kernel serves, as last saved, holds no exercise cell ``exercise_id``. Jupyter
    Server names the notebook in JPY_SESSION_NAME; without it, or unreadable, nothing is known (False)."""
    from ..cells import exercise_id as cell_exercise

    path = os.environ.get("JPY_SESSION_NAME", "")
    if not path.endswith(".ipynb"):
        return False
    try:
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(cells, list):
        return False
    for cell in cells:
        if isinstance(cell, dict) and isinstance(cell.get("source"), list):
            cell = {**cell, "source": "".join(map(str, cell["source"]))}
        if cell_exercise(cell) == exercise_id:
            return False
    return True


def _in(run: Run) -> str:
    return f" (In [{run.execution_count}])" if run.execution_count is not None else ""


def check(exercise_id: str, obj: Any) -> Any:
    """Self-check exercise ``exercise_id`` on ``obj``; print the verdict; return what later cells should use.

    In a notebook, what is checked is what the exercise cell defined when it last ran (see the module's
    docstring); ``obj`` only says which name the check cell passed.
    """
    ex = registry.get(exercise_id)
    tracker = _tracker()
    note = ""
    if tracker is not None:
        run = tracker.runs.get(ex.id)
        if run is None:
            if _saved_without(ex.id):
                return _refuse(
                    ex,
                    f"this notebook has no exercise cell for {ex.id} any more (as last saved): it was deleted, or "
                    f"its first line `# EXERCISE {ex.id} ...` was changed. Restore it (Edit > Undo Delete Cells, or "
                    "copy it from a fresh copy of the notebook), run it, then this check.",
                )
            return _refuse(
                ex,
                f"the exercise cell (the one that starts `# EXERCISE {ex.id}`) has not run in this "
                "kernel yet. Run it, then this check.",
            )
        if run.error is not None:
            return _refuse(
                ex,
                f"the exercise cell did not run to the end: its latest run{_in(run)} stopped with "
                f"{describe_error(run.error)}{where(run.error)}. Fix it, run it, then this check.",
            )
        if run.refused:
            return _refuse(
                ex,
                f"the grader would refuse this exercise cell before running it: {run.refused}. Change the cell, "
                "run it, then this check.",
            )
        if not run.defined:
            return _refuse(
                ex,
                f"the exercise cell's latest run{_in(run)} did not define `{ex.name}`. Keep the "
                "name the exercise gives, run the cell, then this check.",
            )
        if obj is not run.obj and obj is not ex.reference and not isinstance(obj, NotRun):
            note = (
                f"   (This checked the `{ex.name}` that the exercise cell defined when it last ran{_in(run)}, "
                "not the object passed to `check`.)"
            )
        obj = run.obj
    elif isinstance(obj, NotRun):
        return _refuse(ex, f"`{ex.name}` is not defined: the exercise cell has not run. Run it, then this check.")
    if obj is ex.reference:
        return _refuse(
            ex,
            f"`{ex.name}` is the course's reference implementation, not yours. The check tests the "
            f"`{ex.name}` that your exercise cell defines: run that cell, then this check.",
        )
    # Hints escalate: a first failure recalls the idea, a later one names the known mistake that the answer matches.
    earlier = _FAILURES.get(ex.id, 0)
    status, passed, total, message = evaluate(ex, obj, mistake_hint=earlier > 0)
    if status == "failed":
        _FAILURES[ex.id] = earlier + 1
        if ex.idea and "\n   Hint: " not in (message or ""):
            message = f"{message}\n   The idea: {ex.idea}"
    if status == "passed":
        _FAILURES.pop(ex.id, None)
        print(f"✅ Exercise {ex.id} ({ex.title}): passed {'its one check' if total == 1 else f'all {total} checks'}.")
        if note:
            print(note)
        return obj
    if status == "not attempted":
        print(f"⏳ Exercise {ex.id} ({ex.title}): not attempted yet. The cells below use the reference implementation.")
    else:
        print(f"❌ Exercise {ex.id} ({ex.title}): passed {passed} of {total} checks; {message}")
        print(REFERENCE_FALLBACK)
    if note:
        print(note)
    return ex.reference


# In a kernel, start recording when the notebook imports `check` (its first code cell), before any exercise runs.
if (_current := _shell()) is not None and hasattr(_current, "events"):
    track(_current)
