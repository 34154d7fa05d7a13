"""How an answer is compared with the reference (the self-check's and the grader's words): ``compare`` says in one
sentence how a value differs from the expected one, or None when it matches within the exercise's tolerance.

Tensors by shape, dtype and values (integers and booleans exactly, floating point within atol + rtol x |reference|,
the tolerance and a wrong dtype named in the message); tuples item by item, with the names an exercise gives its
parts; integers, strings and tuples of them (token ids, hypotheses) exactly and shown whole; a Python float within
the tolerance, which its message names as the tensors' do.

What an answer may return is what a task's words allow, in any of their honest spellings, and the grader takes the
same (``codec`` carries them; tests/test_grader_forms.py holds both to it): a list where a tuple is asked for, at
any depth (a hypothesis built as a list of token ids); a 0-d tensor where a number is (its number is compared);
any dict, a ``Counter`` or an ``OrderedDict`` too, where a dict is.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["compare", "describe"]


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(describe(v) for v in value)})"
    return f"a {type(value).__name__}"


def _plain_data(value: Any) -> bool:
    """Integers, strings and tuples of them (token ids, hypotheses): compared exactly, and shown as they are.
    Floats are not: they are compared one by one, within the tolerance."""
    if isinstance(value, (tuple, list)):
        return all(_plain_data(v) for v in value)
    return isinstance(value, (int, str, bool)) or value is None


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tuples(value: Any) -> Any:
    """Plain data with its lists as tuples, at every depth: a hypothesis returned as a list of token ids is the
    hypothesis the task asks for."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (tuple, list)) else value


def _count(value: Any) -> str:
    return "" if len(value) == 0 else f"{len(value)} item{'s' if len(value) > 1 else ''}: "


def _shown(value: Any) -> str:
    if isinstance(value, (tuple, list)) and len(value) == 0:
        return "none"
    text = repr(tuple(value)) if isinstance(value, list) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _allowed(atol: float, rtol: float) -> str:
    return f"{atol:g}" + (f" + {rtol:g} x |reference|" if rtol else "")


