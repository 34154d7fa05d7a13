"""What ``loop.fit`` trains on: the task interface, and the translation task (chapters 4, 8 and 9).

A task gives the next batch and the loss of a batch, and may score the model; ``fit`` does the rest, the same for
every model of the course: the schedule, Adam, clipping, the budget, the evaluations, the checkpoints. A task also
hands its state to a checkpoint (the batch order, its generators), so that a resumed run goes on exactly.
Chapter 10's tasks (a language model's next-token loss, a masked language model's) are in ``lm_tasks``.

Shapes: B batch, T_x source length, T_y target length, V target vocabulary size. Masks are boolean, True at real
tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

__all__ = ["Task", "TranslationTask", "label_smoothed_loss"]


@runtime_checkable
class Task(Protocol):
    """What ``fit`` trains on: where the batches come from, the loss of one, and the held-out score."""

    # The held-out score, called in eval mode on the model itself (not its DistributedDataParallel wrapper): a number,
    # or a dict of figures. None: the task has none (fit's ``evaluate`` may give one).
    evaluate: Callable[[nn.Module], Any] | None

    def next_batch(self) -> tuple[Any, int]:
        """The batch of the next step (this process's, under torchrun), on the model's device, and the number of
        target tokens the step learns from (all processes')."""
        ...

    def loss(self, model: nn.Module, batch: Any) -> Tensor:
        """The scalar loss of a batch: what ``fit`` differentiates."""
        ...

    def state(self) -> dict:
        """What a checkpoint keeps of the task to go on exactly: the batch order, the generators."""
        ...

    def load_state(self, state: dict) -> None:
        """Go on from a checkpoint's ``state()``."""
        ...


def label_smoothed_loss(logits: Tensor, targets: Tensor, mask: Tensor, smoothing: float = 0.1) -> Tensor:
    """Mean label-smoothed cross-entropy over the real target tokens.

    The target distribution puts 1 - smoothing on the right token and spreads ``smoothing`` evenly
    over all V tokens (the right one included), as ``F.cross_entropy(label_smoothing=...)`` does.
    logits (B, T, V), targets (B, T) int64, mask (B, T) bool -> scalar
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if logits.shape[:-1] != targets.shape or targets.shape != mask.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} plus a vocabulary "
            f"axis, and the mask {tuple(mask.shape)} the shape of the targets"
        )
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the softmax of a 16-bit autocast output is taken in 32 bits
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    uniform = -log_probs.mean(dim=-1)  # (B, T): cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    weights = mask.to(loss.dtype)
    return (loss * weights).sum() / weights.sum().clamp(min=1.0)


class TranslationTask:
    """Translation batches (``data.Batch``: src, src_mask, tgt, tgt_mask), cycled in a seeded random order that is
    drawn anew at each pass, with the label-smoothed loss over the real target tokens.

    A model takes ``model(src, src_mask, tgt)`` and returns logits (B, T_y, V), or a tuple whose first item is the
    logits, with ``tgt`` the targets followed by <eos>: the model shifts them right itself (<bos> first). Under
    torchrun (``world`` processes), process ``rank`` takes batch ``rank`` of every group of ``world``: each step
    sees ``world`` batches, and the processes' gradients are averaged.
    """

    def __init__(
        self,
        batches: Sequence,
        seed: int = 0,
        smoothing: float = 0.1,
        device: torch.device | None = None,
        bf16: bool = False,
        rank: int = 0,
        world: int = 1,
        evaluate: Callable[[nn.Module], Any] | None = None,
    ) -> None:
        self.batches, self.smoothing, self.device, self.bf16 = batches, smoothing, device, bf16
        self.rank, self.world, self.evaluate = rank, world, evaluate
        self.n_batches = len(batches) - len(batches) % world  # every process takes the same number of batches
        if self.n_batches < world:
            raise ValueError(f"{len(batches)} batches cannot be shared among {world} processes")
        self.generator = torch.Generator().manual_seed(seed)  # the batch order, and nothing else
        self.order: list[int] = []  # the batches left in this pass, taken from the end

    def next_batch(self) -> tuple[Any, int]:
        if len(self.order) < self.world:
            self.order = torch.randperm(self.n_batches, generator=self.generator).tolist()
        picked = [self.order.pop() for _ in range(self.world)]
        batch = self.batches[picked[self.rank]]
        tokens = sum(int(self.batches[i].tgt_mask.sum()) for i in picked)
        return (batch.to(self.device) if self.device is not None else batch), tokens

    def loss(self, model: nn.Module, batch: Any) -> Tensor:
        # bf16 autocast on a GPU around the forward only: the loss is taken in 32 bits (label_smoothed_loss)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=self.bf16):
            out = model(batch.src, batch.src_mask, batch.tgt)
        logits = out[0] if isinstance(out, tuple) else out  # (B, T_y, V)
        return label_smoothed_loss(logits, batch.tgt, batch.tgt_mask, self.smoothing)

    def state(self) -> dict:
        return {"generator": self.generator.get_state(), "order": self.order}

    def load_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.order = state["order"]
