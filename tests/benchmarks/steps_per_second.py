"""Training steps per second of a configuration, on real Tatoeba batches: what fixes a step budget.

    .venv/bin/python tests/benchmarks/steps_per_second.py transformer-ref 2   # two threads, on an idle machine

20 warm-up steps (the first steps allocate), then 150 timed steps of the batches the configuration trains on;
prints wall-clock steps and target tokens per second, and steps per CPU-second. The reference models' budgets
(book/instructor/models.md, "The reference models") are an hour of this rate on two threads.
"""

import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from transformer_course.experiments.translation import VOCAB_SIZE, load_data
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model
from transformer_course.training.loop import Settings, fit


def timed_steps(cfg: dict, steps: int, warmup: tuple[int, int], first_batch: int = 0) -> tuple[dict, float, float]:
    """(history, wall seconds, CPU seconds) of ``steps`` training steps of a fresh model of ``cfg`` on its real
    batches from ``first_batch`` on, after a warm-up of another fresh model (the first steps allocate):
    ``warmup`` = (its batches, its steps). Also the cost of a step that tests/benchmarks/sweep.py measures."""
    data = load_data(cfg["max_tokens"], vocab_size=cfg.get("vocab", VOCAB_SIZE))
    batches, warm_steps = warmup
    fit(
        build_model(cfg, len(data.tokenizer)),
        data.train[:batches],
        Settings(steps=warm_steps, peak_lr=1e-4, warmup=10),
        progress=False,
    )
    model = build_model(cfg, len(data.tokenizer))
    wall, cpu = time.perf_counter(), time.process_time()
    history = fit(
        model,
        data.train[first_batch:],
        Settings(steps=steps, peak_lr=cfg["peak_lr"], warmup=cfg["warmup"]),
        progress=False,
    )
    return history, time.perf_counter() - wall, time.process_time() - cpu


def main(name: str, threads: int) -> None:
    torch.set_num_threads(threads)
    history, wall, cpu = timed_steps(CONFIGS[name], 150, warmup=(20, 20), first_batch=100)
    print(
        json.dumps(
            {
                "config": name,
                "threads": threads,
                "steps_per_s": history["step"] / wall,
                "steps_per_cpu_s": history["step"] / cpu,
                "tokens_per_s": history["tokens"] / wall,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
