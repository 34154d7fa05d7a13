"""Benchmark (not a test): how much chapter 4's copy experiment depends on the machine that trains it.

    .venv/bin/python tests/benchmarks/copy_spread.py --threads 1 2 --out src/transformer_course/runs/copy-spread.json

The experiment (``toy_experiments.copy_experiment``: 400 steps, seed 0, strings of 4 to 24 digits) trained again,
with and without attention, once per thread count, each time in an empty model cache. The seed fixes the data and
the initial weights; what changes is the order in which the processor's kernels add numbers up (the thread count,
the instruction set), and a long training amplifies those last-digit differences into another model. Each run is
stored with the processor, the thread count and, per input length, the share of characters and of whole strings
repeated exactly. Run it again with ``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2`` in the environment to
train with the AVX2 kernels on a processor that has AVX-512.
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

ONE_RUN = """
import json, sys, torch
torch.set_num_threads(int(sys.argv[1]))
from transformer_course.experiments.toy_experiments import copy_experiment
runs = {}
for attention in (False, True):
    r = copy_experiment(attention=attention)
    assert not r.loaded  # trained here, not read from a cache
    runs["with attention" if attention else "without"] = {
        n: {"characters": round(c, 4), "exact": round(e, 4)} for n, (_, c, e) in r.by_length.items()
    }
print(json.dumps({"kernels": torch.backends.cpu.get_cpu_capability(), "by_length": runs}))
"""


def processor() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    return f"{name} ({'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, help="add the runs to this JSON file (kept: the runs already in it)")
    args = parser.parse_args()
    stored = json.loads(args.out.read_text()) if args.out and args.out.exists() else {"runs": []}
    machine = processor()
    for threads in args.threads:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TRANSFORMER_COURSE_CACHE": cache, "OMP_NUM_THREADS": str(threads)}
            out = subprocess.run(
                [sys.executable, "-c", ONE_RUN, str(threads)], env=env, capture_output=True, text=True, check=True
            )
        run = {"processor": machine, "threads": threads, **json.loads(out.stdout)}
        att = run["by_length"]["with attention"]
        print(
            f"{run['processor']}, {run['kernels']} kernels, {threads} thread(s): with attention at 23 and 24 digits, characters "
            f"{att['23']['characters']:.1%} and {att['24']['characters']:.1%}, exact "
            f"{att['23']['exact']:.1%} and {att['24']['exact']:.1%}"
        )
        stored["runs"].append(run)
    if args.out:
        stored["commands"] = [
            "python tests/benchmarks/copy_spread.py --threads 1 2 --out " + str(args.out),
            "ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 (the same command)",
        ]
        args.out.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
