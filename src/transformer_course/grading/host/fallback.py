"""The course's code of an exercise, which replaces a failed answer in the worker for the exercises after it: the
solution notebook's cell (an instructor's copy of the course), else the reference implementation's source, read from
the package. Host side: the grader reads the references here, in its own process, and sends the worker only text.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
from pathlib import Path

from .. import registry
from ..cells import exercise_id
from ..given import is_definition
from ..registry import Exercise
from ..static_check import clean_source

__all__ = ["FALLBACK_DEFAULTS", "fallback_source", "package_fallback"]


def fallback_source(ex: Exercise, root: Path) -> str:
    """The course's code of one exercise, which replaces a failed answer for the exercises after it.

    From the solution notebook where the course folder has one (an instructor's copy); else (a student's
    repository) the reference implementation's own source, which students have in the package anyway
    (``package_fallback``).
    """
    solution = root / "solutions" / registry.chapter_notebook(ex.chapter)
    if solution.exists():
        for cell in json.loads(solution.read_text(encoding="utf-8"))["cells"]:
            text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            if exercise_id({**cell, "source": text}) == ex.id:
                return clean_source(text)[0]
    return package_fallback(ex)


# Keyword defaults that the course's code of an exercise takes other than the package's. The package computes
# attention with PyTorch's fused kernel by default (use_sdpa=True, for speed), which chapter 8's exercises forbid:
# the code that replaces an answer must be an answer that passes, so it computes attention with chapter 5's function.
FALLBACK_DEFAULTS: dict[str, bool | int | float | str | None] = {"use_sdpa": False}


def package_fallback(ex: Exercise) -> str:
    """The reference's source and the course code it uses, from the package, in a function of their own that
    returns the reference, bound to the exercise's name:

        def _course_code_8_3():
            import torch
            ...
            class FullTransformer(Transformer): ...
            return FullTransformer
        Transformer = _course_code_8_3()

    Only the exercise's name reaches the notebook's namespace, so a helper never replaces a name of the given code
    or of the student's cells (8.5's reference calls ``training.noam_lr``, a function of the exercise's own name).
    The earlier exercises' references it uses are the package's, inside it (the package's ``Encoder`` passes its
    ``EncoderLayer`` six arguments, the notebook's takes four); a later exercise's reference is never there.
    Annotations become strings, never evaluated (the package's modules postpone them).
    """
    code = _CourseCode(ex)
    own = code.define(ex.reference.__name__, inspect.getmodule(ex.reference))
    if own is None:
        raise ValueError(f"the reference of {ex.id} is not defined at the top of its module")
    func = f"_course_code_{ex.id.replace('.', '_')}"
    body: list[ast.stmt] = [*code.imports.values(), *code.nodes, ast.Return(ast.Name(own, ast.Load()))]
    wrapper = ast.FunctionDef(
        name=func, args=ast.arguments([], [], None, [], [], None, []), body=body, decorator_list=[], returns=None
    )
    module = ast.Module([wrapper], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)) + f"\n{ex.name} = {func}()\ndel {func}\n"


class _CourseCode:
    """The top-level statements of the package that one reference needs, dependencies first, and the imports of
    their modules (never of the course package)."""

    def __init__(self, ex: Exercise) -> None:
        chapter = registry.chapter_exercises(ex.chapter)
        later = chapter[[e.id for e in chapter].index(ex.id) + 1 :]
        self.later = {id(e.reference) for e in later}
        self.tops: dict[str, dict[str, ast.stmt]] = {}
        self.done: set[tuple[str, str]] = set()
        self.defined: dict[str, tuple[str, str]] = {}  # name in the function -> (module, name) it is
        self.imports: dict[str, ast.stmt] = {}
        self.module_imports: dict[str, dict[str, ast.stmt]] = {}
        self.nodes: list[ast.stmt] = []

    def top(self, mod) -> dict[str, ast.stmt]:
        if mod.__name__ not in self.tops:
            tree = ast.parse(inspect.getsource(mod))
            table: dict[str, ast.stmt] = {}
            imports: dict[str, ast.stmt] = {}
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    table[node.name] = node
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    table.update({t.id: node for t in targets if isinstance(t, ast.Name)})
                elif isinstance(node, (ast.Import, ast.ImportFrom)) and is_definition(node):
                    if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                        imports[ast.unparse(node)] = node
            self.tops[mod.__name__], self.module_imports[mod.__name__] = table, imports
        return self.tops[mod.__name__]

    def define(self, name: str, mod) -> str | None:
        """Add the statement that defines ``name`` in ``mod``, after what it uses; -> its name, None if not there."""
        node = self.top(mod).get(name)
        if node is None:
            return None
        if (mod.__name__, name) in self.done:
            return name
        self.done.add((mod.__name__, name))
        rewrite = _Rewrite(mod)
        node = rewrite.visit(copy.deepcopy(node))
        for used in sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}):
            self.use(used, rewrite.attributes.get(used, mod))
        for defined in _defines(node):
            if self.defined.setdefault(defined, (mod.__name__, name)) != (mod.__name__, name):
                raise ValueError(f"two pieces of course code named {defined}: {self.defined[defined]}, {mod.__name__}")
        self.imports.update(self.module_imports[mod.__name__])
        self.nodes.append(node)
        return name

    def use(self, name: str, mod) -> None:
        """What ``name`` is in ``mod``: a definition of its own, the course's function or class imported into it, or a
        constant; anything else (a parameter, a builtin, an import) needs nothing."""
        value = getattr(mod, name, None)
        if value is not None and id(value) in self.later:
            return  # bound by name in the notebook, if at all
        if name in self.top(mod):
            self.define(name, mod)
        elif (inspect.isfunction(value) or inspect.isclass(value)) and _is_course(inspect.getmodule(value)):
            own = self.define(value.__name__, inspect.getmodule(value))
            if own is not None and own != name:
                self._add(name, ast.parse(f"{name} = {own}").body[0], mod)
        elif isinstance(value, (bool, int, float, str)) and not isinstance(value, type):
            self._add(name, ast.parse(f"{name} = {value!r}").body[0], mod)

    def _add(self, name: str, node: ast.stmt, mod) -> None:
        if (mod.__name__, name) not in self.done:
            self.done.add((mod.__name__, name))
            self.defined.setdefault(name, (mod.__name__, name))
            self.nodes.append(node)


def _is_course(mod) -> bool:
    return mod is not None and mod.__name__.split(".")[0] == "transformer_course"


def _defines(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


class _Rewrite(ast.NodeTransformer):
    """``ref.Transformer`` (an attribute of a course module imported into ``mod``) becomes ``Transformer``, defined
    in the function too; FALLBACK_DEFAULTS replace the package's keyword defaults; annotations become strings."""

    def __init__(self, mod) -> None:
        self.mod = mod
        self.attributes: dict = {}  # a name that was an attribute -> the course module it is defined in

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and inspect.ismodule(getattr(self.mod, node.value.id, None)):
            module = getattr(self.mod, node.value.id)
            if _is_course(module):
                if self.attributes.setdefault(node.attr, module) is not module:
                    raise ValueError(f"{node.attr} of two course modules in {self.mod.__name__}")
                return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        self.generic_visit(node)
        positional = node.posonlyargs + node.args
        for arg, default in zip(positional[len(positional) - len(node.defaults) :], list(node.defaults)):
            if arg.arg in FALLBACK_DEFAULTS:
                node.defaults[node.defaults.index(default)] = ast.Constant(FALLBACK_DEFAULTS[arg.arg])
        for i, arg in enumerate(node.kwonlyargs):
            if arg.arg in FALLBACK_DEFAULTS and node.kw_defaults[i] is not None:
                node.kw_defaults[i] = ast.Constant(FALLBACK_DEFAULTS[arg.arg])
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        if node.annotation is not None:
            node.annotation = ast.Constant(ast.unparse(node.annotation))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if node.returns is not None:
            node.returns = ast.Constant(ast.unparse(node.returns))
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        node.annotation = ast.Constant(ast.unparse(node.annotation))
        return node
