"""What a graded cell may reach, decided on its syntax tree before it runs: a closed world.

Why: the watch that records forbidden PyTorch built-ins (``inside/worker.py``) runs in the process that runs the
student's code, as do the answer channel and the course's code. Whatever Python lets a program reach, a cell
could patch, so the grader decides before anything runs that a cell cannot reach them. A cell is refused,
with a message that names what it used, when it

- imports a module outside ``ALLOWED_MODULES`` (``sys``, ``os``, ``threading``, ``importlib``, ``ctypes`` ...),
  or reaches one through an attribute (``torch.ops``, ``torch.jit``, ``torch.multiprocessing``, ``F.importlib``);
- uses a module other than through its attributes (``m = torch``), so that every attribute chain that starts
  at a module can be followed here, in the grader, on the real module;
- uses a dunder name or attribute (``__main__``, ``__globals__``, ``__class__``; ``__init__`` and ``__name__``
  excepted), a private attribute (``torch._C``; ``self._x`` excepted), or the attributes through which Python
  exposes frames and code (``gi_frame``, ``f_globals``, ``tb_frame`` ...);
- calls ``exec``, ``eval``, ``compile``, ``open``, ``globals`` and the like, or ``getattr``/``setattr``/``hasattr``
  with a computed name on anything but ``self`` (a constant name is read as the attribute it names);
- defines a dunder method other than the ordinary ones (``__torch_function__``, ``__del__``, ``__getattr__``);
- reaches what loads or runs code or memory PyTorch does not watch (``torch.load``, ``.numpy()``, ``torch.compile``).

No exercise needs any of it: tests/test_grader_closed_world.py runs every solution, student starter and wrong
answer of the course through these rules and finds nothing to refuse.

These rules guard the sandbox but never run in it: the grader applies them before it sends a cell
(``static_check``), and the self-check applies the same ones in the student's kernel. Shared, so at the top level.
"""

from __future__ import annotations

import ast
import functools
import importlib
import types

__all__ = ["ALLOWED_MODULES", "module_aliases", "closed_world_problem", "forbidden_family"]

# What an exercise cell may import, or reach through attributes: PyTorch's numerical parts and the standard
# library's plain data structures and numerics. Nothing here reaches threads, processes, files or interpreters.
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.nn.init",
        "torch.nn.utils",  # clip_grad_norm_, in a training experiment
        "torch.optim",
        "torch.optim.lr_scheduler",
        "torch.linalg",
        "torch.special",
        "torch.fft",
        "torch.distributions",
        "torch.autograd",
        "math",
        "cmath",
        "random",
        "statistics",
        "collections",
        "itertools",
        "functools",
        "operator",
        "heapq",
        "bisect",
        "dataclasses",
        "typing",
        "enum",
        "copy",
        "string",
        "re",
        "time",
        "__future__",
    }
)
BUILTINS_REFUSED = frozenset(
    {"exec", "eval", "compile", "open", "input", "globals", "locals", "vars", "breakpoint", "help", "exit", "quit"}
)
DYNAMIC = frozenset({"getattr", "setattr", "delattr", "hasattr"})
DUNDERS_ALLOWED = frozenset({"__init__", "__name__"})
METHODS_ALLOWED = frozenset(
    {"__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__", "__next__",
     "__contains__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__post_init__"}
)  # fmt: skip
# How Python exposes running frames and code objects without a dunder: the way to another module's globals.
INTROSPECTION = frozenset(
    {"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "f_back",
     "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next"}
)  # fmt: skip
# What loads or runs code, or reaches memory, outside what PyTorch's watch can see.
ESCAPES = frozenset({"load", "loads", "compile", "numpy", "tofile", "ctypes", "from_file", "jit", "ops"})


def forbidden_family(name: str, forbidden: tuple[str, ...] | frozenset[str]) -> str | None:
    """The forbidden built-in that name belongs to, or None: the name itself, with or without leading underscores,
    and its variants (``_scaled_dot_product_attention_math`` is of ``scaled_dot_product_attention``'s family)."""
    plain = name.lstrip("_").lower()
    for f in forbidden:
        base = f.lstrip("_").lower()
        if plain == base or plain.startswith(base + "_"):
            return f
    return None


@functools.lru_cache(maxsize=64)
def module_aliases(imports: str) -> dict[str, str]:
    """{name: module} for the names that import statements bind to modules (``import torch.nn as nn``,
    ``from torch import nn``); names bound to other objects (``from collections import Counter``) are left out.
    Cached (a chapter's imports are read for each of its cells): callers must not change the dict."""
    aliases: dict[str, str] = {}
    try:
        tree = ast.parse(imports)
    except SyntaxError:
        return aliases
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _bind(node, aliases)
    return aliases


