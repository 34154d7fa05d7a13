"""The exercise registry: what each exercise is called, what it is worth, and how it is checked.

An exercise names the object the student defines (a function or an nn.Module class), a generator of
test cases (public ones for the self-check, hidden ones for the grader, from different seeds), the
reference implementation, and the known mistakes that the self-check recognises to give a hint.
One module per chapter in ``transformer_course.exercises`` (``ch05`` ...), the course's content, registers its
exercises here; this module, like the rest of ``grading``, is the machinery and imports none of the course's models.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

PUBLIC_SEED = 0  # self-check inputs, visible to the student
HIDDEN_SEED = 20_171_206  # grader inputs; different values, same kinds of case


EXERCISES = __package__.rsplit(".", 1)[0] + ".exercises"  # the course's content: transformer_course.exercises


def _chapter_modules() -> dict[int, str]:
    """Chapter number -> module, for every chNN.py (or package chNN) of the exercises: a chapter registers by existing."""
    import pkgutil
    from importlib.util import find_spec

    folder = find_spec(EXERCISES).submodule_search_locations  # type: ignore[union-attr]  # always there
    return {
        int(m.name[2:]): f"{EXERCISES}.{m.name}"
        for m in pkgutil.iter_modules(folder)
        if m.name.startswith("ch") and m.name[2:].isdigit()
    }


# Chapters whose exercises are registered, and the modules that hold them.
CHAPTER_MODULES = _chapter_modules()


@dataclass(frozen=True)
class Case:
    """One call: ``obj(*args, **kwargs)`` for a function; ``obj(**init)`` loaded with ``state``, then called, for a module."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    init: dict | None = None
    state: dict | None = None
    # What only the judge of an experiment reads, never sent to the student's code: e.g. the seed of 8.6's test
    # strings, which a function given it could otherwise draw and train on.
    judged: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong answer, recognised by the self-check so that it can give a precise hint."""

    hint: str
    implementation: Any


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    points: int
    name: str  # the name the student's function or class is bound to in the notebook
    kind: str  # "function" or "module"
    reference: Any
    make_cases: Callable[[torch.Generator], list[Case]]
    mistakes: tuple[Mistake, ...] = ()
    # The idea the exercise turns on, in words (no code): the self-check's first hint after a failure.
    idea: str = ""
    # Attribute and import names an exercise cell may not use, e.g. PyTorch's built-in of the thing to build.
    forbidden: tuple[str, ...] = ()
    atol: float = 1e-6
    rtol: float = 1e-6
    # Names of the parts of a result that is a tuple, by their place in it ((0,), (1, 0), ...): a mismatch says
    # "the finished hypotheses should ...", not "item 0 of item 1 of the result should ...".
    parts: dict[tuple[int, ...], str] = field(default_factory=dict)
    # An experiment has no single right output: judge(case, answer) says why an answer fails (None if it
    # passes), measuring it with the reference code; the reference is then one answer that passes.
    judge: Callable[[Case, Any], str | None] | None = None

    @property
    def chapter(self) -> int:
        return int(self.id.split(".")[0])

    def cases(self, seed: int) -> list[Case]:
        generator = torch.Generator().manual_seed(seed + int(self.id.replace(".", "")))
        # The grader and the grading kernel must draw the same cases even when a notebook changed the
        # default dtype (chapter 5 computes in float64): generate under PyTorch's own default.
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        try:
            return self.make_cases(generator)
        finally:
            torch.set_default_dtype(previous)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """Case inputs: float64 normal values drawn from the case generator, times scale."""
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


def size(g: torch.Generator, low: int, high: int) -> int:
    """A case's size drawn from the case generator, low to high inclusive: the grader's hidden cases get other
    shapes than the public ones, from the ranges the exercise module states."""
    return int(torch.randint(low, high + 1, (1,), generator=g))


def count(n: int, noun: str) -> str:
    """'1 head', '3 heads': a size in a case's label."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


_REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    for ex in exercises:
        if ex.kind not in ("function", "module"):
            raise ValueError(f"exercise {ex.id}: kind must be 'function' or 'module', got {ex.kind!r}")
        _REGISTRY[ex.id] = ex


