"""Benchmark (not a test): what the key/value cache buys a decoder-only language model (chapter 10).

    .venv/bin/python tests/benchmarks/lm_generation_speed.py

Generates 100 tokens after an 8-token prompt, one sequence, on one thread, with ``sampling.generate``: with the
cache (each step feeds the new token only) against recomputing the whole prefix at every step (the stack on
every position, the output layer on the last one only). The model has the chapter's likely size (d_model 192,
4 heads, 4 layers, d_ff 768, a 4,000-token vocabulary) with random weights: the cost of a step does not depend on
what the weights learned, and no <eos> stops either side early. Greedy decoding, so that both sides write the
same tokens. The two sides alternate, ``--rounds`` times; medians are reported.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from transformer_course.decoding.sampling import generate
from transformer_course.models.language_model import TransformerLM


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=100)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TransformerLM(4000, 192, 4, 4, 768, max_len=max(256, 8 + args.new_tokens)).eval()
    prompt = torch.randint(1, 4000, (1, 8))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), TransformerLM d_model 192, 4 heads, "
        f"4 layers, vocabulary 4000 ({sum(p.numel() for p in model.parameters()):,} parameters), random weights"
    )

    def run(use_cache: bool) -> tuple[float, torch.Tensor]:
        start = time.perf_counter()
        ids = generate(model, prompt, args.new_tokens, greedy=True, use_cache=use_cache)
        return time.perf_counter() - start, ids

    run(True), run(False)  # warm up
    cached, full = [], []
    for _ in range(args.rounds):
        seconds, ids_cached = run(True)
        cached.append(seconds)
        seconds, ids_full = run(False)
        full.append(seconds)
        assert torch.equal(ids_cached, ids_full), "the cache changed the generated tokens"
    c, f = statistics.median(cached), statistics.median(full)
    print(f"{args.new_tokens} tokens after an 8-token prompt, batch 1, median of {args.rounds} rounds:")
    print(f"  with the cache:         {c * 1000:8.1f} ms  ({c / args.new_tokens * 1000:.2f} ms per token)")
    print(f"  recomputing the prefix: {f * 1000:8.1f} ms  ({f / args.new_tokens * 1000:.2f} ms per token)")
    print(f"  the cache is {f / c:.1f}x faster (target: at least 3x)")


if __name__ == "__main__":
    main()
