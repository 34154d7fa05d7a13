"""Chapter 11's decoding cost: time per generated token and the cache it carries, by context length and attention.

``python -m transformer_course.experiments.scale_speed --out src/transformer_course/runs/scale-speed.json``

For each variant of ``experiments.scale`` (the same sizes; the weights do not change the cost, so they are the
untrained ones of seed 0) and each context length L, the model is fed a prompt of L tokens through its cache
(``ScaleLM.step``), then ``NEW`` tokens one at a time; the time of those one-token steps, divided by ``NEW``, is the
time per token at context L, and ``ScaleCache.numbers`` what the cache holds after them. The variants take turns
inside each repeat (alternating, so that a busy machine slows them alike) and each figure is the median of
``REPEATS`` repeats, on one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from .scale import VARIANTS, build, write_record

__all__ = ["LENGTHS", "NEW", "REPEATS", "measure", "main"]

LENGTHS = (64, 256, 1024, 4096)
NEW = 16  # one-token steps timed per measurement
REPEATS = 3
SPEED_VARIANTS = ("mha", "gqa2", "mqa", "window16", "linear")


@torch.no_grad()
def measure(model, length: int, new: int = NEW) -> tuple[float, int]:
    """(seconds per one-token step after a prompt of ``length`` tokens, the cache's numbers after them)."""
    model.eval()
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(0, model.vocab_size, (1, length + new), generator=g)
    cache = model.start_cache()
    model.step(cache, ids[:, :length])
    start = time.perf_counter()
    for i in range(length, length + new):
        model.step(cache, ids[:, i : i + 1])
    return (time.perf_counter() - start) / new, cache.numbers()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--variants", nargs="+", default=list(SPEED_VARIANTS), choices=sorted(VARIANTS))
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    models = {v: build(v, 0) for v in args.variants}
    times: dict[str, dict[int, list[float]]] = {v: {n: [] for n in args.lengths} for v in args.variants}
    numbers: dict[str, dict[int, int]] = {v: {} for v in args.variants}
    for _ in range(args.repeats):
        for n in args.lengths:
            for v in args.variants:  # alternating: every variant measured within the same minute
                seconds, held = measure(models[v], n)
                times[v][n].append(seconds)
                numbers[v][n] = held
    out = {
        "command": "python -m transformer_course.experiments.scale_speed "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "threads": 1,
        "torch": torch.__version__,
        "new_tokens": NEW,
        "repeats": args.repeats,
        "ms_per_token": {
            v: {str(n): round(1000 * statistics.median(t), 3) for n, t in times[v].items()} for v in times
        },
        "spread_ms": {v: {str(n): round(1000 * (max(t) - min(t)), 3) for n, t in times[v].items()} for v in times},
        "cache_numbers": {v: {str(n): numbers[v][n] for n in args.lengths} for v in numbers},
    }
    write_record(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
