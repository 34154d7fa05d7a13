"""Training throughput of the course's Transformer against torch.nn.Transformer of the same size (chapter 8).

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/transformer_throughput.py --rounds 3
    .venv/bin/python tests/benchmarks/transformer_throughput.py --device cuda --bf16 --batch 256

Both models get the same weights (copied with transformer_torch.to_torch), the same embeddings, positional
encoding and output layer, the same batches, the same loss (F.cross_entropy with label_smoothing=0.1 over
the real target tokens) and the same optimiser (Adam). A step is forward + backward + Adam step; only steps
after a warm-up are timed. The two models alternate, round after round, so that a change in the machine's load
hits both alike (transformer_course.measurement.speed.throughput, which the GPU run calls too). Prints target tokens per
second (real tokens, padding excluded) of each model in each round, and the ratio ours / torch of the totals;
also per CPU-second of this process (time.process_time), which a busy machine distorts less than the wall clock.
"""

from __future__ import annotations

import argparse
import os
import statistics

# OpenMP threads that sleep rather than spin while they wait (as the Makefile sets): on a machine busy with other
# work, spinning threads slow every step down many times over. Read by libgomp when torch loads, so set it first.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from transformer_course.measurement.speed import random_batches, throughput
from transformer_course.models.transformer import Transformer
from transformer_course.models.transformer_torch import to_torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per model and round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model before the first round")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--min-len", type=int, default=8)
    parser.add_argument("--max-len", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--norm-first", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (CUDA)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: OMP_NUM_THREADS)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    load_start = os.getloadavg()

    torch.manual_seed(0)
    size = dict(
        d_model=256,
        n_heads=4,
        n_encoder_layers=3,
        n_decoder_layers=3,
        d_ff=1024,
        dropout=args.dropout,
        norm_first=args.norm_first,
    )
    ours = Transformer(args.vocab, args.vocab, **size).to(device)
    theirs = to_torch(ours).to(device)  # nn.Transformer inside the same embeddings and output layer, same weights
    batches = [b.to(device) for b in random_batches(8, args.batch, args.vocab, args.min_len, args.max_len, seed=0)]
    real = sum(int(b.tgt_mask.sum()) for b in batches) / sum(b.tgt_mask.numel() for b in batches)

    print(
        f"torch {torch.__version__}, device {device}, bf16 {args.bf16}, threads {torch.get_num_threads()} "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), {os.cpu_count()} CPUs, "
        f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}"
    )
    print(
        f"d_model 256, 4 heads, 3+3 layers, d_ff 1024, vocab {args.vocab}, dropout {args.dropout}, "
        f"norm_first {args.norm_first}; batch {args.batch}, lengths {args.min_len}-{args.max_len} "
        f"({real:.0%} of target positions real); {args.steps} timed steps per model and round"
    )
    result = throughput(
        {"ours": ours, "torch": theirs},
        batches,
        rounds=args.rounds,
        steps=args.steps,
        warmup=args.warmup,
        bf16=args.bf16,
        log=lambda line: print(line, flush=True),
    )
    ratios = [r["ours"] / r["torch"] for r in result["rounds"]]
    rate, cpu_rate = result["tokens_per_second"], result["tokens_per_cpu_second"]
    print(
        f"total:   ours {rate['ours']:8.0f} tokens/s   torch {rate['torch']:8.0f} tokens/s   "
        f"ratio (ours / torch) {rate['ours'] / rate['torch']:.3f}"
    )
    print(
        f"per CPU-second: ours {cpu_rate['ours']:8.0f} tokens   torch {cpu_rate['torch']:8.0f} tokens   "
        f"ratio {cpu_rate['ours'] / cpu_rate['torch']:.3f}"
    )
    load_end = os.getloadavg()
    print(
        f"median per-round ratio {statistics.median(ratios):.3f}; "
        f"load average at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}"
    )


if __name__ == "__main__":
    main()
