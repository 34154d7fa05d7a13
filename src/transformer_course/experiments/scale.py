"""Chapter 11's runs: one small language model, trained the same fixed number of steps with each attention.

``python -m transformer_course.experiments.scale --variant gqa2 --seed 0 --out runs/scale-gqa2-seed0.json``

Every variant is ``ScaleLM`` at the sizes of ``SIZES``, trained by ``loop.fit`` on windows of ``CONTEXT`` tokens of
running English text (``stream_task``) for ``STEPS`` steps: about five minutes of one core of the course's 2-core
machine. Only the attention changes (``VARIANTS``). A run records:

- ``valid``: validation perplexity on windows of the training length (during training: ``curve``);
- ``test.by_position``: the test text cut into windows of ``LONG`` = 4 x CONTEXT tokens, the mean loss at each
  position (nats), so that the chapter can plot what happens past the training length;
- ``test.by_length``: test perplexity over windows of 64, 256, 1,024 and 4,096 tokens;
- ``cache_numbers_per_token``: what generation keeps per token (softmax: keys and values of every layer; a window
  keeps at most window - 1 of them; linear attention a fixed state, reported as 0 per token).

The test set is read once, at the end, by every run alike: nothing is tuned here (the sizes and schedule are
chapter 10's, scaled down).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, cast

import torch

from ..data.lm_data import language_model_data
from ..models.scale_lm import ScaleBlock, ScaleLM
from ..training.loop import Settings, fit
from ..training.stream_task import StreamTask, stream, windows

__all__ = [
    "CONTEXT",
    "LENGTHS",
    "LONG",
    "SIZES",
    "STEPS",
    "VARIANTS",
    "build",
    "main",
    "perplexity_by_length",
    "write_record",
]

CONTEXT = 64  # the training windows' length
LONG = 4 * CONTEXT  # the by-position evaluation: four times the training length
LENGTHS = (64, 256, 1024, 4096)
ROWS = 16  # windows per step: 1,024 predicted tokens
STEPS = 1400  # 0.21 s a step on one idle core: about five minutes
EVAL_EVERY = 350
SIZES: dict[str, Any] = dict(d_model=128, n_heads=8, n_layers=3, d_ff=512)
SCHEDULE: dict[str, Any] = dict(peak_lr=2e-3, warmup=150)
VOCAB = 8000

VARIANTS: dict[str, dict[str, Any]] = {
    "mha": {},  # chapter 10's attention: 8 heads, sinusoidal positions
    "gqa2": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "rope": {"position": "rope"},
    "alibi": {"position": "alibi"},
    "window16": {"position": "rope", "window": 16},
    "linear": {"attention": "linear", "position": "none"},
}


def build(variant: str, seed: int = 0) -> ScaleLM:
    """The variant's model, its initial weights drawn from ``seed``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    torch.manual_seed(seed)
    return ScaleLM(VOCAB, **SIZES, **VARIANTS[variant])


@torch.no_grad()
def mean_nll(model: ScaleLM, tokens: torch.Tensor, length: int, rows: int = 16) -> torch.Tensor:
    """The mean next-token loss at each position of ``length``-token windows of the stream, (length,)."""
    model.eval()
    cut = windows(tokens, length + 1)  # (N, length + 1)
    total = torch.zeros(length, dtype=torch.float64)
    for i in range(0, len(cut), rows):
        total += model.nll(cut[i : i + rows]).double().sum(0)
    return total / len(cut)


def perplexity_by_length(model: ScaleLM, tokens: torch.Tensor) -> dict[str, float]:
    return {str(n): math.exp(mean_nll(model, tokens, n, rows=max(1, 4096 // n)).mean().item()) for n in LENGTHS}


def cache_numbers_per_token(model: ScaleLM) -> int:
    attn = cast(ScaleBlock, model.layers[0]).attn
    if attn.attention == "linear":
        return 0
    return 2 * len(model.layers) * attn.n_kv_heads * attn.d_k


def run(variant: str, seed: int, steps: int) -> dict:
    data = language_model_data(VOCAB)
    train, valid, test = stream(data.train), stream(data.valid), stream(data.test)
    model = build(variant, seed)

    def evaluate(m: ScaleLM) -> dict:
        return {"perplexity": math.exp(mean_nll(m, valid, CONTEXT).mean().item())}

    def report(history: dict) -> None:
        step, seconds, figures = history["eval"][-1]
        print(f"{variant} seed {seed} step {step}: valid perplexity {figures['perplexity']:.2f} ({seconds:.0f} s)")

    task = StreamTask(train, CONTEXT, ROWS, seed, evaluate)
    settings = Settings(steps=steps, seed=seed, eval_every_steps=EVAL_EVERY, fused_adam=False, **SCHEDULE)
    history = fit(model, task, settings, progress=False, after_eval=report)
    by_position = mean_nll(model, test, LONG)
    return {
        "variant": variant,
        "settings": {**SIZES, **SCHEDULE, **VARIANTS[variant], "context": CONTEXT, "rows": ROWS, "vocab": VOCAB},
        "parameters": sum(p.numel() for p in model.parameters()),
        "cache_numbers_per_token": cache_numbers_per_token(model),
        "steps": history["step"],
        "train_seconds": round(history["seconds"], 1),
        "train_tokens": len(train),
        "curve": [{"step": s, "seconds": round(t, 1), **f} for s, t, f in history["eval"]],
        "valid": history["eval"][-1][2],
        "test": {
            "by_position": [round(x, 5) for x in by_position.tolist()],
            "by_length": perplexity_by_length(model, test),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.time()
    out = {
        "command": "python -m transformer_course.experiments.scale " + " ".join(sys.argv[1:] if argv is None else argv),
        "threads": args.threads,
        "torch": torch.__version__,
        **run(args.variant, args.seed, args.steps),
        "wall_seconds": round(time.time() - start, 1),
    }
    write_record(out, args.out)
    return 0


def write_record(record: dict, path: Path | None) -> None:
    """A run's record as JSON: into ``path`` when given (saying so), else on standard output."""
    text = json.dumps(record, indent=1)
    if path:
        path.write_text(text + "\n")
        print(f"wrote {path}")
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
