"""The ``run`` check of ``given_leaks``: a given function (or class) whose signature fits an exercise's is called on
the exercise's public cases (``registry.PUBLIC_SEED``), in a namespace made of the chapter's given definitions and
imports, the course package's among them, with the exercises bound to their references (what the cells after an
exercise see); if it passes every case, it is an answer. A given function that uses the exercise's own name, a
wrapper of the student's function, is not tried on it. Given code runs here, in the caller's process: only its
definitions (functions, classes, constants, imports), never a cell's other statements, and each call at most
CALL_SECONDS.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import signal
import sys
import warnings
from collections.abc import Iterator

import torch

from ..grading import registry
from ..grading.comparison import compare
from ..grading.given import is_definition
from .given_leaks import Leak, given_cells

__all__ = ["CALL_SECONDS", "run_leaks"]

CALL_SECONDS = 20  # a given function that runs longer on one case is no answer (and may be training something)


class _TooLong(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """Stop the call after `seconds` (SIGALRM, in the main thread of a Unix process; elsewhere, no limit)."""
    usable = hasattr(signal, "SIGALRM") and sys.platform != "win32"
    try:
        previous = signal.signal(signal.SIGALRM, _raise_too_long) if usable else None
    except ValueError:  # not the main thread
        usable, previous = False, None
    if usable:
        signal.alarm(seconds)
    try:
        yield
    finally:
        if usable:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


def _raise_too_long(signum, frame):
    raise _TooLong


def _namespace(
    chapter: int, notebooks: dict[str, tuple[dict, dict]]
) -> tuple[dict, dict[str, tuple[str, str, ast.stmt]]]:
    """The chapter's given definitions (every notebook's, in order) run in one namespace with the chapter's imports,
    the course package's among them, and the exercises bound to their references; and, per given function or class,
    (notebook, cell id, its syntax)."""
    ns: dict = {"__name__": f"given_chapter_{chapter}"}
    where: dict[str, tuple[str, str, ast.stmt]] = {}
    for notebook, (_, student) in notebooks.items():
        for cell, tree in given_cells(student):
            for node in tree.body:
                is_import = isinstance(node, (ast.Import, ast.ImportFrom))
                if not (is_definition(node) or is_import) or isinstance(node, ast.Expr):
                    continue  # (the Expr: torch.set_default_dtype, which the caller restores; cases are float64)
                with contextlib.suppress(Exception):
                    exec(compile(ast.Module(body=[node], type_ignores=[]), f"<{notebook}: {cell}>", "exec"), ns)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    where[node.name] = (notebook, cell, node)
    for ex in registry.chapter_exercises(chapter):  # the student's functions, as the cells after an exercise see them
        ns[ex.name] = ex.reference
    return ns, where


def _uses(name: str, where: dict[str, tuple[str, str, ast.stmt]]) -> set[str]:
    """The names a given function or class reads, and those that the given definitions it reads read, and so on."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in where:
            todo += [n.id for n in ast.walk(where[current][2]) if isinstance(n, ast.Name)]
    return seen


def _fits(ex: registry.Exercise, obj, case: registry.Case) -> bool:
    """Whether obj can be called as the exercise's answer on this case: a function that takes the case's arguments
    and needs as many as the reference, or an nn.Module class that takes its configuration and inputs."""
    try:
        if ex.kind == "module":
            if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
                return False
            inspect.signature(obj).bind(**(case.init or {}))
            inspect.signature(obj.forward).bind(None, *case.args, **case.kwargs)
            return True
        if not inspect.isfunction(obj):
            return False
        signature = inspect.signature(obj)
        signature.bind(*case.args, **case.kwargs)
    except (TypeError, ValueError):
        return False
    return _required(signature) == _required(inspect.signature(ex.reference))


def _required(signature: inspect.Signature) -> int:
    return sum(
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in signature.parameters.values()
    )


def _passes(ex: registry.Exercise, obj, cases: list[registry.Case]) -> bool:
    for case in cases:
        try:
            with _time_limit(CALL_SECONDS), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                actual = registry.run_case(ex, obj, case)
                if ex.judge is not None:
                    if ex.judge(case, actual) is not None:
                        return False
                elif compare(registry.run_case(ex, ex.reference, case), actual, ex.atol, ex.rtol) is not None:
                    return False
        except (Exception, _TooLong):  # noqa: BLE001 - a function that fails on a case is no answer
            return False
    return True


def run_leaks(chapter: int, notebooks: dict[str, tuple[dict, dict]]) -> list[Leak]:
    """The given functions and classes of the chapter's notebooks that pass every public case of one of its exercises
    (module docstring). A given function that uses the exercise's own name (a wrapper of it) is not tried on it."""
    previous_dtype = torch.get_default_dtype()
    previous_seed = torch.random.get_rng_state()
    found = []
    try:
        ns, where = _namespace(chapter, notebooks)
        for ex in registry.chapter_exercises(chapter):
            cases = ex.cases(registry.PUBLIC_SEED)
            for name, (notebook, cell, _) in where.items():
                obj = ns.get(name)
                if obj is None or obj is ex.reference or not all(_fits(ex, obj, c) for c in cases):
                    continue
                if ex.name in _uses(name, where) - {name}:  # a wrapper of the exercise (or a subclass of it)
                    continue
                if _passes(ex, obj, cases):
                    detail = f"passes the {len(cases)} public case{'s' * (len(cases) != 1)} of {ex.name}"
                    found.append(Leak(chapter, notebook, cell, name, ex.id, "run", detail))
    finally:
        torch.set_default_dtype(previous_dtype)
        torch.random.set_rng_state(previous_seed)
    return found
