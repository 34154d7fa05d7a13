"""Benchmark (not a test): training throughput of two checkouts of the course, alternating in one run.

    git worktree add /tmp/old <commit>
    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/training_speed_ab.py --old /tmp/old/src --new src

Each side runs in a process of its own with its own ``src`` first on the import path, and trains its own
``--config`` (as that checkout defines it) with that checkout's ``training.fit``, on the same Tatoeba batches
(``--max-tokens``, the same for both sides, so the same batches in the same order). The driver lets the two
processes take turns, ``--steps`` steps each, ``--rounds`` times, and prints the real target tokens per second of
each side (training time as ``fit`` counts it: the step, without evaluation) and the ratio new / old.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WORKER = r"""
import json, os, sys
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model
from transformer_course.experiments.translation import load_data
from transformer_course.training.loop import Settings, fit
name, max_tokens, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
cfg = CONFIGS[name]
data = load_data(max_tokens)
model = build_model(cfg, len(data.tokenizer))
def settings(n):
    return Settings(steps=n, peak_lr=cfg["peak_lr"], warmup=cfg["warmup"], smoothing=cfg.get("smoothing", 0.1))
fit(model, data.train, settings(3), progress=False)  # warm-up: first steps allocate
print(json.dumps({"ready": True, "config": cfg}), flush=True)
for line in sys.stdin:
    h = fit(model, data.train, settings(int(line)), progress=False)
    print(json.dumps({"seconds": h["seconds"], "tokens": h["tokens"], "steps": h["step"]}), flush=True)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", required=True, help="the old checkout's src folder")
    p.add_argument("--new", default="src", help="the new checkout's src folder")
    p.add_argument("--config", default="transformer-cpu", help="the configuration each side trains, as it defines it")
    p.add_argument("--max-tokens", type=int, default=1000)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    sides = {}
    for side in ("old", "new"):
        env = {**os.environ, "PYTHONPATH": os.path.abspath(getattr(args, side)), "TQDM_DISABLE": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, args.config, str(args.max_tokens), str(args.threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = json.loads(proc.stdout.readline())
        print(f"{side}: {args.config} = {ready['config']}", flush=True)
        sides[side] = proc
    totals = {side: [0.0, 0] for side in sides}
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        line = []
        for side in order:
            sides[side].stdin.write(f"{args.steps}\n")
            sides[side].stdin.flush()
            out = json.loads(sides[side].stdout.readline())
            totals[side][0] += out["seconds"]
            totals[side][1] += out["tokens"]
            line.append(f"{side} {out['tokens'] / out['seconds']:7.0f}")
        print(f"round {r + 1}: " + "   ".join(line) + " target tokens/s", flush=True)
    rate = {side: tokens / seconds for side, (seconds, tokens) in totals.items()}
    print(
        f"total: old {rate['old']:.0f}, new {rate['new']:.0f} target tokens/s; ratio new / old {rate['new'] / rate['old']:.2f} "
        f"({args.rounds} rounds of {args.steps} steps each, {args.threads} threads, load {os.getloadavg()[0]:.2f})"
    )
    for proc in sides.values():
        proc.stdin.close()
        proc.wait()


if __name__ == "__main__":
    main()
