"""Benchmark (not a test): the cost of a training step of chapter 10's decoder-only translator against chapter 8's
encoder-decoder, on one thread, the two trainers alternated so that both see the same machine.

    .venv/bin/python tests/benchmarks/lm_step_cost.py [--rounds 2] [--steps 60] \
        [--out src/transformer_course/runs/step-cost-tlm-vs-encdec-cpu.json]

Each round runs ``lm_train --config tlm-transformer-cpu`` and ``train --config transformer-cpu`` for ``--steps``
steps (no test set, no evaluation curve) and reads the training seconds each reports (data loading and evaluation
excluded). The two runs of chapter 10 compared at equal steps; this says what equal steps cost in time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path


def _seconds_per_step(argv: list[str], out: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", *argv, "--out", str(out)], check=True, env=env, capture_output=True)
    run = json.loads(out.read_text())
    return run["train_seconds"] / run["steps"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    common = ["--steps", str(args.steps), "--threads", "1", "--no-test"]
    trainers = {
        "decoder_only": ["transformer_course.lm_train", "--config", "tlm-transformer-cpu", *common,
                         "--eval-every-steps", str(10 * args.steps)],
        "encoder_decoder": ["transformer_course.train", "--config", "transformer-cpu", *common,
                            "--eval-every-steps", "0", "--no-progress"],
    }  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in trainers}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, argv in trainers.items():
                seconds[name].append(_seconds_per_step(argv, Path(tmp) / f"{name}-{r}.json"))
                print(f"round {r + 1}: {name} {seconds[name][-1]:.3f} s per step", flush=True)
    ratios = [a / b for a, b in zip(seconds["decoder_only"], seconds["encoder_decoder"])]
    print("ratios:", " ".join(f"{x:.2f}" for x in ratios))
    result = {
        "command": "python tests/benchmarks/lm_step_cost.py " + " ".join(sys.argv[1:]),
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "steps": args.steps,
        "seconds_per_step": seconds,
        "ratios": ratios,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
