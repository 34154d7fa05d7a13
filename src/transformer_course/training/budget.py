"""A training budget in time or in steps, and when a run must use steps.

A reader's notebook trains its five-minute models for five minutes of the clock: a slower laptop trains fewer
steps, and the run costs what the prose promises. Under test, and whenever stored outputs are made, a budget in
time would make the verdict depend on how busy the machine is. So there (``reproducible()``: ``make test``,
``make execute`` and the test suite set ``TRANSFORMER_COURSE_REPRODUCIBLE=1``) a configuration with a time
budget trains instead the steps that budget buys on the machine that made the course's stored runs, on one
thread as those runs did (``configs.STEPS_IN_BUDGET``): a busy machine is slower, never different.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .configs import STEPS_IN_BUDGET

__all__ = ["ENV", "REPRODUCIBLE_THREADS", "TOY_THREADS", "fixed_budget", "reproducible", "short_of", "torch_threads"]

ENV = "TRANSFORMER_COURSE_REPRODUCIBLE"
REPRODUCIBLE_THREADS = 1  # as the stored runs were made: one thread per run, two runs side by side on two cores
# Chapters 3 and 4's small experiments (dates, copying digits) as their stored outputs were trained: on two threads.
# The thread count decides the order in which a kernel adds numbers up, and 400 steps amplify that last digit into
# another model (runs/copy-spread.json), so under reproducible() they train on these threads whatever the kernel's.
TOY_THREADS = 2


def reproducible() -> bool:
    """Whether runs must not depend on the clock: ``$TRANSFORMER_COURSE_REPRODUCIBLE`` set to anything but 0."""
    return os.environ.get(ENV, "").strip() not in ("", "0")


def fixed_budget(name: str, config: dict) -> dict:
    """``config`` with its time budget replaced by the steps that budget buys (``STEPS_IN_BUDGET``).

    A configuration budgeted in steps comes back unchanged; one budgeted in time without a known step count is an
    error, since training it for its minutes would make the run depend on the machine."""
    if config.get("steps") or not config.get("seconds"):
        return config
    if name not in STEPS_IN_BUDGET:
        raise ValueError(
            f"configuration {name!r} has a time budget ({config['seconds']} s) and no step count for reproducible "
            f"runs: add the steps its budget buys to training.configs.STEPS_IN_BUDGET (known: {sorted(STEPS_IN_BUDGET)})"
        )
    return {**config, "steps": STEPS_IN_BUDGET[name], "seconds": None}


def short_of(history: dict, steps: int | None, seconds: float | None) -> str | None:
    """Why a trained model falls short of its budget (fewer steps, or less training time, than asked), or None.

    ``history`` is the training loop's record: its ``step`` and ``seconds`` (training time, evaluation excluded)."""
    got_steps, got_seconds = history.get("step"), history.get("seconds")
    if steps and (got_steps is None or got_steps < steps):
        return f"trained {got_steps} steps of the {steps} asked for"
    if not steps and seconds and (got_seconds is None or got_seconds < seconds):
        return f"trained {got_seconds if got_seconds is None else round(got_seconds)} s of the {seconds:g} s asked for"
    return None


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """PyTorch's intra-op threads set to ``threads`` for the block (None: left as they are), then restored."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
