"""The on-disk model cache: a model trained once by a notebook is loaded by every later run that asks for
the same configuration, data and code.

The key is a digest of the configuration, the data's fingerprint, the source of the code the caller names
(the modules that build and train the model: nothing else, so that editing one chapter does not retrain
another chapter's models) and the PyTorch version. An entry records the steps its model trained, and one that
got less than its budget is trained again (``budget.short_of``).
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from ..repository import cache_dir
from .budget import short_of

__all__ = ["cache_dir", "cached_training", "code_fingerprint"]


def code_fingerprint(code: tuple[ModuleType, ...]) -> str:
    """A digest of the source of the modules in ``code``, in the order given."""
    if not code:
        raise ValueError("name the modules that build and train the model: the cache key needs their source")
    h = hashlib.sha256()
    for module in code:
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def cached_training(
    name: str,
    config: dict,
    data_fingerprint: str,
    build: Callable[[], nn.Module],
    fit: Callable[[nn.Module], dict],
    code: tuple[ModuleType, ...],
    steps: int | None = None,
    seconds: float | None = None,
) -> tuple[nn.Module, dict, bool]:
    """Train ``build()`` with ``fit``, or load it from the cache when the same config, data and code trained it before.

    ``code``: the modules whose source makes and trains the model. ``steps`` or ``seconds``: the budget the model
    was promised; an entry that got less (``fit``'s history records its ``step`` and ``seconds``) is never served:
    it is trained again, and a line on standard error says why. Returns (model, history, loaded) where ``loaded``
    says whether the cache answered.
    """
    key_text = json.dumps(
        {"config": config, "data": data_fingerprint, "code": code_fingerprint(code), "torch": torch.__version__},
        sort_keys=True,
    )
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{key}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    # One process trains, the others wait for it: two notebooks that need the same model (nbval runs
    # them in parallel) must not both spend minutes training it.
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _load_or_train(path, config, build, fit, steps, seconds)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load_or_train(
    path: Path,
    config: dict,
    build: Callable[[], nn.Module],
    fit: Callable[[nn.Module], dict],
    steps: int | None,
    seconds: float | None,
) -> tuple[nn.Module, dict, bool]:
    model = build()
    if path.is_file():
        try:
            saved = torch.load(path, map_location="cpu", weights_only=False)
        except Exception:  # noqa: BLE001 - a damaged cache entry, however it fails: train again and overwrite it
            saved = None
        short = short_of(saved["history"], steps, seconds) if isinstance(saved, dict) and "history" in saved else None
        if short:
            print(f"the cached model {path.name} {short}: training it again", file=sys.stderr)
        elif isinstance(saved, dict):
            try:
                model.load_state_dict(saved["state"])
                model.eval()
                return model, saved["history"], True
            except Exception:  # noqa: BLE001 - weights that do not fit the model: train again and overwrite them
                model = build()
    history = fit(model)
    short = short_of(history, steps, seconds)
    if short:  # stopped early (a deadline, an interrupted loop): use it, but never keep it for a later run
        model.eval()
        return model, history, False
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"state": model.state_dict(), "history": history, "config": config, "steps": history.get("step")}, tmp)
    tmp.replace(path)
    model.eval()
    return model, history, False
