"""The training step compiled: ``torch.compile`` (TorchDynamo traces the model's forward, Inductor fuses its
element-wise work into generated C++ on a CPU, Triton kernels on a GPU), behind the trainer's ``--compile``.

A translation batch's shape changes from one batch to the next (token-count batches: many short sentences or a few
long ones), so the model is compiled with dynamic shapes: one graph serves every batch, instead of a compilation
per shape. Only the training forward (and its backward) is compiled; decoding, which runs step by step with a
key/value cache, stays eager. The compiled module shares its parameters with the model, so the optimiser, the
checkpoints and the evaluations see the same weights. ``tests/benchmarks/compiled_step.py`` measures what it buys.

Compiling takes tens of seconds (a minute on a fresh GPU machine), a one-off cost that would eat a short run's
budget: ``warm_up`` compiles before the trainer starts its clock, and the trainer records how long it took.
"""

from __future__ import annotations

import shutil
import time

import torch
from torch import nn

__all__ = ["can_compile", "compile_model", "shape_samples", "warm_up"]


def can_compile(device: torch.device) -> bool:
    """Can Inductor compile here? On a GPU it writes Triton kernels; on a CPU, C++, which needs a compiler."""
    return device.type == "cuda" or shutil.which("g++") is not None or shutil.which("c++") is not None


def compile_model(model: nn.Module, dynamic: bool = True) -> nn.Module:
    """``model`` compiled for training; the first steps pay the compilation (tens of seconds on a CPU)."""
    # Packing (chapter 8) keeps the real tokens with nonzero(), whose output size depends on the data: let the
    # graph hold it (as an unbacked size) instead of breaking there.
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(model, dynamic=dynamic)  # type: ignore[return-value]


def shape_samples(batches: list) -> list:
    """The shortest, a middle and the longest batch (by target tokens): enough to compile for every shape."""
    ordered = sorted(batches, key=lambda b: b.tgt.shape[1] * b.tgt.shape[0])
    return [ordered[i] for i in sorted({0, len(ordered) // 2, len(ordered) - 1})]


def warm_up(model: nn.Module, batches: list, device: torch.device, bf16: bool) -> float:
    """Compile ``model`` off the clock: a forward and a backward on each batch (the trainer gives it
    ``shape_samples``: with dynamic shapes they should all run one graph), the gradients then dropped and no step
    taken, so the weights are untouched. Returns the seconds it took."""
    from .tasks import label_smoothed_loss

    start = time.perf_counter()
    for batch in batches:
        batch = batch.to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16 and device.type == "cuda"):
            out = model(batch.src, batch.src_mask, batch.tgt)  # (B, T_y, V), or (logits, weights)
        logits = out[0] if isinstance(out, tuple) else out
        label_smoothed_loss(logits, batch.tgt, batch.tgt_mask).backward()  # the loss casts to float32 itself
        model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start
