"""The probe: runs inside the grading kernel, right after a student's exercise cell.

It calls the student's function or class on the exercise's hidden cases and publishes the outputs as
data (a display message with its own MIME type). Nothing is compared here: the grader decodes the
outputs in its own process and compares them with the reference there, out of reach of student code.
"""

from __future__ import annotations

import types
from typing import Any

from . import registry
from .codec import CodecError, encode
from .registry import HIDDEN_SEED, run_case

MIME = "application/vnd.transformer-course.probe+json"
_MISSING = object()


def _describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _code_objects(obj: Any) -> tuple[list[types.CodeType], list[Any]]:
    functions = []
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if klass.__module__ != "__main__":
                continue
            for value in vars(klass).values():
                value = getattr(value, "__func__", value)  # staticmethod, classmethod
                if isinstance(value, property):
                    functions += [f for f in (value.fget, value.fset) if f is not None]
                elif isinstance(value, types.FunctionType):
                    functions.append(value)
    elif isinstance(obj, types.FunctionType):
        functions.append(obj)
    codes, stack = [], [f.__code__ for f in functions]
    while stack:
        code = stack.pop()
        codes.append(code)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    captured = []
    for f in functions:
        captured += list(f.__defaults__ or ()) + [c.cell_contents for c in (f.__closure__ or ()) if _filled(c)]
    return codes, captured


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _is_reference(value: Any) -> bool:
    name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
    return isinstance(name, str) and name.split(".")[0] == "transformer_course"


def reference_use(ex: registry.Exercise, obj: Any, namespace: dict) -> str | None:
    """The global through which the student's code reaches the course's reference code, if any.

    The names of the chapter's earlier exercises are allowed: building on them is the point, and when
    one of them failed its check the notebook bound it to the reference.
    """
    allowed = {e.name for e in registry.chapter_exercises(ex.chapter) if registry.sort_key(e.id) < registry.sort_key(ex.id)}
    codes, captured = _code_objects(obj)
    for code in codes:
        for name in code.co_names:
            if name not in allowed and name in namespace and _is_reference(namespace[name]):
                return name
    for value in captured:
        if _is_reference(value) and not any(value is namespace.get(n) for n in allowed):
            return getattr(value, "__name__", type(value).__name__)
    return None


def collect(exercise_id: str, namespace: dict, seed: int = HIDDEN_SEED) -> dict[str, Any]:
    ex = registry.get(exercise_id)
    obj = namespace.get(ex.name, _MISSING)
    if obj is _MISSING:
        return {"error": f"the exercise cell does not define `{ex.name}`"}
    if getattr(obj, "__module__", None) != "__main__":
        where = getattr(obj, "__module__", None) or type(obj).__name__
        return {"error": f"`{ex.name}` is not defined in your exercise cell (it comes from {where})"}
    shortcut = reference_use(ex, obj, namespace)
    if shortcut:
        return {"error": f"your code uses `{shortcut}`, which is the course's reference implementation, not yours"}
    results = []
    for case in ex.cases(seed):
        try:
            results.append({"value": encode(run_case(ex, obj, case))})
        except NotImplementedError:
            results.append({"error": "not attempted (NotImplementedError)"})
        except CodecError as exc:
            results.append({"error": f"the result cannot be graded: {exc}"})
        except KeyboardInterrupt:  # the cell's time limit: the remaining cases would only run out of time too
            results.append({"error": "it ran past the time limit per cell and was interrupted"})
            break
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything, SystemExit included
            results.append({"error": f"your code raised {_describe_error(exc)}"})
    results += [{"error": "not run: an earlier case ran out of time"}] * (len(ex.cases(seed)) - len(results))
    return {"results": results}


def probe(exercise_id: str, namespace: dict, nonce: str) -> None:
    from IPython.display import publish_display_data

    payload = collect(exercise_id, namespace)
    payload.update(nonce=nonce, exercise=exercise_id)
    publish_display_data({MIME: payload})


def probe_source(exercise_id: str, nonce: str) -> str:
    """The code of the probe cell that the grader inserts after exercise ``exercise_id``."""
    return (
        "from transformer_course.grading.probe import probe as _course_probe\n"
        f"_course_probe({exercise_id!r}, globals(), {nonce!r})\n"
        "del _course_probe"
    )
