"""Exact checkpoints of the training loop (``loop.fit``): everything it needs to go on as if it had never stopped,
so that 10 steps, a save, and 10 more give the parameters of 20 steps, bit for bit.

A checkpoint holds the model, the optimiser (Adam's moments and step counts), the task's state (``Task.state``:
for translation the generator that orders the batches and the batches left in this pass's order), the history so
far, and the global random generators (dropout's). It is written to a temporary file and renamed, so that a run
killed while saving leaves the previous one whole.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["resume", "save"]


def save(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, task: Any, history: dict) -> None:
    """Write the checkpoint of a run of ``fit``; ``task`` is its ``tasks.Task``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "task": task.state(),
        "history": history,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    torch.save(state, tmp)
    tmp.replace(path)


def resume(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, task: Any) -> dict:
    """Load a checkpoint into the model, the optimiser, the task and the global random generators; returns the
    history so far."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    # A checkpoint written before tasks kept the translation task's generator and order at the top.
    task.load_state(saved["task"] if "task" in saved else {"generator": saved["generator"], "order": saved["order"]})
    torch.set_rng_state(saved["rng"]["torch"])
    random.setstate(saved["rng"]["python"])
    return saved["history"]
