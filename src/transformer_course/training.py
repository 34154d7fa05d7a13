"""Training translation models (chapters 4, 8 and 9): the loss, the learning-rate schedule, the device,
and a loop with a step or time budget, exact checkpoints and DistributedDataParallel.

A model takes ``model(src, src_mask, tgt)`` and returns logits (B, T_y, V) (or a tuple whose first
item is the logits), with ``tgt`` the targets followed by <eos>: the model shifts them right itself
(<bos> first), so every model of the course trains with the same loop.

Shapes: B batch, T_x source length, T_y target length, V target vocabulary size. Masks are boolean,
True at real tokens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

from . import checkpoints

__all__ = [
    "Settings",
    "fit",
    "inverse_sqrt_lr",
    "label_smoothed_loss",
    "noam_lr",
    "pick_device",
]


# The loss and the schedule ----------------------------------------------------------------------


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
    smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 0
    eval_every_steps: int = 0  # evaluate every so many steps (0: never) ...
    eval_every_seconds: float = 0.0  # ... or every so many seconds of training (0: never)
    bf16: bool = True  # bf16 autocast, on a CUDA device only
    # A wall-clock time (time.time()) at which training stops whatever its budget, evaluations included: a run
    # with one overall deadline (transformer_course.gpu) ends in time and keeps what it trained.
    deadline: float | None = None
    betas: tuple[float, float] = (0.9, 0.98)
    extra: dict = field(default_factory=dict)  # free-form, kept with the checkpoint

    @classmethod
    def from_config(cls, config, **loop) -> Settings:
        """The settings of a typed configuration (``models.typed``: its budget, schedule and smoothing), with the
        loop's own (``seed``, the evaluation schedule, ``deadline``, ``bf16``) given as keywords."""
        return cls(
            steps=config.steps,
            seconds=config.seconds,
            peak_lr=config.peak_lr,
            warmup=config.warmup,
            smoothing=config.smoothing,
            **loop,
        )

    def __post_init__(self) -> None:
        if self.steps is None and self.seconds is None:
            raise ValueError("give a budget: steps, seconds, or both")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be positive, got {self.steps}")
        if self.seconds is not None and self.seconds <= 0:
            raise ValueError(f"seconds must be positive, got {self.seconds}")


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _out_of_time(settings: Settings, trained: float, world: int) -> bool:
    """Has the budget of seconds (training time) or the deadline (wall clock) run out? Rank 0's clock decides, so
    that every process stops together."""
    if settings.seconds is None and settings.deadline is None:
        return False
    late = settings.deadline is not None and time.time() >= settings.deadline
    out_of_time = torch.tensor(float(late or (settings.seconds is not None and trained >= settings.seconds)))
    if world > 1:
        dist.broadcast(out_of_time, src=0)
    return bool(out_of_time.item())


def _step(model: nn.Module, optimizer, batch, settings: Settings, use_bf16: bool) -> Tensor:
    """One update: forward (bf16 autocast on a GPU), label-smoothed loss, backward, clipping, Adam. -> the loss."""
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_bf16):
        out = model(batch.src, batch.src_mask, batch.tgt)
    logits = out[0] if isinstance(out, tuple) else out
    loss = label_smoothed_loss(logits, batch.tgt, batch.tgt_mask, settings.smoothing)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if settings.clip:
        nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
    optimizer.step()
    return loss


