"""The exercise registry: what each exercise is called, what it is worth, and how it is checked.

An exercise names the object the student defines (a function or an nn.Module class), a generator of
test cases (public ones for the self-check, hidden ones for the grader, from different seeds), the
reference implementation, and the known mistakes that the self-check recognises to give a hint.
One module per chapter in ``transformer_course.exercises`` (``ch05`` ...), the course's content, registers its
exercises here; this module, like the rest of ``grading``, is the machinery and imports none of the course's models.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .codec import changed_inputs, snapshot
from .comparison import compare, describe  # noqa: F401 - describe re-exported: the exercises read it here

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


def attempt(ex: Exercise, obj: Any, case: Case) -> tuple[Any, list[str]]:
    """Call obj on a copy of the case's inputs: (what it returns, the inputs it changed in place, by name).

    The case itself stays as it was, so that the reference, run on it afterwards, sees the inputs the student's code
    saw. An experiment (judged) may change what it is given, a model it trains: only implementations are watched."""
    own = dataclasses.replace(case, args=snapshot(case.args), kwargs=snapshot(case.kwargs))
    before = snapshot((own.args, own.kwargs))
    actual = run_case(ex, obj, own)
    return actual, ([] if ex.judge else input_names(ex, changed_inputs(before, own.args, own.kwargs)))


def input_names(ex: Exercise, found: list[Any]) -> list[str]:
    """The reference's names for the inputs at these places (a position or a keyword): what the task calls them."""
    target = ex.reference.forward if ex.kind == "module" else ex.reference
    try:
        names = [n for n in inspect.signature(target).parameters if n != "self"]
    except (TypeError, ValueError):  # a builtin without a signature: numbered instead
        names = []
    shown = []
    for f in found:  # from the worker's reply too, so checked: positions in range, keywords as short strings
        if isinstance(f, int) and not isinstance(f, bool) and 0 <= f < 64:
            shown.append(names[f] if f < len(names) else f"argument {f + 1}")
        elif isinstance(f, str):
            shown.append(f[:40])
    return shown


def changed_message(names: list[str]) -> str:
    """One sentence for an answer that changed its inputs in place: the self-check's and the grader's words."""
    shown = " and ".join(f"`{n}`" for n in names[:3])
    its = "its input" if len(names) == 1 else "its inputs"
    return (
        f"your code changed {its} {shown} in place (an in-place operation such as `x /= t`, `x += y` or "
        "`x[i] = v` on a tensor it was given): the caller's tensor must stay as it was, so compute a new one "
        "(`x = x / t`)"
    )


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
