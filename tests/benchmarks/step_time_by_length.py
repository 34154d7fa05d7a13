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
and the median is kept. The models are the chapters' CPU configurations (bahdanau-cpu, transformer-cpu) with
random weights: the cost does not depend on what they learned.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when torch loads: set it first

import torch  # noqa: E402

from transformer_course.configs import CONFIGS  # noqa: E402
from transformer_course.data import make_batch  # noqa: E402
from transformer_course.training import label_smoothed_loss  # noqa: E402
from transformer_course.translation import VOCAB_SIZE, build_model  # noqa: E402

MODELS = {"GRU with attention": "bahdanau-cpu", "Transformer": "transformer-cpu"}


def sequential_steps(config: dict, length: int) -> int:
    """How many steps of the forward pass must run one after another for sentences of ``length`` tokens."""
    if config["model"] == "transformer":
        return config["n_encoder_layers"] + config["n_decoder_layers"]  # every position of a layer at once
    return 2 * length  # the encoder's GRU, then the decoder, one position at a time


def batch(tokens: int, length: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    n = max(1, tokens // length)
    ids = torch.randint(4, VOCAB_SIZE, (2, n, length), generator=g).tolist()
    return make_batch(ids[0], [t[:-1] for t in ids[1]], 0, 2)  # targets + <eos>: length tokens too


def step_seconds(model, b) -> float:
    start = time.perf_counter()
    out = model(b.src, b.src_mask, b.tgt)
    logits = out[0] if isinstance(out, tuple) else out
    label_smoothed_loss(logits, b.tgt, b.tgt_mask).backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    p.add_argument("--tokens", type=int, default=2048, help="tokens per batch (source; the target has as many)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write the measurements as JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = {name: build_model(CONFIGS[c], VOCAB_SIZE).train() for name, c in MODELS.items()}
    batches = {length: batch(args.tokens, length, length) for length in args.lengths}
    for model in models.values():  # warm up: first calls allocate
        for length in args.lengths[:2]:
            step_seconds(model, batches[length])
    times: dict[str, dict[int, list[float]]] = {name: {length: [] for length in args.lengths} for name in models}
    for r in range(args.rounds):
        for length in args.lengths:
            order = list(models) if (r + length) % 2 else list(models)[::-1]  # alternate who goes first
            for name in order:
                times[name][length].append(step_seconds(models[name], batches[length]))
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    rows = []
    for name, c in MODELS.items():
        for length in args.lengths:
            seconds = statistics.median(times[name][length])
            rows.append(
                {
                    "model": name,
                    "config": c,
                    "length": length,
                    "sentences": len(batches[length]),
                    "seconds": seconds,
                    "tokens_per_second": len(batches[length]) * length / seconds,
                    "sequential_steps": sequential_steps(CONFIGS[c], length),
                    "spread": [min(times[name][length]), max(times[name][length])],
                }
            )
            print(
                f"{name:20s} L={length:4d}  {len(batches[length]):4d} sentences  {1000 * seconds:8.1f} ms/step  "
                f"{rows[-1]['tokens_per_second']:8.0f} tokens/s  {rows[-1]['sequential_steps']:4d} sequential steps"
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
