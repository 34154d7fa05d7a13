"""What a graded cell may reach, decided on its syntax tree before it runs: a closed world, by an allow-list.

Why: the watch that records forbidden PyTorch built-ins (``inside/worker.py``) runs in the process that runs the
student's code, as do the answer channel and the course's code. Whatever Python lets a program reach, a cell could
patch, so the grader decides before anything runs that a cell reaches only what is listed (``allowed.py``):

- every node of its syntax tree is of a listed kind (``allowed.NODES``);
- every name it reads is its own (bound in the cell), the notebook's (the given cells' and the submission's other
  exercise cells'), or a listed built-in; a name starting with an underscore only if the cell or the notebook
  binds it; ``getattr``/``hasattr``/``setattr``/``delattr`` only called, with a constant name, which is then checked
  as the attribute it names; no name of a refused built-in bound by the cell (``getattr = getattr``);
- every module it imports or reaches is listed, and so is each attribute it touches on one (``module_attribute``);
  a module is used only through its attributes (``m = torch`` is refused, so that every chain that starts at a
  module is followed here, on the real module), and nothing is assigned into one;
- every attribute it uses on a value is a listed one (``allowed.library_attributes``) or one the cell or the
  notebook assigns; a private one (``_x``) only if the cell or the notebook assigns it and no library type has it; a
  dunder only ``__init__``/``__name__``; never one through which Python exposes code, frames or generators, never
  one of ``allowed.ESCAPES``; ``str.format`` only on a constant whose fields read no attribute;
- its classes take no keywords (a metaclass), and define only ordinary dunder methods.

No refusal and no exemption rests on how something is spelled: an alias of a built-in is a use of it, ``self`` is a
name like any other. No exercise needs anything else: tests/test_grader_closed_world.py runs every solution, student
starter and wrong answer of the course through these rules and finds nothing to refuse, and one case per route a
hostile student could take around them.

These rules guard the sandbox but never run in it: the grader applies them before it sends a cell
(``static_check``), and the self-check applies the same ones in the student's kernel.
"""

from __future__ import annotations

import ast
import builtins
import string
import types

from . import allowed
from .allowed import MODULES, import_module, module_attribute
from .bindings import bind_import, binds, defined, module_aliases

__all__ = ["closed_world_problem", "defined", "forbidden_family", "module_aliases"]

_CONSTRUCTS = {"AsyncFunctionDef": "async def", "AsyncFor": "async for", "AsyncWith": "async with",
               "Await": "await", "Match": "match", "match_case": "case", "TryStar": "except*"}  # fmt: skip


def forbidden_family(name: str, forbidden: tuple[str, ...] | frozenset[str]) -> str | None:
    """The forbidden built-in that name belongs to, or None: the name itself, with or without leading underscores,
    and its variants (``_scaled_dot_product_attention_math`` is of ``scaled_dot_product_attention``'s family)."""
    plain = name.lstrip("_").lower()
    for f in forbidden:
        base = f.lstrip("_").lower()
        if plain == base or plain.startswith(base + "_"):
            return f
    return None


