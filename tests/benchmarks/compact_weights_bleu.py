"""Benchmark (not a test): what storing a reference model's weights compactly costs, in bytes and validation BLEU.

    .venv/bin/python tests/benchmarks/compact_weights_bleu.py transformer-ref

For each form of transformer_course.compact_weights (float32, float16, int8 with a scale per row), the size of the
file and the greedy BLEU of the rounded weights on the course's 2,000 validation sentences, decoded on two threads.
The GPU run keeps int8 unless it costs more than 0.3 of this BLEU (book/instructor.md, "The GPU run").
"""

from __future__ import annotations

import argparse
import io
import time

import torch

from transformer_course.compact_weights import FORMS, compact, rounded_copy
from transformer_course.reference import NAMES, load_reference
from transformer_course.translation import evaluate_bleu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=NAMES)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model, data, _ = load_reference(args.name)
    for form in FORMS:
        buffer = io.BytesIO()
        torch.save(compact(model.state_dict(), form), buffer)
        start = time.perf_counter()
        bleu = evaluate_bleu(rounded_copy(model, form), data, "valid")
        print(
            f"{args.name} {form:8s} {buffer.tell() / 1e6:6.1f} MB   validation BLEU {bleu:6.2f}   "
            f"({time.perf_counter() - start:.0f} s to decode)"
        )


if __name__ == "__main__":
    main()