def _bind(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    """Add to aliases the names that one import statement binds to modules: ``import a.b`` binds ``a`` to ``a``,
    ``import a.b as c`` binds ``c`` to ``a.b``, ``from a import b`` binds ``b`` to ``a.b`` where that is a module.
    One place for the chapter's imports (``module_aliases``) and a cell's own (``closed_world_problem``), so that
    both read an import alike. A relative import binds nothing here (a cell's is refused before it is bound)."""
    if isinstance(node, ast.Import):
        for a in node.names:
            top = a.name.split(".")[0]
            aliases[a.asname or top] = a.name if a.asname else top
    elif node.module and not node.level:
        for a in node.names:
            if _is_module(f"{node.module}.{a.name}"):
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"


def _is_module(dotted: str) -> bool:
    try:
        importlib.import_module(dotted)
        return True
    except Exception:  # noqa: BLE001 - not importable as a module (a function, a class, or nothing)
        return False


def _chain(node: ast.expr) -> tuple[str | None, list[str]]:
    """(the innermost name, the attributes after it) of ``a.b.c``; (None, attrs) when the chain starts elsewhere."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), attrs[::-1]


def _attribute_problem(attr: str, on_self: bool) -> str | None:
    if attr.startswith("__") and attr.endswith("__"):
        return None if attr in DUNDERS_ALLOWED else f"the dunder attribute `{attr}`"
    if attr.startswith("_") and not on_self:
        return f"the private attribute `{attr}`"
    if attr in INTROSPECTION:
        return f"`{attr}`, through which Python exposes running code"
    if attr in ESCAPES and not on_self:
        return f"`.{attr}`, which loads or runs code or reaches memory that grading cannot watch"
    return None


def _follow(module: str, attrs: list[str]) -> str | None:
    """Follow ``module.a.b...`` on the real modules, here in the grader: every module it passes must be allowed."""
    if module not in ALLOWED_MODULES:
        return f"the module `{module}`"
    try:
        obj: object = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - an allowed module missing here: nothing to follow
        return None
    for attr in attrs:
        if not isinstance(obj, types.ModuleType):
            return None  # past the modules: a function or class, whose attributes the rules above cover
        found = vars(obj).get(attr, _MISSING)
        if found is _MISSING:
            if hasattr(type(obj), "__getattr__") or "__getattr__" in vars(obj):
                return f"`{obj.__name__}.{attr}`, which is not a plain attribute of its module"
            return None  # no such attribute: the cell will fail on it by itself
        if isinstance(found, types.ModuleType) and found.__name__ not in ALLOWED_MODULES:
            reached = f"{obj.__name__}.{attr}"
            return f"the module `{found.__name__}`" + (f" (as `{reached}`)" if reached != found.__name__ else "")
        obj = found
    return None


_MISSING = object()


def closed_world_problem(tree: ast.AST, aliases: dict[str, str]) -> str | None:
    """What in the cell reaches outside the closed world, as words for the report; None if nothing does."""
    aliases = dict(aliases)
    for node in ast.walk(tree):  # the cell's own imports: each must be allowed, and binds an alias
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in ALLOWED_MODULES:
                    return f"it imports `{a.name}`"
            _bind(node, aliases)  # bound once every name passed: a refused statement returns with nothing bound
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module or node.module not in ALLOWED_MODULES:
                return f"it imports from `{'.' * node.level}{node.module or ''}`"
            for a in node.names:
                if a.name == "*":
                    return f"it imports * from `{node.module}`"
                if _attribute_problem(a.name, False):
                    return f"it imports `{a.name}` from `{node.module}`"
                problem = _follow(node.module, [a.name])
                if problem:
                    return f"it uses {problem}"
            _bind(node, aliases)
    bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        problem = _node_problem(node, aliases, bases)
        if problem:
            return problem
    return None


def _node_problem(node: ast.AST, aliases: dict[str, str], bases: set[int]) -> str | None:
    if isinstance(node, ast.Name):
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in DUNDERS_ALLOWED:
            return f"it uses the name `{node.id}`"
        if node.id in BUILTINS_REFUSED:
            return f"it uses `{node.id}`, which graded cells may not use"
        if node.id in aliases and id(node) not in bases and isinstance(node.ctx, ast.Load):
            return f"it uses the module `{node.id}` other than through its attributes (as in `{node.id}.x`)"
    elif isinstance(node, ast.Attribute):
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        problem = _attribute_problem(node.attr, on_self)
        if problem:
            return f"it uses {problem}"
        name, attrs = _chain(node)
        if name in aliases and isinstance(node.ctx, ast.Load):
            problem = _follow(aliases[name], attrs)
            if problem:
                return f"it uses {problem}"
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC:
        target = node.args[0] if node.args else None
        name_arg = node.args[1] if len(node.args) > 1 else None
        if isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str) and target is not None:
            as_attribute = ast.Attribute(value=target, attr=name_arg.value, ctx=ast.Load())
            return _node_problem(as_attribute, aliases, bases | {id(target)})
        if not (isinstance(target, ast.Name) and target.id == "self"):
            return f"it calls `{node.func.id}` with a computed name on something other than `self`"
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if node.name.startswith("__") and node.name.endswith("__") and node.name not in METHODS_ALLOWED:
            return f"it defines the method `{node.name}`"
    return None
