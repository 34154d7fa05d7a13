"""Training steps per second of a configuration, on real Tatoeba batches: what fixes a step budget.

    .venv/bin/python tests/benchmarks/steps_per_second.py transformer-ref 2   # two threads, on an idle machine

20 warm-up steps (the first steps allocate), then 150 timed steps of the batches the configuration trains on;
prints wall-clock steps and target tokens per second, and steps per CPU-second. The reference models' budgets
(instructor guide, "The reference models") are an hour of this rate on two threads.
"""

import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from transformer_course.configs import CONFIGS  # noqa: E402
from transformer_course.training import Settings, fit  # noqa: E402
from transformer_course.translation import build_model, load_data  # noqa: E402


def main(name: str, threads: int) -> None:
    torch.set_num_threads(threads)
    cfg = CONFIGS[name]
    data = load_data(cfg["max_tokens"])
    fit(build_model(cfg, len(data.tokenizer)), data.train[:20], Settings(steps=20, peak_lr=1e-4, warmup=10),
        progress=False)
    model = build_model(cfg, len(data.tokenizer))
    wall, cpu = time.perf_counter(), time.process_time()
    history = fit(model, data.train[100:], Settings(steps=150, peak_lr=cfg["peak_lr"], warmup=cfg["warmup"]),
                  progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"config": name, "threads": threads, "steps_per_s": history["step"] / wall,
                      "steps_per_cpu_s": history["step"] / cpu, "tokens_per_s": history["tokens"] / wall}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
