"""Why an exercise cell is refused before it runs, read on its syntax tree: the exercise's forbidden built-ins, then
the closed world (``closed_world.py``). Shared: the grader runs it on every submitted cell before the sandbox sees
it (``host/grader.py``), and the self-check runs the same rules in the student's kernel (``kernel/selfcheck.py``), so
that a student learns of a refusal before submitting. It runs nothing of the cell, and neither side's state is in it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from . import registry
from .closed_world import closed_world_problem, defined, forbidden_family, module_aliases

__all__ = ["DEFAULT_IMPORTS", "PYTHON_CELL_MAGICS", "clean_source", "notebook_definitions", "static_problem"]

_ALLOWED_WORDS = "torch and its numerical parts, math, random, collections, itertools, functools and the like"
_WHERE = "the exercises page lists them"

# Cell magics whose body is plain Python and that change nothing it computes: the body is graded as it is.
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")


def _python_cell_magic(source: str) -> bool:
    first = source.lstrip().split("\n", 1)[0]
    return first.startswith("%%") and first[2:].split(" ", 1)[0].strip() in PYTHON_CELL_MAGICS


def clean_source(source: str) -> tuple[str, str | None]:
    """The cell as plain Python: IPython magics and shell lines become ``pass`` (they are not run during
    grading), so that the code the static check reads is the code that runs. Returns (code, note)."""
    lines, dropped = [], 0
    for line in source.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            lines.append(line[: len(line) - len(stripped)] + "pass")
            dropped += 1
        else:
            lines.append(line)
    note = f"note: {dropped} IPython magic or shell line(s) were not run during grading" if dropped else None
    return "\n".join(lines), note


def _own_names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """What the cell defines itself: (names, attributes, imported names).

    names: functions, classes, variables and arguments; attributes: methods of its classes and
    attributes it assigns (``self.x = ...``); imported: names its imports bind.
    """
    names, attributes, imported = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                attributes |= {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attributes.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names, attributes, imported


_MODULE_NAMES = {"torch", "nn", "F", "functional", "math", "np", "numpy"}  # the notebooks' own imports


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# The modules the chapters' notebooks import, for a caller that does not pass the chapter's own imports.
DEFAULT_IMPORTS = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F"


def notebook_definitions(sources: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(names, attributes) that pieces of a notebook define (its given code, its exercise cells), which a graded
    cell may use as its own (``closed_world``). A piece that does not parse defines nothing."""
    names: set[str] = set()
    attributes: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(clean_source(source)[0])
        except SyntaxError:
            continue
        n, a = defined(tree)
        names |= n
        attributes |= a
    return frozenset(names), frozenset(attributes)


def static_problem(
    source: str,
    exercise: registry.Exercise,
    exercise_names: set[str] | frozenset[str] = frozenset(),
    given_imports: str = DEFAULT_IMPORTS,
    notebook: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
) -> str | None:
    """Why an exercise cell is refused before it runs, or None.

    It reads the syntax tree, never the text, so comments and strings cost nothing, and a method or
    variable the cell defines itself is not the built-in of the same name. Two checks: the exercise's
    forbidden built-ins, with their family where a module reaches them (``torch._x_math`` of ``x``), then
    the closed world (``closed_world.py``): nothing that could reach the watch on PyTorch's calls, the
    answer channel, another thread or process, or a module outside the allowed ones. given_imports: the
    imports of the chapter's notebook, whose names the cell sees (its modules are followed too). notebook: the
    names and attributes the rest of the notebook defines (``notebook_definitions``).
    """
    code, _ = clean_source(source)
    if code.lstrip().startswith("pass") and source.lstrip().startswith("%%") and not _python_cell_magic(source):
        return "the cell is a cell magic (%%...) whose body is not Python, which grading does not run"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None  # it will fail when it runs, and the report will show Python's own message
    own, own_attributes, imported = _own_names(tree)
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        if any(m.split(".")[0] == "transformer_course" for m in modules):
            return (
                "the cell imports the course's reference package (`transformer_course`), which grading does not allow"
            )
        used = []  # (name, how)
        family = []  # names reached through a module, whose whole family is forbidden
        if isinstance(node, ast.Attribute):
            # `self.attend(...)` of the cell's own method is not PyTorch's; `F.x`, `torch.x` always are
            base = _base_name(node)
            if node.attr not in own_attributes or base in _MODULE_NAMES | imported or base is None:
                used.append(node.attr)
            if base in _MODULE_NAMES | imported:
                family.append(node.attr)
        elif (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in (own - imported) | exercise_names
        ):
            used.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                used += alias.name.split(".")
            if isinstance(node, ast.ImportFrom) and node.module:
                used += node.module.split(".")
            family += used
        for name in family:
            found = forbidden_family(name, exercise.forbidden)
            if found:
                what = f"`{name}`" + (f" (of `{found}`)" if found != name else "")
                return f"the cell uses PyTorch's {what}, which this exercise asks you to build yourself"
        for name in used:
            if name in exercise.forbidden:
                return f"the cell uses PyTorch's `{name}`, which this exercise asks you to build yourself"
    names, attributes = notebook
    reached = closed_world_problem(tree, module_aliases(given_imports), names | set(exercise_names), attributes)
    if reached:
        return f"{reached}, which is outside what graded cells may use ({_ALLOWED_WORDS}: {_WHERE})"
    return None
