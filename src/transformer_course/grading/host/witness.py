"""The witness: a second run of each exercise whose PyTorch built-ins are forbidden, in a fresh worker.

Why: the watch that sees a forbidden built-in called (``inside/worker.py``) lives in the process that runs the
student's code. The closed world (``closed_world.py``) keeps every cell from reaching it; the witness is the line
behind that one, for a route round the closed world that nobody has found yet. In the first run, a cell that reached
the watch could switch it off for the exercises after it. The witness never runs that cell: it starts a fresh worker
and, for each exercise in turn, runs

- the course's code before it (the given cells' definitions) and the course's code of the exercises before it;
- the student's *inert definitions* from their other exercise cells: functions and classes whose definition runs
  none of the student's code (no decorator but the ordinary ones, constant defaults, plain annotations, class bodies
  of methods and constants), so that a helper the exercise uses is there, while no statement of those cells runs;
- for an exercise it witnesses: the student's cell, whole, under the watch from its first line, then the same calls
  on the same hidden cases as the first run, under the watch.

What the witness saw is added to the first run's verdict: an exercise that called a forbidden built-in in either run
gets no points. The witness never takes points for anything else (its values are not compared: a cell may depend
on its other cells' state, honestly), so an honest submission loses nothing to it. It runs only for exercises that
passed the first run and forbid built-ins, in one worker per submission: started beside the first where the student
changed such an exercise's cell, else once one of them has passed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .. import registry
from ..given import is_definition
from ..registry import Exercise
from ..static_check import clean_source
from . import sandbox
from .cases import call_command, send_given_modules
from .fallback import fallback_source
from .limits import Deadline

__all__ = ["inert_definitions", "witness"]

_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "torch.no_grad()", "torch.no_grad"})


def _plain(node: ast.expr | None) -> bool:
    """An expression that runs nothing when evaluated: names, attributes, constants, subscripts, tuples, ``X | Y``."""
    if node is None:
        return True
    allowed = (ast.Name, ast.Attribute, ast.Constant, ast.Subscript, ast.Tuple, ast.List, ast.BinOp, ast.BitOr,
               ast.Load, ast.Slice)  # fmt: skip
    return all(isinstance(n, allowed) for n in ast.walk(node))


def _inert_function(node: ast.FunctionDef) -> bool:
    decorators = all(
        ast.unparse(d) in _DECORATORS or (isinstance(d, ast.Attribute) and d.attr in ("setter", "getter", "deleter"))
        for d in node.decorator_list
    )
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    annotations = all(_plain(a.annotation) for a in every if a is not None) and _plain(node.returns)
    defaults = all(isinstance(d, ast.Constant) for d in [*args.defaults, *args.kw_defaults] if d is not None)
    return decorators and annotations and defaults


def _inert(node: ast.stmt) -> bool:
    """Whether defining node runs none of the student's code."""
    if isinstance(node, ast.FunctionDef):
        return _inert_function(node)
    if isinstance(node, ast.ClassDef):
        if (
            node.keywords
            or node.decorator_list
            or not all(isinstance(b, (ast.Name, ast.Attribute)) for b in node.bases)
        ):
            return False
        return all(
            _inert_function(item)
            if isinstance(item, ast.FunctionDef)
            else (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant))
            or (isinstance(item, (ast.Assign, ast.AnnAssign)) and is_definition(item) and _plain(item_annotation(item)))
            for item in node.body
        )
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
        return is_definition(node) and _plain(item_annotation(node))
    return False


def item_annotation(node: ast.stmt) -> ast.expr | None:
    return node.annotation if isinstance(node, ast.AnnAssign) else None


def inert_definitions(source: str | None, skip: set[str]) -> str:
    """The definitions of a cell that run none of its code (see the module's docstring), less those of the names in
    skip (the chapter's exercises, whose course code stands in for the student's)."""
    if source is None:
        return ""
    try:
        tree = ast.parse(clean_source(source)[0])
    except SyntaxError:
        return ""
    kept = [n for n in tree.body if _inert(n) and getattr(n, "name", None) not in skip]
    return "\n".join(ast.unparse(n) for n in kept)


def witness(
    chapter: int,
    targets: list[Exercise],
    sources: dict[str, str],
    given: dict,
    context: tuple[Path, int, Deadline, sandbox.Worker],
) -> tuple[dict[str, list[str]], str | None]:
    """({exercise id: the forbidden built-ins the witness saw its cell call}, why it could not finish, or None).

    given: a fresh ``given.given_code`` of the pristine notebook; context: (the course's root, the hidden cases'
    seed, the submission's clock, a fresh worker, started as the first run's was and closed here)."""
    root, seed, clock, worker = context
    imports = given["__imports__"]
    exercises = registry.chapter_exercises(chapter)
    names = {e.name for e in exercises}
    seen: dict[str, list[str]] = {}
    try:
        if not worker.wait_ready(min(sandbox.STARTUP, max(1.0, clock.left()))):
            return seen, f"its worker did not start ({worker.dead})"
        for ex in exercises:
            for source in given.get(ex.id, []):
                _exec(worker, source, "course code", clock, None)
            if ex in targets:
                saw = _watched(worker, ex, sources[ex.id], (root, seed, imports, clock))
                if saw:
                    seen[ex.id] = saw
            _exec(worker, fallback_source(ex, root), f"solution {ex.id}", clock, None)
            _exec(worker, inert_definitions(sources.get(ex.id), names), "definitions", clock, None)
            if worker.dead:
                return seen, f"its worker stopped ({worker.dead})"
            if clock.left() <= 0:
                return seen, "the submission's total time limit ran out"
    finally:
        worker.close()
    return seen, None


def _exec(worker: sandbox.Worker, source: str, label: str, clock: Deadline, forbidden: tuple | None) -> dict | None:
    if not source.strip() or worker.dead:
        return None
    command = {"op": "exec", "source": source, "label": label, "timeout": clock.cell_timeout}
    return worker.request({**command, **({"forbidden": list(forbidden)} if forbidden else {})}, clock.for_cell())


def _watched(worker: sandbox.Worker, ex: Exercise, source: str, context: tuple) -> list[str]:
    """The forbidden built-ins that the exercise's cell calls, run and then called on the cases, under the watch."""
    root, seed, imports, clock = context
    answer = _exec(worker, clean_source(source)[0], f"exercise {ex.id}", clock, ex.forbidden)
    saw = list((answer or {}).get("forbidden", []))
    cases = ex.cases(seed)
    send_given_modules(cases, worker, root, imports, clock.for_cell())
    timeout = clock.for_cell()
    answer = worker.request(call_command(ex, cases, timeout), timeout)
    return list(dict.fromkeys(saw + list((answer or {}).get("forbidden", []))))