def _load_all() -> None:
    for module in CHAPTER_MODULES.values():
        importlib.import_module(module)


def get(exercise_id: str) -> Exercise:
    _load_all()
    if not isinstance(exercise_id, str) or exercise_id not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY, key=sort_key))
        raise ValueError(f"there is no exercise {exercise_id!r}; the exercises are {known}")
    return _REGISTRY[exercise_id]


def chapter_exercises(chapter: int) -> list[Exercise]:
    _load_all()
    return sorted((e for e in _REGISTRY.values() if e.chapter == chapter), key=lambda e: sort_key(e.id))


def chapter_notebook(chapter: int) -> str:
    """File name of a chapter's notebook, e.g. '05_self_attention.ipynb'."""
    if chapter not in CHAPTER_MODULES:
        raise ValueError(f"chapter {chapter} has no graded exercises")
    return importlib.import_module(CHAPTER_MODULES[chapter]).NOTEBOOK


def sort_key(exercise_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in exercise_id.split("."))


def run_case(exercise: Exercise, obj: Any, case: Case) -> Any:
    """Call obj (the student's or the reference) on one case and return what it returns."""
    if exercise.kind == "module":
        if not isinstance(obj, type):
            raise TypeError(f"{exercise.name} should be a class (an nn.Module), got {type(obj).__name__}")
        module = obj(**(case.init or {}))
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{exercise.name} should be a subclass of torch.nn.Module")
        module = module.double()
        if case.state is not None:
            module.load_state_dict(case.state)
        module.eval()
        with torch.no_grad():
            return module(*case.args, **case.kwargs)
    if not callable(obj):
        raise TypeError(f"{exercise.name} should be a function, got {type(obj).__name__}")
    # An experiment (judged) may measure gradients or train a model; an implementation is compared as data.
    with torch.set_grad_enabled(exercise.judge is not None):
        return obj(*case.args, **case.kwargs)


def verdict(ex: Exercise, case: Case, actual: Any) -> str | None:
    """None when the answer to one case is right, else one sentence that says what is wrong with it."""
    if ex.judge is None:
        return compare(run_case(ex, ex.reference, case), actual, ex.atol, ex.rtol, names=ex.parts)
    try:
        return ex.judge(case, actual)
    except Exception as exc:  # noqa: BLE001 - an answer the judge cannot measure is a wrong answer
        return f"the answer could not be measured ({type(exc).__name__}: {str(exc)[:200]})"


def matching_mistake(ex: Exercise, case: Case, actual: Any) -> str | None:
    """The hint of the known mistake that gives exactly this output (the self-check's and the grader's words)."""
    for mistake in ex.mistakes:
        try:  # a mistake that cannot run here, or whose output cannot be set beside the answer, is no match
            if compare(run_case(ex, mistake.implementation, case), actual, ex.atol, ex.rtol) is None:
                return mistake.hint
        except Exception:  # noqa: BLE001
            continue
    return None


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


def _count(value: Any) -> str:
    return "" if len(value) == 0 else f"{len(value)}: "


def _shown(value: Any) -> str:
    if isinstance(value, (tuple, list)) and len(value) == 0:
        return "none"
    text = repr(tuple(value)) if isinstance(value, list) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
        return f"{where} differs from the reference by up to {diff:.3g}"
    if isinstance(expected, tuple):
        if _plain_data(expected) and isinstance(actual, (tuple, list)) and _plain_data(actual):
            if tuple(actual) != expected:  # shown as they are: "expected none, got 1: ((5, 2),)"
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
    if _real(expected) and _real(actual) and isinstance(expected, float):
        # A number returned as a Python float (a BLEU score) is compared within the tolerance as a tensor is:
        # (p1 p2 p3 p4) ** 0.25 and exp(mean(log p)) differ in the 14th digit, and both are right.
        if math.isnan(expected) and math.isnan(actual):
            return None
        if abs(actual - expected) <= atol + rtol * abs(expected):
            return None
        return f"{where} should be {expected!r}, got {actual!r} (a difference of {abs(actual - expected):.3g})"
    if expected != actual:
        return f"{where} should be {expected!r}, got {actual!r:.60}"
    return None
