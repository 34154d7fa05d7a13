"""The one training loop of the course (``fit``): Adam with the warm-up then inverse-square-root schedule,
gradient clipping, a step or time budget, evaluations on a schedule, exact checkpoints and DistributedDataParallel.

What it trains on is a task (``tasks.Task``): the next batch, the loss of a batch, the held-out score. The
translation models (chapters 4, 8 and 9) give a list of batches, which becomes a ``tasks.TranslationTask``;
chapter 10's language models give theirs (``lm_tasks``). This module also holds the schedule, the device, and
the translation loss (``label_smoothed_loss``, from ``tasks``) that chapter 8's exercises grade.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from . import checkpoints
from .tasks import Task, TranslationTask, label_smoothed_loss

__all__ = [
    "Settings",
    "Task",
    "TranslationTask",
    "fit",
    "inverse_sqrt_lr",
    "label_smoothed_loss",
    "noam_lr",
    "pick_device",
]


# The schedule ----------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The schedule of "Attention is all you need": factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    It rises linearly for ``warmup`` steps, peaks at factor / sqrt(d_model * warmup), then decays as
    1 / sqrt(step). Steps count from 1.
    """
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup count from 1, got step={step}, warmup={warmup}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def inverse_sqrt_lr(step: int, peak: float, warmup: int) -> float:
    """The same shape as ``noam_lr``, named by its peak: peak * min(step / warmup, sqrt(warmup / step))."""
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup count from 1, got step={step}, warmup={warmup}")
    return peak * min(step / warmup, math.sqrt(warmup / step))


# The device -------------------------------------------------------------------------------------


def pick_device(name: str | None = None) -> torch.device:
    """``name`` if given ('cpu', 'cuda', 'mps'), else CUDA, then Apple's MPS, then the CPU."""
    if name:
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"device {name!r} was asked for, but PyTorch sees no CUDA GPU")
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# The loop ---------------------------------------------------------------------------------------


@dataclass
class Settings:
    """How to train. Stop after ``steps`` updates or ``seconds`` of training (evaluation excluded), whichever first."""

    steps: int | None = None
    seconds: float | None = None
    peak_lr: float = 1e-3
    warmup: int = 400
    smoothing: float = 0.1  # the translation task's label smoothing (a list of batches becomes a TranslationTask)
    clip: float = 1.0
    seed: int = 0  # the translation task's batch order
    eval_every_steps: int = 0  # evaluate every so many steps (0: never) ...
    eval_every_seconds: float = 0.0  # ... or every so many seconds of training (0: never)
    bf16: bool = True  # bf16 autocast, on a CUDA device only
    # A wall-clock time (time.time()) at which training stops whatever its budget, evaluations included: a run
    # with one overall deadline (transformer_course.gpu) ends in time and keeps what it trained.
    deadline: float | None = None
    betas: tuple[float, float] = (0.9, 0.98)
    # Adam's fused kernel on a CPU or CUDA device: on 2 CPU cores the default (foreach) update cost the Bahdanau model
    # 8 % of each step. Its sums run in another order, so the parameters differ in the last bits: chapter 10's
    # trainers keep PyTorch's default (False), with which their stored runs were made.
    fused_adam: bool = True
    extra: dict = field(default_factory=dict)  # free-form, kept with the checkpoint

    @classmethod
    def from_config(cls, config, **loop) -> Settings:
        """The settings of a typed configuration (``base_config.RunConfig``: its budget and schedule, and a translation
        model's smoothing), with the loop's own (``seed``, the evaluation schedule, ``deadline``, ...) as keywords."""
        return cls(
            steps=config.steps,
            seconds=config.seconds,
            peak_lr=config.peak_lr,
            warmup=config.warmup,
            smoothing=getattr(config, "smoothing", cls.smoothing),
            **loop,
        )

    def __post_init__(self) -> None:
        if self.steps is None and self.seconds is None:
            raise ValueError("give a budget: steps, seconds, or both")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be positive, got {self.steps}")
        if self.seconds is not None and self.seconds <= 0:
            raise ValueError(f"seconds must be positive, got {self.seconds}")


