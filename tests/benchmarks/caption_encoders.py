"""Benchmark (not a test): chapter 4's captions read by three encoders, on the same data and the same 600 steps.

    .venv/bin/python tests/benchmarks/caption_encoders.py --jobs 2 --out src/transformer_course/runs/caption-encoders.json

The encoders (the decoder is chapter 4's attention decoder in all three):
- "windows": chapter 4's Captioner, 16 overlapping windows 12 columns wide, each read by a small MLP;
- "patches": 16 side-by-side patches 4 columns wide, each projected on its own (PatchCaptioner, n_layers=0);
- "patches + Transformer": the same patches, then two of chapter 8's encoder layers (PatchCaptioner, n_layers=2).

Protocol: each encoder's learning rate is chosen on 200 validation images (seed 20,000) from a grid, with training
seed 0; then three seeds train at the chosen rate and are scored once on chapter 4's 200 test images (seed 10,000):
exact captions, and the share of digits where the most-attended region lies over the digit being written. One
thread per training. The seed fixes data and weights; another processor adds up in another order, so a re-run
elsewhere gives other models (chapter 4's copy experiment measures how much).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from copy_spread import processor  # the benchmark beside this one: the processor's name and instruction set

from transformer_course.experiments import captioning
from transformer_course.experiments.patch_captioner import PatchCaptioner

ENCODERS = {
    "windows": lambda: captioning.Captioner(),
    "patches": lambda: PatchCaptioner(n_layers=0),
    "patches + Transformer": lambda: PatchCaptioner(n_layers=2),
}
GRID = (2e-3, 3e-3, 5e-3, 1e-2)
STEPS, SEEDS = 600, (0, 1, 2)
VALID_SEED, TEST_SEED = 20_000, 10_000  # TEST_SEED: chapter 4's 200 test images


def one(encoder: str, lr: float, seed: int, part: str) -> dict:
    torch.set_num_threads(1)
    run = captioning.train_captioner(seed=seed, steps=STEPS, lr=lr, build=ENCODERS[encoder])
    images = captioning.make_captions(200, seed=VALID_SEED if part == "valid" else TEST_SEED)
    model = run.model
    return {
        "encoder": encoder,
        "lr": lr,
        "seed": seed,
        "part": part,
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(run.seconds, 1),
        "final_loss": round(sum(run.losses[-20:]) / 20, 4),
        "exact": captioning.caption_accuracy(model, images),
        "on_digit": captioning.attention_on_digit_rate(model, images),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1, help="trainings at once, one thread each")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    start = time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        tuning = list(pool.map(one, *zip(*[(e, lr, 0, "valid") for e in ENCODERS for lr in GRID])))
        chosen = {e: max((r for r in tuning if r["encoder"] == e), key=lambda r: r["exact"])["lr"] for e in ENCODERS}
        for r in tuning:
            print(f"valid  {r['encoder']:22s} lr {r['lr']:.0e}: exact {r['exact']:.1%}, on digit {r['on_digit']:.1%}")
        tests = list(pool.map(one, *zip(*[(e, chosen[e], s, "test") for e in ENCODERS for s in SEEDS])))
    summary = {}
    for e in ENCODERS:
        runs = [r for r in tests if r["encoder"] == e]
        summary[e] = {
            key: {"mean": statistics.mean(r[key] for r in runs), "sd": statistics.stdev(r[key] for r in runs)}
            for key in ("exact", "on_digit", "seconds")
        }
        summary[e]["lr"], summary[e]["parameters"] = chosen[e], runs[0]["parameters"]
        s = summary[e]
        print(
            f"test   {e:22s} lr {chosen[e]:.0e}: exact {s['exact']['mean']:.1%} ± {s['exact']['sd']:.1%}, "
            f"on digit {s['on_digit']['mean']:.1%} ± {s['on_digit']['sd']:.1%}, {s['seconds']['mean']:.0f} s"
        )
    if args.out:
        record = {
            "command": f"python tests/benchmarks/caption_encoders.py --jobs {args.jobs} --out {args.out}",
            "protocol": __doc__.split("Protocol: ")[1].strip(),
            "machine": {"processor": processor(), "torch": torch.__version__},
            "steps": STEPS,
            "grid": list(GRID),
            "tuning": tuning,
            "test": tests,
            "summary": summary,
            "wall_seconds": round(time.time() - start),
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
