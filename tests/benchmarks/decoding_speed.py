"""Benchmark (not a test): what the key/value cache and batching buy when decoding (chapter 9).

    OMP_NUM_THREADS=2 .venv/bin/python tests/benchmarks/decoding_speed.py

1. Greedy outputs of 30 tokens, with the cache (decoding.greedy_decode) against recomputing the whole prefix at
   every step (Transformer.generate(use_cache=False)), for one sentence and for a batch of 64.
2. Beam search (width 4) over 200 sentences: batched (every sentence and beam as one tensor) against one
   sentence at a time.
The model has chapter 8's CPU configuration (2 + 2 layers, d_model 256, an 8,000-token vocabulary) with random
weights: the cost of decoding does not depend on what the weights learned, and <eos> is never forced, so both
sides of each comparison do the same steps. The two sides alternate, ``--rounds`` times; medians are reported.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer_course.decoding.search import beam_search, greedy_decode
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _sources(n: int, vocab: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (int(torch.randint(4, 16, (1,), generator=g)),), generator=g) for _ in range(n)]


def _pad(seqs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    mask = torch.arange(src.shape[1])[None, :] < torch.tensor([len(s) for s in seqs])[:, None]
    return src, mask


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    vocab = 8000
    model = build_model(CONFIGS["transformer-cpu"], vocab).eval()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, transformer-cpu with random weights "
        f"({sum(p.numel() for p in model.parameters()):,} parameters)"
    )

    for batch in (1, 64):
        src, mask = _pad(_sources(batch, vocab, seed=batch))
        cached, full = [], []
        for _ in range(args.rounds):
            cached.append(_timed(lambda src=src, mask=mask: greedy_decode(model, src, mask, 30, eos_id=None)))
            full.append(_timed(lambda src=src, mask=mask: model.generate(src, mask, 30, eos_id=None, use_cache=False)))
        a, b = statistics.median(cached), statistics.median(full)
        print(
            f"greedy, 30 tokens, batch {batch:3d}: cached {a * 1000:8.1f} ms, recomputed {b * 1000:8.1f} ms, "
            f"speed-up {b / a:.2f}x"
        )

    seqs = _sources(200, vocab, seed=7)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # batches of similar length, as translate does

    def batched() -> None:
        for start in range(0, len(order), 100):
            src, mask = _pad([seqs[i] for i in order[start : start + 100]])
            beam_search(model, src, mask, 4, 30)

    def one_by_one() -> None:
        for s in seqs:
            beam_search(model, s[None], torch.ones(1, len(s), dtype=torch.bool), 4, 30)

    together, alone = [], []
    for _ in range(max(1, args.rounds - 1)):
        together.append(_timed(batched))
        alone.append(_timed(one_by_one))
    a, b = statistics.median(together), statistics.median(alone)
    print(
        f"beam search, width 4, 200 sentences, up to 30 tokens: batched {a:.2f} s, one by one {b:.2f} s, "
        f"speed-up {b / a:.2f}x"
    )


if __name__ == "__main__":
    main()
