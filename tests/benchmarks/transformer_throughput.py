"""Training throughput of the course's Transformer against torch.nn.Transformer of the same size (chapter 8).

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/transformer_throughput.py --rounds 3
    .venv/bin/python tests/benchmarks/transformer_throughput.py --device cuda --bf16 --batch 256

Both models get the same weights (copied with transformer_torch.to_torch), the same embeddings, positional
encoding and output layer, the same batches, the same loss (F.cross_entropy with label_smoothing=0.1 over
the real target tokens) and the same optimiser (Adam). A step is forward + backward + Adam step; only steps
after a warm-up are timed. The two models alternate, round after round, so that a change in the machine's
load hits both alike. Prints target tokens per second (real tokens, padding excluded) of each model in each
round, and the ratio ours / torch of the totals; also per CPU-second of this process (time.process_time), which
a busy machine distorts less than the wall clock.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

# OpenMP threads that sleep rather than spin while they wait (as the Makefile sets): on a machine busy with other
# work, spinning threads slow every step down many times over. Read by libgomp when torch loads, so set it first.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from transformer_course.data import make_batch  # noqa: E402
from transformer_course.transformer import Transformer  # noqa: E402
from transformer_course.transformer_torch import to_torch  # noqa: E402

PAD, BOS, EOS = 0, 1, 2


def make_batches(n: int, batch: int, vocab: int, low: int, high: int, seed: int) -> list:
    """n batches of random token sequences, source and target lengths drawn independently from [low, high]."""
    g = torch.Generator().manual_seed(seed)

    def sentence() -> list[int]:
        length = int(torch.randint(low, high + 1, (1,), generator=g))
        return torch.randint(4, vocab, (length,), generator=g).tolist()

    return [
        make_batch([sentence() for _ in range(batch)], [sentence() for _ in range(batch)], PAD, EOS) for _ in range(n)
    ]


def train_steps(model, optimizer, batches, steps: int, device, bf16: bool) -> tuple[float, float, int]:
    """(wall-clock seconds, CPU seconds, real target tokens) for ``steps`` training steps, cycling through the batches."""
    tokens = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    start, cpu_start = time.perf_counter(), time.process_time()
    for i in range(steps):
        b = batches[i % len(batches)]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(b.src, b.src_mask, b.tgt)
        loss = F.cross_entropy(logits.float().flatten(0, 1), b.tgt.flatten(), ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += int(b.tgt_mask.sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    else:
        loss.item()
    return time.perf_counter() - start, time.process_time() - cpu_start, tokens


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
    models = {"ours": ours, "torch": theirs}
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    batches = [b.to(device) for b in make_batches(8, args.batch, args.vocab, args.min_len, args.max_len, seed=0)]
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
    for name, model in models.items():
        model.train()
        train_steps(model, optimizers[name], batches, args.warmup, device, args.bf16)

    totals = {name: [0.0, 0.0, 0] for name in models}  # wall-clock seconds, CPU seconds, tokens
    ratios = []
    for r in range(1, args.rounds + 1):
        order = list(models) if r % 2 else list(models)[::-1]  # alternate who goes first
        rates, cpu_rates = {}, {}
        for name in order:
            seconds, cpu, tokens = train_steps(models[name], optimizers[name], batches, args.steps, device, args.bf16)
            totals[name] = [totals[name][0] + seconds, totals[name][1] + cpu, totals[name][2] + tokens]
            rates[name], cpu_rates[name] = tokens / seconds, tokens / cpu
        ratios.append(rates["ours"] / rates["torch"])
        print(
            f"round {r}: ours {rates['ours']:8.0f} tokens/s   torch {rates['torch']:8.0f} tokens/s   "
            f"ratio {ratios[-1]:.3f}   (per CPU-second: ratio {cpu_rates['ours'] / cpu_rates['torch']:.3f})   "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    rate = {name: tokens / seconds for name, (seconds, _, tokens) in totals.items()}
    cpu_rate = {name: tokens / cpu for name, (_, cpu, tokens) in totals.items()}
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