def fit(
    model: nn.Module,
    batches: Sequence,
    settings: Settings,
    evaluate: Callable[[nn.Module], float] | None = None,
    checkpoint: str | Path | None = None,
    device: torch.device | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    after_eval: Callable[[dict], None] | None = None,
) -> dict:
    """Train ``model`` on ``batches`` (a list of data.Batch, cycled in a seeded random order, reshuffled each epoch).

    Adam (betas 0.9, 0.98) with the warm-up then inverse-square-root schedule peaking at
    ``settings.peak_lr``, label-smoothed cross-entropy over the real target tokens, gradient clipping.

    - ``evaluate(model) -> score`` is called in eval mode on the schedule of the settings (and at the end);
      its time does not count towards the budget. ``after_eval(history)`` is called after each evaluation
      (a run that writes its results as it goes, so that one cut short keeps its curve).
    - ``settings.deadline``: at that wall-clock time the loop stops, and evaluates once more if it trained since
      its last evaluation, whatever the budget left.
    - ``checkpoint``: the state (model, optimizer, step, batch order, random generators, history) is
      saved there at the end and resumed from when the file exists, so that 10 + 10 steps give exactly
      the parameters of 20 steps.
    - Under ``torchrun`` (torch.distributed initialised by the caller, the model wrapped in
      DistributedDataParallel), rank r takes batch r of every group of ``world_size``: each step sees
      world_size batches, and the gradients are averaged across processes.

    Returns the history: {'loss': [...], 'lr': [...], 'eval': [(step, seconds, score)], 'step', 'seconds',
    'tokens' (target tokens seen, all processes), 'device'}.
    """
    rank, world = _world()
    device = device or next(model.parameters()).device
    # The model inside DDP: its .module, which torch types Tensor | Module (any attribute of a module).
    core: nn.Module = model.module if hasattr(model, "module") else model  # type: ignore[assignment]
    # fused: one kernel updates every parameter tensor; on 2 CPU cores the default (foreach) update cost the
    # Bahdanau model 8 % of each step.
    optimizer = torch.optim.Adam(
        model.parameters(), lr=settings.peak_lr, betas=settings.betas, eps=1e-9, fused=device.type in ("cpu", "cuda")
    )
    generator = torch.Generator().manual_seed(settings.seed)
    history: dict = {
        "loss": [],
        "lr": [],
        "eval": [],
        "step": 0,
        "seconds": 0.0,
        "tokens": 0,
        "device": str(device),
        "world_size": world,
        "settings": asdict(settings),
    }
    order: list[int] = []
    if checkpoint is not None and Path(checkpoint).is_file():
        order, history = checkpoints.resume(checkpoint, core, optimizer, generator)
    use_bf16 = settings.bf16 and device.type == "cuda"
    n_batches = len(batches) - len(batches) % world  # every process takes the same number of batches
    if n_batches < world:
        raise ValueError(f"{len(batches)} batches cannot be shared among {world} processes")

    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=settings.steps, initial=history["step"], unit="step", dynamic_ncols=True)
    start_step, trained = history["step"], history["seconds"]
    next_eval = (
        (trained // settings.eval_every_seconds + 1) * settings.eval_every_seconds
        if settings.eval_every_seconds
        else math.inf
    )

    def run_eval() -> None:
        if evaluate is None or rank != 0:  # only the first process evaluates; the others train on
            return
        model.eval()
        score = evaluate(core)
        model.train()
        history["eval"].append((history["step"], round(trained, 3), score))
        if log and rank == 0:
            loss = f"{history['loss'][-1]:.3f}" if history["loss"] else "-"
            log(f"step {history['step']:6d}  {trained:7.1f} s  loss {loss}  score {score:.2f}")
        if after_eval is not None:
            after_eval(history)

    model.train()
    while True:
        step = history["step"] + 1
        if settings.steps is not None and step > settings.steps:
            break
        if _out_of_time(settings, trained, world):
            break
        t0 = time.perf_counter()
        if len(order) < world:
            order = torch.randperm(n_batches, generator=generator).tolist()
        picked = [order.pop() for _ in range(world)]
        batch = batches[picked[rank]].to(device)
        for group in optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(step, settings.peak_lr, settings.warmup)
        loss_value = _step(model, optimizer, batch, settings, use_bf16).item()  # synchronises: the clock is honest
        trained += time.perf_counter() - t0
        history["loss"].append(loss_value)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["step"], history["seconds"] = step, trained
        history["tokens"] += sum(int(batches[i].tgt_mask.sum()) for i in picked)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        if (settings.eval_every_steps and step % settings.eval_every_steps == 0) or trained >= next_eval:
            run_eval()
            while next_eval <= trained:
                next_eval += settings.eval_every_seconds
    if bar is not None:
        bar.close()
    if evaluate is not None and (not history["eval"] or history["eval"][-1][0] != history["step"]):
        run_eval()
    model.eval()
    if checkpoint is not None and rank == 0:
        checkpoints.save(checkpoint, core, optimizer, generator, order, history)
    history["trained_steps_this_call"] = history["step"] - start_step
    return history