def _tolerance(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """What a floating-point mismatch message adds: the tolerance, and the dtype when it is not the task's.

    A float32 answer to a float64 task misses a tolerance of 1e-10 by rounding alone; the message says so."""
    if actual.dtype != expected.dtype:
        return f" (allowed: {_allowed(atol, rtol)}); it returned {_dtype(actual)}, the task asks for {_dtype(expected)}"
    return f" (allowed: {_allowed(atol, rtol)}, in {_dtype(actual)})"


def _number(expected: Any, actual: Any, atol: float, rtol: float, where: str) -> str | None:
    """A number where the task asks for one (a BLEU score, a count): a 0-d tensor counts as its number, compared as
    a Python float is (within the tolerance, which a mismatch names with the dtype); anything else is named."""
    dtype = "float64"  # a Python float is a double
    if isinstance(actual, torch.Tensor):
        if actual.dim() != 0 or actual.is_complex():
            return f"{where} should be a number ({expected!r}), got {describe(actual)}"
        if actual.is_floating_point():
            dtype = _dtype(actual)
        actual = actual.item()
    if not (_real(expected) and _real(actual) and isinstance(expected, float)):
        return f"{where} should be {expected!r}, got {actual!r:.60}" if expected != actual else None
    # A number returned as a Python float (a BLEU score) is compared within the tolerance as a tensor is:
    # (p1 p2 p3 p4) ** 0.25 and exp(mean(log p)) differ in the 14th digit, and both are right.
    if math.isnan(expected) and math.isnan(actual):
        return None
    if abs(actual - expected) <= atol + rtol * abs(expected):
        return None
    return (
        f"{where} should be {expected!r}, got {actual!r} (a difference of {abs(actual - expected):.3g}; allowed: "
        f"{_allowed(atol, rtol)}, in {dtype})"
    )


def compare(
    expected: Any,
    actual: Any,
    atol: float,
    rtol: float,
    where: str = "the result",
    names: dict[tuple[int, ...], str] | None = None,
    path: tuple[int, ...] = (),
) -> str | None:
    """None when actual matches expected, else one sentence that says how it differs.

    names: what the parts of a tuple result are called, by their place (the exercise's ``parts``)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{where} should be {describe(expected)}, got {describe(actual)}"
        if tuple(actual.shape) != tuple(expected.shape):
            return f"{where} should have shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
        if expected.dtype == torch.bool:
            if actual.dtype != torch.bool:
                return f"{where} should be a boolean tensor (True = may attend), got dtype {actual.dtype}"
            wrong = (actual != expected).sum().item()
            return None if wrong == 0 else f"{where} has {wrong} of {expected.numel()} entries wrong"
        if not (expected.dtype.is_floating_point or expected.dtype.is_complex):  # integers, e.g. token ids: exact
            if actual.dtype != expected.dtype:
                return (
                    f"{where} should be a {str(expected.dtype).replace('torch.', '')} tensor, got dtype {actual.dtype}"
                )
            wrong = (actual.cpu() != expected.cpu()).sum().item()
            return None if wrong == 0 else f"{where} has {wrong} of {expected.numel()} entries wrong"
        if not (actual.dtype.is_floating_point or actual.dtype.is_complex):
            return f"{where} should be a floating-point tensor, got dtype {actual.dtype}"
        a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
        if torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
            return None
        nan_mismatch = (a.isnan() != e.isnan()).sum().item()
        if nan_mismatch:
            return f"{where} has NaN in {int(a.isnan().sum())} entries where the reference has {int(e.isnan().sum())}"
        diff = (a - e).abs().nan_to_num(nan=0.0, posinf=math.inf).max().item()
        return f"{where} differs from the reference by up to {diff:.3g}{_tolerance(actual, expected, atol, rtol)}"
    if isinstance(expected, tuple):
        if _plain_data(expected) and isinstance(actual, (tuple, list)) and _plain_data(actual):
            if _tuples(actual) != _tuples(expected):  # shown as they are: "expected none, got 1 item: ((5, 2),)"
                if len(actual) == len(expected):  # as many as expected: the count says nothing
                    return f"{where}: expected {_shown(expected)}, got {_shown(actual)}"
                return f"{where}: expected {_count(expected)}{_shown(expected)}, got {_count(actual)}{_shown(actual)}"
            return None
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"{where} should be {describe(expected)}, got {describe(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            place = path + (i,)
            name = (names or {}).get(place, f"item {i} of {where}")
            problem = compare(e, a, atol, rtol, where=name, names=names, path=place)
            if problem:
                return problem
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        return _dict_difference(expected, actual, atol, rtol, where)
    if _real(expected) or isinstance(expected, bool):
        return _number(expected, actual, atol, rtol, where)
    if isinstance(actual, torch.Tensor):  # where a string or None is asked for
        return f"{where} should be {expected!r}, got {describe(actual)}"
    if expected != actual:
        return f"{where} should be {expected!r}, got {actual!r:.60}"
    return None


def _dict_difference(expected: dict, actual: dict, atol: float, rtol: float, where: str) -> str | None:
    """What differs between two dicts, key by key: the missing keys, the unexpected ones, the wrong values (the first
    few of each, and how many more), rather than both dicts cut at a length."""
    problems = [f"{k!r} is missing (expected {expected[k]!r})" for k in expected if k not in actual]
    problems += [f"{k!r} is not expected (got {actual[k]!r})" for k in actual if k not in expected]
    for k in expected:
        problem = compare(expected[k], actual[k], atol, rtol, where=repr(k)) if k in actual else None
        if problem is not None:  # a count exactly, as it is; a float or a tensor with the tolerance, as compare says
            exact = isinstance(expected[k], (int, str)) or expected[k] is None
            problems.append(f"{k!r} is {actual[k]!r}, expected {expected[k]!r}" if exact else problem)
    if not problems:
        return None
    more = f"; and {len(problems) - 3} more differences" if len(problems) > 3 else ""
    return f"{where}: {'; '.join(problems[:3])}{more} ({len(expected)} keys expected, {len(actual)} returned)"