def fit(
    model: nn.Module,
    task: Task | Sequence,
    settings: Settings,
    evaluate: Callable[[nn.Module], Any] | None = None,
    checkpoint: str | Path | None = None,
    device: torch.device | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    after_eval: Callable[[dict], None] | None = None,
) -> dict:
    """Train ``model`` on ``task`` (a ``tasks.Task``, or a list of translation batches: a ``TranslationTask`` cycles
    them in an order drawn from ``settings.seed``, anew at each pass) until the budget of ``settings`` is spent.

    Each step: the learning rate of the warm-up then inverse-square-root schedule peaking at ``settings.peak_lr``,
    the task's loss, backward, gradient clipping, Adam (betas 0.9, 0.98).

    - ``evaluate(model) -> score`` (default: the task's) is called in eval mode on the schedule of the settings
      (and at the end); its time does not count towards the budget. ``after_eval(history)`` is called after each
      evaluation (a run that writes its results as it goes, so that one cut short keeps its curve).
    - ``settings.deadline``: at that wall-clock time the loop stops, and evaluates once more if it trained since
      its last evaluation, whatever the budget left.
    - ``checkpoint``: the state (model, optimizer, step, the task's batch order and generators, the random
      generators, history) is saved there at the end and resumed from when the file exists, so that 10 + 10 steps
      give exactly the parameters of 20 steps.
    - Under ``torchrun`` (torch.distributed initialised by the caller, the model wrapped in
      DistributedDataParallel), the processes' gradients are averaged: the task gives each process its own batch.

    Returns the history: {'loss': [...], 'lr': [...], 'eval': [(step, seconds, score)], 'step', 'seconds',
    'tokens' (target tokens seen, all processes), 'device'}.
    """
    device = device or next(model.parameters()).device
    rank, world = _world()
    if not isinstance(task, Task):  # a list of translation batches, as chapters 4 to 9 give them
        use_bf16 = settings.bf16 and device.type == "cuda"
        task = TranslationTask(task, settings.seed, settings.smoothing, device, use_bf16, rank, world)
    run = _Run(model, task, settings, device, evaluate or task.evaluate, log, after_eval)
    run.resume(checkpoint)
    start_step = run.history["step"]
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=settings.steps, initial=start_step, unit="step", dynamic_ncols=True)
    model.train()
    while not run.budget_spent():
        loss = run.step()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        if run.evaluation_due():
            run.evaluate()
    if bar is not None:
        bar.close()
    run.finish(checkpoint)
    run.history["trained_steps_this_call"] = run.history["step"] - start_step
    return run.history


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _Run:
    """One call of ``fit``: the model, its optimiser, the task, the history so far and the evaluation clock."""

    def __init__(
        self,
        model: nn.Module,
        task: Task,
        settings: Settings,
        device: torch.device,
        evaluate: Callable[[nn.Module], Any] | None,
        log: Callable[[str], None] | None,
        after_eval: Callable[[dict], None] | None,
    ) -> None:
        self.model, self.task, self.settings = model, task, settings
        # The model inside DDP: its .module, which torch types Tensor | Module (any attribute of a module).
        self.core: nn.Module = model.module if hasattr(model, "module") else model  # type: ignore[assignment]
        self.rank, self.world = _world()
        self.evaluate_fn, self.log, self.after_eval = evaluate, log, after_eval
        fused = settings.fused_adam and device.type in ("cpu", "cuda")
        # fused=None, not False: PyTorch's default, as chapter 10's trainers created their Adam
        self.optimizer = torch.optim.Adam(
            model.parameters(), lr=settings.peak_lr, betas=settings.betas, eps=1e-9, fused=fused or None
        )
        self.history: dict = {"loss": [], "lr": [], "eval": [], "step": 0, "seconds": 0.0, "tokens": 0}
        self.history.update(device=str(device), world_size=self.world, settings=asdict(settings))
        self.next_eval = math.inf  # the training time of the next evaluation on the clock

    def resume(self, checkpoint: str | Path | None) -> None:
        """Go on from the checkpoint if there is one, and set the evaluation clock from the training time so far."""
        if checkpoint is not None and Path(checkpoint).is_file():
            self.history = checkpoints.resume(checkpoint, self.core, self.optimizer, self.task)
        every = self.settings.eval_every_seconds
        self.next_eval = (self.history["seconds"] // every + 1) * every if every else math.inf

    def budget_spent(self) -> bool:
        """Are the steps done, or has the budget of seconds (training time) or the deadline (wall clock) run out?
        Rank 0's clock decides, so that every process stops together."""
        settings, trained = self.settings, self.history["seconds"]
        if settings.steps is not None and self.history["step"] >= settings.steps:
            return True
        if settings.seconds is None and settings.deadline is None:
            return False
        late = settings.deadline is not None and time.time() >= settings.deadline
        out_of_time = torch.tensor(float(late or (settings.seconds is not None and trained >= settings.seconds)))
        if self.world > 1:
            dist.broadcast(out_of_time, src=0)
        return bool(out_of_time.item())

    def step(self) -> float:
        """One update: the next batch, its loss, backward, clipping, Adam. -> the loss."""
        history, settings, optimizer = self.history, self.settings, self.optimizer
        step = history["step"] + 1
        t0 = time.perf_counter()
        batch, tokens = self.task.next_batch()
        for group in optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(step, settings.peak_lr, settings.warmup)
        loss = self.task.loss(self.model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if settings.clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), settings.clip)
        optimizer.step()
        loss_value = loss.item()  # synchronises: the clock is honest
        history["seconds"] += time.perf_counter() - t0
        history["loss"].append(loss_value)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["step"] = step
        history["tokens"] += tokens
        return loss_value

    def evaluation_due(self) -> bool:
        """Is an evaluation due after this step, by steps or by training time? Moves the clock past it."""
        settings, history = self.settings, self.history
        by_steps = bool(settings.eval_every_steps) and history["step"] % settings.eval_every_steps == 0
        due = by_steps or history["seconds"] >= self.next_eval
        while self.next_eval <= history["seconds"]:
            self.next_eval += settings.eval_every_seconds
        return due

    def evaluate(self) -> None:
        """Score the model in eval mode (the first process only; the others train on) and record it."""
        if self.evaluate_fn is None or self.rank != 0:
            return
        self.model.eval()
        score = self.evaluate_fn(self.core)
        self.model.train()
        history = self.history
        history["eval"].append((history["step"], round(history["seconds"], 3), score))
        if self.log is not None:
            loss = f"{history['loss'][-1]:.3f}" if history["loss"] else "-"
            shown = f"{score:.2f}" if isinstance(score, int | float) else str(score)
            self.log(f"step {history['step']:6d}  {history['seconds']:7.1f} s  loss {loss}  score {shown}")
        if self.after_eval is not None:
            self.after_eval(history)

    def finish(self, checkpoint: str | Path | None) -> None:
        """Evaluate once more if the model trained since the last evaluation, then save the checkpoint."""
        evaluations = self.history["eval"]
        if self.evaluate_fn is not None and (not evaluations or evaluations[-1][0] != self.history["step"]):
            self.evaluate()
        self.model.eval()
        if checkpoint is not None and self.rank == 0:
            checkpoints.save(checkpoint, self.core, self.optimizer, self.task, self.history)
