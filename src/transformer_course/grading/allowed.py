"""What a graded cell may use, listed: the lists that ``closed_world.py`` checks a cell against.

Everything a cell uses must be on a list here, or be the cell's own (a name it binds, an attribute it assigns),
or the notebook's (a name the given cells define); everything else is refused. The lists:

- ``NODES``: the kinds of syntax a cell may contain (``async``, ``match`` and ``except*`` are not on it);
- ``BUILTINS``: the built-in names it may use; ``getattr``, ``hasattr``, ``setattr`` and ``delattr`` only in the
  shape ``closed_world`` reads (``CALL_SHAPED``); a cell may not bind a name of ``SHADOWED``, the built-ins it may
  not use or only call (``getattr = getattr`` would make one of its own);
- ``MODULES``: the modules it may import or reach, and for each the attributes it may touch (``module_attribute``);
- ``library_attributes()``: the attributes it may use on values (a tensor's ``softmax``, a list's ``append``), the
  public attributes of the types in ``VALUE_TYPES`` and of the layers in ``LAYERS``;
- ``interpreter_attributes()``: the public attributes through which Python exposes code, frames and generators,
  which a cell may never use, not even as names of its own.

Shared by the grader and the self-check, so at the grading package's top level; it imports only PyTorch.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import types
from typing import Any

import torch
from torch import nn

__all__ = [
    "BUILTINS",
    "CALL_SHAPED",
    "DUNDERS",
    "ESCAPES",
    "METHODS",
    "MODULES",
    "NODES",
    "SHADOWED",
    "interpreter_attributes",
    "library_attributes",
    "library_private_attributes",
    "module_attribute",
]

NODES = frozenset(
    getattr(ast, name)
    for name in (
        "Module Expr Assign AugAssign AnnAssign FunctionDef ClassDef Return Delete If For While Break Continue Pass "
        "With withitem Raise Try ExceptHandler Assert Import ImportFrom alias Global Nonlocal Lambda ListComp SetComp "
        "DictComp GeneratorExp comprehension Yield YieldFrom BinOp UnaryOp BoolOp Compare Call keyword IfExp "
        "NamedExpr Attribute Subscript Slice Starred Name Constant List Tuple Dict Set JoinedStr FormattedValue "
        "arguments arg Add Sub Mult MatMult Div Mod Pow LShift RShift BitOr BitXor BitAnd FloorDiv And Or Invert Not "
        "UAdd USub Eq NotEq Lt LtE Gt GtE Is IsNot In NotIn Load Store Del"
    ).split()
)

# Plain computation: numbers, containers, strings, iteration, classes. Not here: exec, eval, compile, open, input,
# globals, locals, vars, dir, __import__, breakpoint, help, memoryview, the interpreter's exits, and type (whose
# result, the metaclass, makes classes from strings: type(type(1))("T", (), {...})).
_PLAIN = (
    "abs all any bin bool callable chr classmethod complex dict divmod enumerate filter float format frozenset hash hex "
    "id int isinstance issubclass iter len list map max min next object oct ord pow print property range repr "
    "reversed round set slice sorted staticmethod str sum super tuple zip NotImplemented Ellipsis"
)
# Read on the call's shape only: getattr(x, "name") is the attribute x.name, checked as one.
CALL_SHAPED = frozenset({"getattr", "hasattr", "setattr", "delattr"})
BUILTINS = frozenset(
    _PLAIN.split()
    + [n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)]
    + list(CALL_SHAPED)
)
SHADOWED = frozenset(n for n in dir(builtins) if n in CALL_SHAPED or n not in BUILTINS) - {"__name__"}

# Dunders a cell may write: a class's ordinary methods, and __init__/__name__ as attributes.
DUNDERS = frozenset({"__init__", "__name__"})
METHODS = frozenset(
    {"__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__", "__next__",
     "__contains__", "__eq__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__post_init__"}
)  # fmt: skip

# Attributes that load or run code, or reach memory or files, outside what the watch on PyTorch's calls sees; and
# str.format, whose fields read attributes by name ("{0.__globals__}"): closed_world allows it only on a constant
# whose fields read none.
ESCAPES = frozenset(
    {"load", "loads", "compile", "numpy", "tofile", "from_file", "storage", "untyped_storage", "share_memory",
     "share_memory_", "jit", "ops", "classes", "library", "hub", "vmap", "func", "cond", "while_loop", "export",
     "format", "format_map"}
)  # fmt: skip

# Modules a cell may import or reach, and what of each it may touch: None, every public attribute whose value is
# plain (see module_attribute); a set, those names only (the standard library's modules that take attribute or
# code names as strings, such as operator.attrgetter, functools.singledispatch or typing.get_type_hints, are cut
# to what an exercise needs).
_NUMERIC = None
MODULES: dict[str, frozenset[str] | None] = {
    "torch": None,
    "torch.nn": None,
    "torch.nn.functional": None,
    "torch.nn.init": None,
    "torch.nn.utils": None,  # clip_grad_norm_, in a training experiment
    "torch.optim": None,
    "torch.optim.lr_scheduler": None,
    "torch.linalg": None,
    "torch.special": None,
    "torch.fft": None,
    "torch.distributions": None,
    "torch.autograd": None,
    "math": _NUMERIC,
    "cmath": _NUMERIC,
    "random": _NUMERIC,
    "statistics": _NUMERIC,
    "itertools": _NUMERIC,
    "heapq": _NUMERIC,
    "bisect": _NUMERIC,
    "collections": frozenset({"Counter", "OrderedDict", "defaultdict", "deque", "namedtuple", "ChainMap"}),
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "cmp_to_key", "total_ordering", "wraps"}),
    "operator": frozenset(
        "add sub mul truediv floordiv mod pow neg pos abs matmul lt le eq ne gt ge not_ and_ or_ xor inv invert "
        "itemgetter getitem contains index iadd isub imul".split()
    ),
    "dataclasses": frozenset({"dataclass", "field", "fields", "asdict", "astuple"}),
    "typing": frozenset(
        "Any Callable Dict Iterable Iterator List Literal Mapping NamedTuple Optional Sequence Set Tuple Union cast".split()
    ),
    "copy": frozenset({"copy", "deepcopy"}),
    "string": frozenset(
        "ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits punctuation printable whitespace".split()
    ),
    "re": frozenset(
        "compile match search fullmatch findall finditer split sub subn escape Pattern Match "
        "IGNORECASE I MULTILINE M DOTALL S VERBOSE X ASCII A".split()
    ),
    "time": frozenset({"time", "perf_counter", "monotonic", "process_time"}),
    "__future__": frozenset({"annotations"}),
}
_PLAIN_VALUES = (int, float, bool, str, complex, torch.dtype, torch.layout, torch.memory_format)


def module_attribute(module: types.ModuleType, attr: str) -> str | None:
    """Why a cell may not touch ``module.attr``, or None. The module itself is one of ``MODULES``."""
    listed = MODULES[module.__name__]
    if attr.startswith("_"):
        return f"`{module.__name__}.{attr}`, a private name of its module"
    if listed is not None:
        return None if attr in listed else f"`{module.__name__}.{attr}`, which is not on the module's list"
    if attr in ESCAPES:
        return f"`{module.__name__}.{attr}`, which loads or runs code or reaches memory that grading cannot watch"
    value = vars(module).get(attr, _MISSING)
    if value is _MISSING:
        if "__getattr__" in vars(module):
            return f"`{module.__name__}.{attr}`, which is not a plain attribute of its module"
        return None  # no such attribute: the cell fails on it by itself
    if isinstance(value, types.ModuleType):
        return None if value.__name__ in MODULES else f"the module `{value.__name__}` (as `{module.__name__}.{attr}`)"
    if callable(value) or isinstance(value, _PLAIN_VALUES):
        return None
    return f"`{module.__name__}.{attr}`, a {type(value).__name__}, which graded cells may not use"


_MISSING = object()

# Types whose public attributes a cell may use on any value: PyTorch's tensors, layers, optimisers and
# distributions, and Python's numbers, strings and containers.
VALUE_TYPES: tuple[Any, ...] = (
    torch.Tensor, nn.Parameter, nn.Module, torch.Size, torch.dtype, torch.device, torch.Generator, torch.finfo,
    torch.iinfo, torch.optim.Optimizer, torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD,
    torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.LambdaLR, torch.distributions.Distribution,
    torch.distributions.Categorical, torch.distributions.Normal, torch.autograd.Function,
    torch.autograd.function.FunctionCtx, int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset,
    range, slice, property, BaseException, functools.partial,
)  # fmt: skip
# Layers whose instances' attributes (nn.Linear's weight, nn.LSTM's weight_ih_l0 ...) a cell may use.
LAYERS = (
    lambda: nn.Linear(2, 2), lambda: nn.Embedding(3, 2), lambda: nn.LSTM(2, 2), lambda: nn.GRU(2, 2),
    lambda: nn.RNN(2, 2), lambda: nn.LSTMCell(2, 2), lambda: nn.GRUCell(2, 2), lambda: nn.RNNCell(2, 2),
    lambda: nn.LayerNorm(2), lambda: nn.Dropout(), lambda: nn.MultiheadAttention(2, 1),
    lambda: nn.Transformer(4, 2, 1, 1, 8, batch_first=True), lambda: nn.CrossEntropyLoss(), lambda: nn.Conv1d(1, 1, 1),
    lambda: nn.BatchNorm1d(2), lambda: nn.Softmax(-1), lambda: nn.GELU(),
)  # fmt: skip


def _types_of_modules() -> list[type]:
    import collections
    import re

    extra: list[type] = [collections.Counter, collections.OrderedDict, collections.defaultdict, collections.deque]
    extra += [re.Pattern, re.Match, __import__("random").Random]
    extra += [v for v in vars(torch.return_types).values() if isinstance(v, type)]
    return extra


@functools.cache
def library_attributes() -> frozenset[str]:
    """The public attributes a cell may use on a value: those of ``VALUE_TYPES``, of the standard library's
    containers, of PyTorch's named results (``values``, ``indices``) and of ``LAYERS``' instances, less
    ``ESCAPES`` and less what ``interpreter_attributes`` holds."""
    names: set[str] = set()
    for t in (*VALUE_TYPES, *_types_of_modules()):
        names |= {n for n in dir(t) if not n.startswith("_")}
    for layer in _layers():
        for m in layer.modules():
            names |= {n for n in vars(m) if not n.startswith("_")}
            names |= set(m._parameters) | set(m._buffers) | set(m._modules)
    for optimiser in _optimisers():
        names |= {n for n in vars(optimiser) if not n.startswith("_")}
    return frozenset(names - ESCAPES - _interpreter_only())


@functools.cache
def _layers() -> list[nn.Module]:
    """One instance of each of ``LAYERS``, made without drawing from PyTorch's random generator: the self-check
    reads these lists in a student's kernel, whose random numbers the notebook's stored outputs depend on."""
    with torch.random.fork_rng(devices=[]):
        return [make() for make in LAYERS]


def _optimisers() -> list[object]:
    """An optimiser and a schedule, for the attributes their instances have (``param_groups``, ``base_lrs``)."""
    adam = torch.optim.Adam([nn.Parameter(torch.zeros(1))])
    return [adam, torch.optim.lr_scheduler.LambdaLR(adam, lambda step: 1.0)]


@functools.cache
def library_private_attributes() -> frozenset[str]:
    """The private attributes that the library's own types and layers have (``_parameters``, ``_version``): a cell
    may not give one of its own these names, so that assigning one never lists it for a library object."""
    names: set[str] = set()
    for t in (*VALUE_TYPES, *_types_of_modules()):
        names |= {n for n in dir(t) if n.startswith("_") and not n.endswith("__")}
    for layer in _layers():
        for m in layer.modules():
            names |= {n for n in vars(m) if n.startswith("_")}
    for optimiser in _optimisers():
        names |= {n for n in vars(optimiser) if n.startswith("_")}
    return frozenset(names)


_INTERPRETER_TYPES = (
    types.FunctionType, types.CodeType, types.FrameType, types.GeneratorType, types.CoroutineType,
    types.AsyncGeneratorType, types.TracebackType, types.ModuleType, type, types.MethodType,
    types.BuiltinFunctionType, types.CellType,
)  # fmt: skip


@functools.cache
def _interpreter_only() -> frozenset[str]:
    return frozenset(n for t in _INTERPRETER_TYPES for n in dir(t) if not n.startswith("_")) - _shared_names()


@functools.cache
def _shared_names() -> frozenset[str]:
    """Names that interpreter objects share with plain values (a generator's ``close``, a code object's
    ``replace``, a frame's ``clear``): a value's method of that name is no way in, since reaching a frame, a code
    object or a generator's internals needs one of the names ``interpreter_attributes`` holds first."""
    names: set[str] = set()
    for t in (*VALUE_TYPES, *_types_of_modules()):
        names |= {n for n in dir(t) if not n.startswith("_")}
    return frozenset(names)


def interpreter_attributes() -> frozenset[str]:
    """The public attributes of code objects, frames, generators, coroutines and tracebacks (``gi_frame``,
    ``f_globals``, ``co_consts``, ``tb_frame``, ``cell_contents``, ``mro`` ...) that no plain value has: never
    allowed, not even for a cell's own attribute."""
    return _interpreter_only()


def import_module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - an allowed module missing here: nothing to follow
        return None
