"""Time to 99.5% exact match on 1,000 held-out dates, with and without attention (the figure of issue 4).

    taskset -c 0,1 .venv/bin/python tests/benchmarks/dates_training.py [--threads 2] [--steps 3000]

Trains from scratch (no cache), evaluating every 25 steps; prints the wall-clock seconds of training
(evaluation excluded) at which each model first reached 99% and 99.5%, and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from transformer_course.data import date_splits
from transformer_course.data.dates import date_vocabs
from transformer_course.evaluation.metrics import exact_match
from transformer_course.evaluation.translate import count_parameters, translate
from transformer_course.experiments.toy_experiments import _build, pair_batches, sequence_loss
from transformer_course.training.configs import DATE_EXPERIMENT


def run(attention: bool, steps: int) -> None:
    cfg = {**DATE_EXPERIMENT}
    train_pairs, test_pairs = date_splits(cfg["n_train"], cfg["n_test"], seed=cfg["seed"])
    src_vocab, tgt_vocab = date_vocabs()
    batches = pair_batches(train_pairs, src_vocab, tgt_vocab, cfg)  # the experiment's own batches
    test_src, targets = [src_vocab.encode(a) for a, _ in test_pairs], [b for _, b in test_pairs]
    model = _build(attention, len(src_vocab), len(tgt_vocab), cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    g = torch.Generator().manual_seed(0)
    training, reached, order = 0.0, {}, []
    for step in range(1, steps + 1):
        if not order:
            order = torch.randperm(len(batches), generator=g).tolist()
        b = batches[order.pop()]
        t0 = time.perf_counter()
        model.train()
        out = model(b.src, b.src_mask, b.tgt)
        loss = sequence_loss(out[0] if isinstance(out, tuple) else out, b.tgt, b.tgt_mask)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        training += time.perf_counter() - t0
        if step % 25 == 0:
            acc = exact_match(translate(model, test_src, tgt_vocab, 11), targets)
            for level in (0.99, 0.995):
                if acc >= level and level not in reached:
                    reached[level] = (step, training)
            if 0.995 in reached:
                break
    name = "with attention   " if attention else "without attention"
    found = ", ".join(f"{lvl:.1%} at step {s} after {t:.1f} s" for lvl, (s, t) in reached.items()) or "not reached"
    print(f"{name}: {count_parameters(model):,} parameters; {found}; load {os.getloadavg()[0]:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, load average at start {os.getloadavg()}")
    for attention in (True, False):
        run(attention, args.steps)


if __name__ == "__main__":
    main()
