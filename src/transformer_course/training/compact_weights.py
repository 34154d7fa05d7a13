"""Trained weights in fewer bytes: float16, or int8 with one scale per row, for a model stored with the course.

The GPU run (``transformer_course.gpu``) brings its Transformer back in at most 16 MiB, and the repository must stay
small enough to travel to the GPU machine again, so its weights are stored compactly, and so are the hour-long GRU
reference model's (``python -m transformer_course.reference compact bahdanau-ref``):

- ``float32``: as trained;
- ``float16``: every floating-point tensor in half precision (2 bytes a number);
- ``int8``: every weight matrix (2 dimensions, at least ``INT8_MIN_SIZE`` numbers) as int8 with one float32 scale per
  row, w[i, j] ~ scale[i] * q[i, j] with q in [-127, 127] and scale[i] = max_j |w[i, j]| / 127 (1 byte a number);
  biases and LayerNorm parameters, a few thousand numbers, stay float32.

A tensor that several names share (the tied embeddings and output layer of the Transformer) is stored once. The
file is a plain dict of tensors and strings, read with ``torch.load(..., weights_only=True)``; ``expand`` turns it
back into a float32 state dict. How much a form costs in BLEU is measured, not assumed: the GPU run scores the
rounded weights on the validation set before it chooses a form (``rounded_copy``), and ``reference compact`` records
the stored form's validation and test BLEU beside the trained model's.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import torch
from torch import Tensor, nn

__all__ = [
    "FORMAT",
    "FORMS",
    "INT8_MIN_SIZE",
    "compact",
    "expand",
    "is_compact",
    "load_state",
    "rounded_copy",
    "save_compact",
]

FORMAT = "transformer_course compact weights 1"
FORMS = ("float32", "float16", "int8")
INT8_MIN_SIZE = 4096  # smaller matrices gain little and stay float32


def _key(t: Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


def compact(state: dict[str, Tensor], form: str) -> dict:
    """A state dict (float32 tensors, on any device) as a compact blob of the given form (see the module)."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    tensors: dict[str, Tensor] = {}
    scales: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for name, t in state.items():
        key = _key(t)
        if key in seen:  # the same tensor under a second name: store it once
            aliases[name] = seen[key]
            continue
        seen[key] = name
        t = t.detach().cpu()
        if not t.is_floating_point() or form == "float32":
            tensors[name] = t.clone()
        elif form == "float16":
            tensors[name] = t.to(torch.float16)
        elif t.dim() == 2 and t.numel() >= INT8_MIN_SIZE:
            w = t.to(torch.float32)
            scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (rows,)
            tensors[name] = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
            scales[name] = scale
        else:
            tensors[name] = t.to(torch.float32)
    return {"format": FORMAT, "form": form, "tensors": tensors, "scales": scales, "aliases": aliases}


def save_compact(state: dict[str, Tensor], form: str, path: str | Path) -> str:
    """Write ``compact(state, form)`` to ``path``; return the file's SHA-256, which a stored run records."""
    torch.save(compact(state, form), path)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_compact(blob: object) -> bool:
    return isinstance(blob, dict) and blob.get("format") == FORMAT


def expand(blob: dict) -> dict[str, Tensor]:
    """The float32 state dict of a compact blob (names in the order ``compact`` met them, aliases included)."""
    if not is_compact(blob):
        raise ValueError(f"not a file of compact weights (expected format {FORMAT!r})")
    state: dict[str, Tensor] = {}
    for name, t in blob["tensors"].items():
        if name in blob["scales"]:
            state[name] = t.to(torch.float32) * blob["scales"][name][:, None]
        else:
            state[name] = t.to(torch.float32) if t.is_floating_point() else t
    for name, target in blob["aliases"].items():
        state[name] = state[target]
    return state


def load_state(path: str | Path) -> dict[str, Tensor]:
    """A state dict from a file: plain (torch.save of a state dict) or compact; float32 either way."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    return expand(blob) if is_compact(blob) else blob


def rounded_copy(model: nn.Module, form: str) -> nn.Module:
    """A copy of ``model`` whose weights went through ``compact`` and back: what a file of that form gives."""
    twin = copy.deepcopy(model)
    twin.load_state_dict(expand(compact(model.state_dict(), form)))
    return twin
