"""The training step compiled: ``torch.compile`` (TorchDynamo traces the model's forward, Inductor fuses its
element-wise work into generated C++ on a CPU, Triton kernels on a GPU), behind the trainer's ``--compile``.

A translation batch's shape changes from one batch to the next (token-count batches: many short sentences or a few
long ones), so the model is compiled with dynamic shapes: one graph serves every batch, instead of a compilation
per shape. Only the training forward (and its backward) is compiled; decoding, which runs step by step with a
key/value cache, stays eager. The compiled module shares its parameters with the model, so the optimiser, the
checkpoints and the evaluations see the same weights. ``tests/benchmarks/compiled_step.py`` measures what it buys.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["compile_model"]


def compile_model(model: nn.Module, dynamic: bool = True) -> nn.Module:
    """``model`` compiled for training; the first steps pay the compilation (tens of seconds on a CPU)."""
    # Packing (chapter 8) keeps the real tokens with nonzero(), whose output size depends on the data: let the
    # graph hold it (as an unbacked size) instead of breaking there.
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    return torch.compile(model, dynamic=dynamic)  # type: ignore[return-value]
