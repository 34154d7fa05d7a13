"""python -m transformer_course.reference {bleu,sample} NAME: see the package's docstring."""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from . import NAMES, _path, load_reference, sample_record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m transformer_course.reference",
        description="Check or refresh what is stored with a reference model.",
    )
    p.add_argument(
        "what",
        choices=["bleu", "sample"],
        help="bleu: decode the whole test set again and compare with the stored BLEU; "
        "sample: write NAME-sample.json from the stored weights",
    )
    p.add_argument("name", choices=NAMES)
    p.add_argument("--threads", type=int, default=2, help="CPU threads (default 2, the course's budget)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, data, run = load_reference(args.name)
    if args.what == "sample":
        record = sample_record(args.name, model, data, run)
        _path(args.name, "-sample.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {_path(args.name, '-sample.json')}")
        return 0
    from ..translation import evaluate_bleu

    start = time.perf_counter()
    with torch.no_grad():
        bleu = evaluate_bleu(model, data, "test")  # as the trainer scored the test set at the end of its run
    # A GPU run stores its weights compactly and scored that form too (greedy, on the GPU): compare with that score.
    # Decoded on another device, a near tie between two tokens can fall the other way, hence 0.1 there.
    stored = run.get("stored_weights", {}).get("test_score", run["test_score"])
    tolerance = 0.0 if run["device"] == "cpu" else 0.1
    same = abs(round(bleu, 2) - round(stored, 2)) <= tolerance
    print(
        f"{args.name}: greedy test BLEU {bleu:.2f} on {len(data.test_ids):,} sentences "
        f"({time.perf_counter() - start:.0f} s); stored {stored:.2f} (decoded on {run['device']}): "
        f"{'the same' if same else 'DIFFERENT'}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
