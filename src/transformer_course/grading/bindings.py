"""What a piece of a notebook binds: the names its imports bind to modules (``module_aliases``), the names and attributes
it defines (``defined``), the name one statement binds (``binds``). Read on the syntax tree, nothing run; shared by the
closed world (``closed_world.py``), the static check and the grader, which judge a cell against what it and the rest
of the notebook define.
"""

from __future__ import annotations

import ast
import functools
import types

from .allowed import import_module

__all__ = ["bind_import", "binds", "defined", "module_aliases"]


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
            bind_import(node, aliases)
    return aliases


def bind_import(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    """Add to aliases the names that one import statement binds to modules: ``import a.b`` binds ``a`` to ``a``,
    ``import a.b as c`` binds ``c`` to ``a.b``, ``from a import b`` binds ``b`` to ``a.b`` where that is a module."""
    if isinstance(node, ast.Import):
        for a in node.names:
            top = a.name.split(".")[0]
            aliases[a.asname or top] = a.name if a.asname else top
    elif node.module and not node.level:
        for a in node.names:
            if isinstance(getattr(import_module(node.module), a.name, None), types.ModuleType):
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"


def defined(tree: ast.AST) -> tuple[set[str], set[str]]:
    """What a piece of code defines: (names it binds, attributes it assigns or its classes define)."""
    names: set[str] = set()
    attributes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    attributes.add(item.name)
                targets = item.targets if isinstance(item, ast.Assign) else [getattr(item, "target", None)]
                attributes |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            attributes.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REGISTERS:
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                attributes.add(first.value)  # self.register_buffer("pe", ...) defines self.pe
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            second = node.args[1] if len(node.args) > 1 else None
            if isinstance(second, ast.Constant) and isinstance(second.value, str):
                attributes.add(second.value)  # setattr(self, "w", ...) defines self.w
    return names, attributes


# nn.Module's methods that define an attribute by its name: a buffer, a parameter, a submodule.
_REGISTERS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})


def binds(node: ast.AST) -> str | None:
    """The name a definition, a parameter, an import or an except clause binds (a Name's binding is read apart)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.alias):
        return (node.asname or node.name).split(".")[0]
    if isinstance(node, ast.ExceptHandler):
        return node.name
    return None
