"""Benchmark (not a test): the time of one training step against sentence length, GRU with attention against the
Transformer (chapter 8's argument for dropping recurrence, measured).

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/step_time_by_length.py \
        --out src/transformer_course/runs/step-time-by-length-cpu.json

Every batch holds the same number of tokens (``--tokens``, source and target alike), so a batch of sentences of
length L holds tokens / L sentences: the work per token is about the same at every length, and what changes is
how it is laid out. The GRU must take 2 L steps one after another (L through the encoder, L through the decoder),
each a product of a (tokens / L, H) matrix; the Transformer takes as many steps as it has layers, each over all
the tokens at once, plus attention, whose cost per token grows with L. A step is forward, loss and backward (no
optimiser update: it is the same for every length). The models alternate length by length, ``--rounds`` times,
and the median is kept (transformer_course.measurement.speed.step_time_by_length, which the GPU run calls too). The models
are the chapters' CPU configurations (bahdanau-cpu, transformer-cpu) with random weights: the cost does not
depend on what they learned.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when torch loads: set it first

import torch

from transformer_course.experiments.translation import VOCAB_SIZE
from transformer_course.measurement.speed import step_time_by_length
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model

MODELS = {"GRU with attention": "bahdanau-cpu", "Transformer": "transformer-cpu"}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    p.add_argument("--tokens", type=int, default=2048, help="tokens per batch (source; the target has as many)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write the measurements as JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = {name: (c, CONFIGS[c], build_model(CONFIGS[c], VOCAB_SIZE)) for name, c in MODELS.items()}
    rows = step_time_by_length(
        models,
        args.lengths,
        args.tokens,
        VOCAB_SIZE,
        rounds=args.rounds,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    for row in rows:
        print(
            f"{row['model']:20s} L={row['length']:4d}  {row['sentences']:4d} sentences  "
            f"{1000 * row['seconds']:8.1f} ms/step  {row['tokens_per_second']:8.0f} tokens/s  "
            f"{row['sequential_steps']:4d} sequential steps"
        )
    if args.out:
        result = {
            "command": "OMP_NUM_THREADS=2 python tests/benchmarks/step_time_by_length.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "tokens_per_batch": args.tokens,
            "rounds": args.rounds,
            "configs": {c: CONFIGS[c] for c in MODELS.values()},
            "rows": rows,
            "load_average": os.getloadavg(),
        }
        with open(args.out, "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
