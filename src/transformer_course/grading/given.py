"""What the worker gets besides the submission's exercise cells: the definitions that the pristine student
notebook's given cells make (imports, functions, classes, constants), and the course's code of an exercise,
which replaces a failed answer for the exercises after it.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

from . import registry
from .cells import exercise_id
from .registry import Exercise
from .submission import clean_source

__all__ = ["fallback_source", "given_code"]

# Imports a given cell may make that are never sent to the worker: the course package (which holds the
# references) and display libraries.
SKIPPED_IMPORTS = {"transformer_course", "matplotlib", "IPython", "ipywidgets", "tqdm"}


def given_code(pristine: dict) -> dict:
    """Under "__imports__", the given cells' imports; per exercise id, the definitions that the given cells before it make: imports (never of the course
    package), functions, classes, constants, and the default dtype. Nothing else of a given cell runs."""
    out: dict[str, list[str]] = {}
    pending: list[str] = []
    imports: list[str] = []
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
        kept = [ast.unparse(node) for node in tree.body if _is_definition(node)]
        imports += [
            ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and _is_definition(n)
        ]
        if kept:
            pending.append("\n".join(kept))
    out["__imports__"] = "\n".join(imports)  # type: ignore[assignment]
    return out


def _is_definition(node: ast.stmt) -> bool:
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


def fallback_source(ex: Exercise, root: Path) -> str:
    """The course's code of one exercise, which replaces a failed answer for the exercises after it.

    From the solution notebook where the course folder has one (an instructor's copy); else (a student's
    repository) the reference implementation's own source, which students have in the package anyway.
    """
    solution = root / "solutions" / registry.chapter_notebook(ex.chapter)
    if solution.exists():
        for cell in json.loads(solution.read_text(encoding="utf-8"))["cells"]:
            text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            if exercise_id({**cell, "source": text}) == ex.id:
                return clean_source(text)[0]
    module = inspect.getmodule(ex.reference)
    assert module is not None  # the course's own code: defined in one of its modules
    tree = ast.parse(inspect.getsource(module))
    imports = [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and _is_definition(n)
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    ]
    return "\n".join(imports + _with_helpers(ex, module, tree)) + f"\n{ex.name} = {ex.reference.__name__}\n"


def _with_helpers(ex: Exercise, module, tree: ast.Module) -> list[str]:
    """The reference's source and, before it, the course helpers it uses, from its module or imported into it
    (never another exercise's reference: the worker binds the earlier ones by name, and the later ones
    must not be there)."""
    references = {id(e.reference) for e in registry.chapter_exercises(ex.chapter)}
    tops: dict[str, dict] = {}

    def top_of(mod) -> dict:
        if mod.__name__ not in tops:
            table: dict[str, ast.stmt] = {}
            for node in ast.parse(inspect.getsource(mod)).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    table[node.name] = node
                elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                    table.update({t.id: node for t in node.targets})  # type: ignore[attr-defined]  # checked: Names
            tops[mod.__name__] = table
        return tops[mod.__name__]

    chosen: list[ast.stmt] = []

    def visit(node: ast.stmt, mod) -> None:
        for name in sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}):
            value = getattr(mod, name, None)
            if id(value) in references:
                continue
            helper, home = top_of(mod).get(name), mod
            if helper is None and (inspect.isfunction(value) or inspect.isclass(value)):
                home = inspect.getmodule(value)
                if home is None or not home.__name__.startswith("transformer_course"):
                    continue
                helper = top_of(home).get(value.__name__)
            if helper is None or helper in chosen or helper is node:
                continue
            visit(helper, home)
            if helper not in chosen:
                chosen.append(helper)

    own = top_of(module)[ex.reference.__name__]
    visit(own, module)
    return [ast.unparse(n) for n in chosen] + [ast.unparse(own)]