def _chain(node: ast.expr) -> tuple[str | None, list[str]]:
    """(the innermost name, the attributes after it) of ``a.b.c``; (None, attrs) when the chain starts elsewhere."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), attrs[::-1]


class _Checker:
    """One cell's check: the names and attributes it may use, and the first problem found, with its line."""

    def __init__(self, tree: ast.AST, aliases: dict[str, str], names: frozenset[str], attributes: frozenset[str]):
        self.aliases = dict(aliases)
        own_names, own_attributes = defined(tree)
        self.names = (own_names | names) - allowed.SHADOWED  # another cell's `getattr = ...` never runs here
        self.attributes = own_attributes | attributes
        self.bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        self.called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}

    def imports(self, node: ast.Import | ast.ImportFrom) -> str | None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in MODULES:
                    return f"it imports `{a.name}`"
        else:
            if node.level or not node.module or node.module not in MODULES:
                return f"it imports from `{'.' * node.level}{node.module or ''}`"
            module = import_module(node.module)
            for a in node.names:
                if a.name == "*":
                    return f"it imports * from `{node.module}`"
                problem = module_attribute(module, a.name) if module else None
                if problem:
                    return f"it imports {problem}"
        bind_import(node, self.aliases)
        return None

    def name(self, node: ast.Name) -> str | None:
        n = node.id
        if n.startswith("__") and n.endswith("__") and n not in allowed.DUNDERS:
            return f"it uses the name `{n}`"
        if not isinstance(node.ctx, ast.Load) and n in allowed.SHADOWED:
            return f"it binds the name of the built-in `{n}`"
        if not isinstance(node.ctx, ast.Load) or n in self.names:
            if n in self.aliases and isinstance(node.ctx, ast.Load) and id(node) not in self.bases:
                return f"it uses the module `{n}` other than through its attributes (as in `{n}.x`)"
            return None
        if n in self.aliases and id(node) not in self.bases:
            return f"it uses the module `{n}` other than through its attributes (as in `{n}.x`)"
        if hasattr(builtins, n) and n not in self.aliases:
            if n not in allowed.BUILTINS:
                return f"it uses the built-in `{n}`"
            if n in allowed.CALL_SHAPED and id(node) not in self.called:
                return f"it uses `{n}` other than by calling it"
        elif n.startswith("_") and n not in self.aliases:
            return f"it uses the name `{n}`, which neither the cell nor the notebook defines"
        return None

    def attribute(self, node: ast.Attribute, format_call: bool = False) -> str | None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__"):
            return None if attr in allowed.DUNDERS else f"it uses the dunder attribute `{attr}`"
        if attr in allowed.interpreter_attributes():
            return f"it uses `{attr}`, through which Python exposes running code"
        root, attrs = _chain(node)
        if root in self.aliases:
            if not isinstance(node.ctx, ast.Load):
                return f"it assigns to `{root}.{'.'.join(attrs)}`, inside a module"
            problem, owner = self._follow(self.aliases[root], attrs[:-1])
            if problem or owner is not None:
                problem = problem or self._of_module(owner, attr)
                value = vars(owner).get(attr) if owner is not None else None
                if not problem and isinstance(value, types.ModuleType) and id(node) not in self.bases:
                    return f"it uses the module `{value.__name__}` other than through its attributes"
                return problem
        if attr.startswith("_"):
            if attr in self.attributes and attr not in allowed.library_private_attributes():
                return None
            return f"it uses the private attribute `{attr}`"
        if attr in ("format", "format_map"):
            return None if format_call and attr == "format" else f"it uses `.{attr}`, which reads attributes by name"
        if attr in allowed.ESCAPES:
            return f"it uses `.{attr}`, which loads or runs code or reaches memory that grading cannot watch"
        if attr in allowed.library_attributes() or attr in self.attributes:
            return None
        return (
            f"it uses the attribute `.{attr}`, which is not on the list of what values offer nor one the cell assigns"
        )

    def _follow(self, module_name: str, attrs: list[str]) -> tuple[str | None, types.ModuleType | None]:
        """(a problem, the module that the next attribute is read from): None as the module once the chain has
        passed the modules, to a class or a function, whose attributes the rules for values cover."""
        if module_name not in MODULES:
            return f"it uses the module `{module_name}`", None
        module = import_module(module_name)
        for attr in attrs:
            if module is None:
                return None, None
            problem = module_attribute(module, attr)
            if problem:
                return f"it uses {problem}", None
            value = vars(module).get(attr)
            if not isinstance(value, types.ModuleType):
                return None, None
            module = value
        return None, module

    def _of_module(self, module: types.ModuleType | None, attr: str) -> str | None:
        problem = module_attribute(module, attr) if module else None
        return f"it uses {problem}" if problem else None

    def call(self, node: ast.Call) -> str | None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "format":
            if not (isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
                return "it calls `.format` on a string made at run time, whose fields could read attributes by name"
            fields = [f for _, f, _, _ in string.Formatter().parse(func.value.value) if f]
            if any("." in f or "[" in f for f in fields):
                return "it calls `.format` with a field that reads an attribute or an item"
            return self.attribute(func, format_call=True)
        if not isinstance(func, ast.Name) or func.id in self.names or func.id not in allowed.CALL_SHAPED:
            return None
        target = node.args[0] if node.args else None
        name = node.args[1] if len(node.args) > 1 else None
        if target is None or not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return f"it calls `{func.id}` with a name computed at run time"
        ctx = ast.Load() if func.id in ("getattr", "hasattr") else ast.Store()
        as_attribute = ast.copy_location(ast.Attribute(value=target, attr=name.value, ctx=ctx), node)
        self.bases.add(id(target))
        return self.attribute(as_attribute)

    def node(self, node: ast.AST) -> str | None:
        if type(node) not in allowed.NODES:
            kind = type(node).__name__
            return f"it uses the construct `{_CONSTRUCTS.get(kind, kind)}`"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self.imports(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return None if self._format_func(node) else self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        bound = binds(node)
        if bound in allowed.SHADOWED:
            return f"it binds the name of the built-in `{bound}`"
        if isinstance(node, ast.ClassDef) and node.keywords:
            return "it defines a class with keywords (a metaclass)"
        if isinstance(node, ast.FunctionDef):
            dunder = node.name.startswith("__") and node.name.endswith("__")
            if dunder and node.name not in allowed.METHODS:
                return f"it defines the method `{node.name}`"
        return None

    def _format_func(self, node: ast.Attribute) -> bool:
        """A ``.format`` that is called: judged with its call (``call``), whose fields it reads."""
        return node.attr == "format" and id(node) in self.called


def closed_world_problem(
    tree: ast.AST,
    aliases: dict[str, str],
    names: frozenset[str] | set[str] = frozenset(),
    attributes: frozenset[str] | set[str] = frozenset(),
) -> str | None:
    """What in the cell reaches outside the closed world, as words for the report with the line; None if nothing.

    aliases: the names the chapter's imports bind to modules; names, attributes: what the notebook defines (its
    given cells, the submission's other exercise cells), which the cell may use as its own."""
    checker = _Checker(tree, aliases, frozenset(names), frozenset(attributes))
    # Imports first, in order: a cell's own import binds its alias for the rest of the cell. The problem reported is
    # the first in the cell's text, the innermost where several start at one place (getattr(...) in getattr(...).x).
    nodes = sorted(ast.walk(tree), key=lambda n: not isinstance(n, (ast.Import, ast.ImportFrom)))
    found = []
    for node in nodes:
        problem = checker.node(node)
        if problem:
            # a node without a place (a `case` of a match) comes after those with one, which name its line
            where = (getattr(node, "lineno", 10**9), getattr(node, "col_offset", 0), getattr(node, "end_col_offset", 0))
            found.append((where, problem))
    if not found:
        return None
    (line, _, _), problem = min(found, key=lambda item: item[0])
    return problem + (f" (line {line})" if line < 10**9 else "")
