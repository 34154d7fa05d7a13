"""Benchmark (not a test): the training step compiled (torch.compile, Inductor) against eager, alternating in one run.

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/compiled_step.py --out src/transformer_course/runs/compiled-step-cpu.json

Two copies of one model (the same configuration and initial weights) train on the same Tatoeba batches with the
course's loop (``training.fit``): one eager, one compiled with dynamic shapes (``training.compiled``, the trainer's
``--compile``). Each first trains ``--warmup`` steps, which for the compiled one includes compiling (reported). Then
they take turns, ``--steps`` steps each, ``--rounds`` times, so that a change in the machine's load hits both alike.
Printed: each round's target tokens per second, the ratio compiled / eager over all rounds and its range over the
rounds, and the compile time. The run is stored as JSON with its command.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch


def main() -> None:
    from transformer_course.data.translation import data_for
    from transformer_course.training.compiled import compile_model
    from transformer_course.training.configs import CONFIGS
    from transformer_course.training.kinds import build_model, typed
    from transformer_course.training.loop import Settings, fit

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="transformer-cpu")
    p.add_argument("--warmup", type=int, default=40, help="steps before timing (the compiled side compiles here)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write the run here as JSON")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    config = typed(CONFIGS[args.config])
    data = data_for(config)
    models = {}
    for side in ("eager", "compiled"):
        core = build_model(config, len(data.tokenizer), seed=0)
        models[side] = compile_model(core) if side == "compiled" else core

    def settings(n: int) -> Settings:
        return Settings(steps=n, peak_lr=config.peak_lr, warmup=config.warmup, smoothing=config.smoothing)

    warm = {}
    for side, model in models.items():
        start = time.perf_counter()
        fit(model, data.train, settings(args.warmup), progress=False)
        warm[side] = time.perf_counter() - start
        print(f"{side}: {args.warmup} warm-up steps in {warm[side]:.1f} s", flush=True)
    rounds = []
    for r in range(args.rounds):
        order = ["eager", "compiled"] if r % 2 == 0 else ["compiled", "eager"]
        row = {}
        for side in order:
            h = fit(models[side], data.train, settings(args.steps), progress=False)
            row[side] = {"seconds": h["seconds"], "tokens": h["tokens"]}
        rounds.append(row)
        rates = {s: row[s]["tokens"] / row[s]["seconds"] for s in row}
        print(
            f"round {r + 1}: eager {rates['eager']:6.0f}  compiled {rates['compiled']:6.0f} target tokens/s"
            f"  ratio {rates['compiled'] / rates['eager']:.3f}",
            flush=True,
        )
    total = {s: sum(r[s]["tokens"] for r in rounds) / sum(r[s]["seconds"] for r in rounds) for s in models}
    per_round = [
        (r["compiled"]["tokens"] / r["compiled"]["seconds"]) / (r["eager"]["tokens"] / r["eager"]["seconds"])
        for r in rounds
    ]
    ratio = total["compiled"] / total["eager"]
    print(
        f"compiled / eager: {ratio:.3f} ({min(per_round):.3f} to {max(per_round):.3f} over {len(rounds)} rounds); "
        f"compiling took about {warm['compiled'] - warm['eager']:.0f} s more than {args.warmup} eager steps"
    )
    if args.out:
        record = {
            "command": "OMP_NUM_THREADS=2 python tests/benchmarks/compiled_step.py " + " ".join(sys.argv[1:]),
            "config": args.config,
            "threads": args.threads,
            "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(),
            "warmup_seconds": warm,
            "rounds": rounds,
            "tokens_per_second": total,
            "ratio": ratio,
            "ratio_range": [min(per_round), max(per_round)],
        }
        with open(args.out, "w") as f:
            f.write(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
