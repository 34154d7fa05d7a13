"""A case's inputs as the worker receives them: plain data (the shared ``codec``), and a module that a case takes as
input (chapter 3's decoder step) as its exercise, sizes and weights, whose class the worker is sent first, built from
the course's code of an exercise graded before, never of this one. Host side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from .. import registry
from ..codec import encode
from . import sandbox
from .fallback import fallback_source

__all__ = ["call_command", "encode_case", "send_given_modules"]


def encode_case(case: registry.Case) -> dict:
    return {
        "args": _encode_input(tuple(case.args)),
        "kwargs": _encode_input(dict(case.kwargs)),
        "init": None if case.init is None else _encode_input(dict(case.init)),
        "state": None if case.state is None else _encode_input(dict(case.state)),
    }


def _encode_input(value: Any) -> Any:
    """A case input as plain data; a given module (chapter 3's decoder step) as its exercise, sizes and weights."""
    if isinstance(value, torch.nn.Module):
        # course_given: a plain attribute, (exercise, sizes), that the exercise set (ch03._given_step)
        ex_id, init = cast(tuple, value.course_given)
        return {"__given__": ex_id, "init": encode(tuple(init)), "state": encode(dict(value.state_dict()))}
    if isinstance(value, tuple) and any(isinstance(v, torch.nn.Module) for v in value):
        return {"__seq__": "tuple", "items": [_encode_input(v) for v in value]}
    return encode(value)


def send_given_modules(
    cases: list[registry.Case], worker: sandbox.Worker, root: Path, imports: str, timeout: float
) -> None:
    """Define in the worker the classes of the modules that cases take as input (built from the course's code
    of an exercise graded before, never of this one)."""
    for ex_id in dict.fromkeys(
        cast(tuple, c.course_given)[0] for case in cases for c in case.args if isinstance(c, torch.nn.Module)
    ):
        if ex_id not in worker.given:
            ex = registry.get(ex_id)
            worker.request(
                {"op": "given", "id": ex_id, "name": ex.name, "source": imports + "\n" + fallback_source(ex, root)},
                timeout,
            )
            worker.given.add(ex_id)


def call_command(ex: registry.Exercise, cases: list[registry.Case], timeout: float) -> dict:
    """The worker's command that calls the student's object on the cases, under the watch where built-ins are
    forbidden (the first run's and the witness's alike)."""
    return {
        "op": "call",
        "exercise": ex.id,
        "name": ex.name,
        "kind": ex.kind,
        "cases": [encode_case(c) for c in cases],
        "timeout": timeout,
        "forbidden": list(ex.forbidden),
        "grad": ex.judge is not None,
    }
