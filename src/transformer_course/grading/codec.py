"""Values to and from JSON, so that inputs and outputs cross between the grader and its sandboxed worker as data.

Only plain data crosses: tensors (float, integer, bool), numbers, strings, None, and lists, tuples and
dicts of them (a subclass of list or dict, such as ``collections.Counter``, crosses as the plain list or dict).
Decoding never executes anything and checks what it reads, so a forged or malformed value is an error, never code.

Shared by both sides of the boundary: the host imports it (``host/grader.py``, ``host/verdicts.py``), and
``host/sandbox.py`` copies this file into the sandbox as ``course_codec.py``, where the worker imports it. So it
imports nothing but the standard library and PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
MAX_ELEMENTS = 1_000_000  # an exercise's output is small; anything bigger is refused rather than parsed
MAX_DEPTH = 20  # nesting of lists, tuples and dicts


class CodecError(ValueError):
    """A value could not be encoded or decoded."""


def _float(x: float) -> Any:
    # JSON has no NaN or infinity; spell them as strings so the text stays strict JSON.
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def encode(value: Any, strict: bool = True, _depth: int = 0) -> Any:
    """A JSON-serialisable description of value.

    Only plain values are described: a tensor subclass (other than a Parameter, sent as its data) or a
    subclass of int, float or str is refused, so that nothing of the sender's own types crosses.
    """
    if _depth > MAX_DEPTH:
        raise CodecError("the value is nested too deeply")
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise CodecError(f"tensor subclasses ({type(value).__name__}) are not supported; return a plain tensor")
        if value.dtype not in _NAMES:
            raise CodecError(f"tensors of dtype {value.dtype} are not supported")
        if value.numel() > MAX_ELEMENTS:
            raise CodecError(f"tensor with {value.numel()} elements is too large")
        flat = value.detach().cpu().reshape(-1)
        if value.dtype.is_floating_point:
            data = [_float(x) for x in flat.double().tolist()]
        else:
            data = flat.tolist()
        return {"__tensor__": _NAMES[value.dtype], "shape": list(value.shape), "data": data}
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is str:
        if len(value) > MAX_ELEMENTS:
            raise CodecError("string too long")
        return value
    if type(value) is float:
        return {"__float__": _float(value)}
    if isinstance(value, tuple) and type(value).__getitem__ is tuple.__getitem__ or isinstance(value, list):
        # named tuples (torch.return_types included) travel as plain tuples of their items, a list subclass as a
        # list: read through the built-in's own iterator, so that no method of the subclass runs
        items = tuple.__iter__(value) if isinstance(value, tuple) else list.__iter__(value)
        return {
            "__seq__": "tuple" if isinstance(value, tuple) else "list",
            "items": [encode(v, strict, _depth + 1) for v in items],
        }
    if isinstance(value, dict):
        # a Counter, an OrderedDict or a defaultdict is a dict as the self-check takes it: it travels as a plain dict,
        # read through dict's own items (no method of the subclass runs)
        pairs = list(dict.items(value))
        if not all(type(k) is str for k, _ in pairs):
            raise CodecError("only dicts with string keys are supported")
        return {"__dict__": {k: encode(v, strict, _depth + 1) for k, v in pairs}}
    raise CodecError(f"values of type {type(value).__name__} are not supported")


def _decode_float(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise CodecError(f"not a number: {x!r:.40}")
    if isinstance(x, str):
        if x not in ("nan", "inf", "-inf"):
            raise CodecError(f"not a number: {x!r:.40}")
        return float(x)
    return float(x)


def decode(obj: Any, _depth: int = 0) -> Any:
    """The value that encode described; raises CodecError on anything malformed."""
    if _depth > MAX_DEPTH:
        raise CodecError("the value is nested too deeply")
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, list):
        raise CodecError("a bare JSON list is not a valid encoded value")
    if not isinstance(obj, dict) or len(obj) == 0:
        raise CodecError(f"malformed value: {obj!r:.60}")
    if "__tensor__" in obj:
        dtype = _DTYPES.get(obj.get("__tensor__"))  # type: ignore[arg-type]  # None (no name) finds None too
        shape, data = obj.get("shape"), obj.get("data")
        if dtype is None:
            raise CodecError(f"unknown dtype {obj.get('__tensor__')!r:.40}")
        if not isinstance(shape, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
        ):
            raise CodecError("malformed tensor shape")
        if not isinstance(data, list) or len(data) != math.prod(shape) or len(data) > MAX_ELEMENTS:
            raise CodecError("tensor data does not match its shape")
        if dtype.is_floating_point:
            values = [_decode_float(x) for x in data]
        elif dtype == torch.bool:
            if not all(isinstance(x, bool) for x in data):
                raise CodecError("boolean tensor holds non-boolean data")
            values = data
        else:
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in data):
                raise CodecError("integer tensor holds non-integer data")
            values = data
        return torch.tensor(values, dtype=dtype).reshape(shape)
    if "__float__" in obj:
        return _decode_float(obj["__float__"])
    if "__seq__" in obj:
        items = obj.get("items")
        if not isinstance(items, list):
            raise CodecError("malformed sequence")
        decoded = [decode(v, _depth + 1) for v in items]
        return tuple(decoded) if obj["__seq__"] == "tuple" else decoded
    if "__dict__" in obj and isinstance(obj["__dict__"], dict):
        return {str(k): decode(v, _depth + 1) for k, v in obj["__dict__"].items()}
    raise CodecError(f"malformed value: {obj!r:.60}")


# --- inputs edited in place ----------------------------------------------------------------------------------------
# A function that edits its input (``logits /= T``, ``x += pe[:T]``) returns the right values and changes the caller's
# tensor. Both sides look for it the same way: a snapshot of the inputs before the call, compared after it.


def snapshot(value: Any, _depth: int = 0) -> Any:
    """A copy of an input to compare with after the call: tensors cloned, lists, tuples and dicts walked; anything
    else (a number, a string, a module) is kept as it is and not compared."""
    if _depth > MAX_DEPTH:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if type(value) in (list, tuple):
        return type(value)(snapshot(v, _depth + 1) for v in value)
    if type(value) is dict:
        return {k: snapshot(v, _depth + 1) for k, v in value.items()}
    return value


def changed(before: Any, after: Any) -> bool:
    """Whether ``after``, an input after the call, differs from its ``snapshot`` ``before``: a tensor with other
    values (NaN where NaN was counts as the same), shape or dtype, or a list or dict with other items."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or after.shape != before.shape or after.dtype != before.dtype:
            return True
        now = after.detach()
        same = now == before
        if before.is_floating_point() or before.is_complex():
            same |= now.isnan() & before.isnan()
        return not bool(same.all())
    if type(before) in (list, tuple):
        return len(after) != len(before) or any(changed(b, a) for b, a in zip(before, after))
    if type(before) is dict:
        return after.keys() != before.keys() or any(changed(before[k], after[k]) for k in before)
    return False


def changed_inputs(before: tuple[tuple, dict], args: tuple, kwargs: dict) -> list[int | str]:
    """The positions of the arguments and the names of the keyword arguments that the call changed, given
    ``before = snapshot((args, kwargs))`` taken before it."""
    old_args, old_kwargs = before
    found: list[int | str] = [i for i, (b, a) in enumerate(zip(old_args, args)) if changed(b, a)]
    return found + [k for k in old_kwargs if k in kwargs and changed(old_kwargs[k], kwargs[k])]
