"""Exact checkpoints of the training loop (``training.fit``): everything it needs to go on as if it had never
stopped, so that 10 steps, a save, and 10 more give the parameters of 20 steps, bit for bit.

A checkpoint holds the model, the optimiser (Adam's moments and step counts), the generator that orders the
batches, the batches left in this epoch's order, the history so far, and the global random generators (dropout's).
It is written to a temporary file and renamed, so that a run killed while saving leaves the previous one whole.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch
from torch import nn

__all__ = ["resume", "save"]


def save(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    order: list[int],
    history: dict,
) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "order": order,
        "history": history,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    torch.save(state, tmp)
    tmp.replace(path)


def resume(
    path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> tuple[list[int], dict]:
    """Load a checkpoint into the model, the optimiser, the generator and the global random generators; returns
    (the batches left in this epoch's order, the history so far)."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    generator.set_state(saved["generator"])
    torch.set_rng_state(saved["rng"]["torch"])
    random.setstate(saved["rng"]["python"])
    return saved["order"], saved["history"]
