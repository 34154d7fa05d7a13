"""The definitions that the pristine student notebook's given cells make (imports, functions, classes, constants),
read from the notebook as syntax, never run here. Shared: the grader sends them to the sandboxed worker before each
exercise (``host/grader.py``), and the self-check reads the chapter's imports from them (``kernel/selfcheck.py``), so
that both judge a cell against the names the notebook gives it.
"""

from __future__ import annotations

import ast

from .cells import exercise_id
from .static_check import clean_source

__all__ = ["SKIPPED_IMPORTS", "definitions", "given_code", "is_definition"]

# Imports a given cell may make that are never sent to the worker: the course package (which holds the
# references) and display libraries.
SKIPPED_IMPORTS = {"transformer_course", "matplotlib", "IPython", "ipywidgets", "tqdm"}


def given_code(pristine: dict) -> dict:
    """Under "__imports__", the given cells' imports (under "__course_imports__", those of the course package, which
    are never sent); per exercise id, the definitions that the given cells before it make: imports (never of the course
    package), functions, classes, constants, and the default dtype. Nothing else of a given cell runs."""
    out: dict[str, list[str]] = {}
    pending: list[str] = []
    imports: list[str] = []
    course: list[str] = []
    for cell in pristine.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        ex_id = exercise_id({**cell, "source": text})
        if ex_id is not None:
            out[ex_id] = pending
            pending = []
            continue
        try:
            tree = ast.parse(clean_source(text)[0])
        except SyntaxError:
            continue
        kept = [ast.unparse(node) for node in tree.body if is_definition(node)]
        course += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and _of_course(n)]
        imports += [
            ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and is_definition(n)
        ]
        if kept:
            pending.append("\n".join(kept))
    out["__imports__"] = "\n".join(imports)  # type: ignore[assignment]
    out["__course_imports__"] = "\n".join(course)  # type: ignore[assignment]
    return out


def definitions(given: dict) -> list[str]:
    """Every piece of source in a ``given_code`` result, its imports first: what a graded cell may use as the
    notebook's (``static_check.notebook_definitions`` reads them)."""
    return [given["__imports__"], *(s for key, sources in given.items() if not key.startswith("__") for s in sources)]


def _of_course(node: ast.Import | ast.ImportFrom) -> bool:
    """An import of the course package: never sent to the worker, but the names it binds are the package's, which a
    graded cell may not use (``static_check`` reads them with the chapter's imports)."""
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(m.split(".")[0] == "transformer_course" for m in modules)


def is_definition(node: ast.stmt) -> bool:
    """Whether a top-level statement defines something the worker may receive: a function, a class, an import (not of
    SKIPPED_IMPORTS), a constant, or the default dtype. Also what ``host/fallback.py`` keeps of the package's imports."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] not in SKIPPED_IMPORTS for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] not in SKIPPED_IMPORTS
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t for target in targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        if not all(isinstance(t, ast.Name) for t in names):
            return False
        try:
            ast.literal_eval(node.value)
            return True
        except (ValueError, SyntaxError, TypeError):
            return False
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return ast.unparse(node.value.func) == "torch.set_default_dtype"
    return False
