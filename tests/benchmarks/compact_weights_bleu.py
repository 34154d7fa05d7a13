"""Benchmark (not a test): what storing a reference model's weights compactly costs, in bytes and BLEU, and whether
chapter 9's choice of length penalty survives it.

    .venv/bin/python tests/benchmarks/compact_weights_bleu.py transformer-ref \
        --out src/transformer_course/runs/compact-forms-transformer-ref.json

For each form of transformer_course.training.compact_weights (float32, float16, int8 with a scale per row), applied to the
weights as stored: the size of the file; the greedy BLEU of the rounded weights on the course's 2,000 validation and
5,967 test sentences; how many of the 40 stored sample translations (NAME-sample.json) change; and chapter 9's
length-penalty sweep as its notebook runs it (beam K = 4 on its seeded sample of 500 validation sentences, alpha 0,
0.6, 1 and 2) with the alpha that sweep would choose. Decoded on two threads. The GPU run keeps int8 unless it costs
more than 0.3 validation BLEU; transformer-ref stays float32 because in float16 the sweep chooses another alpha
(book/instructor/models.md, "Stored weights").
"""

from __future__ import annotations

import argparse
import io
import json
import random
import time
from pathlib import Path

import torch
from copy_spread import processor  # the benchmark beside this one: the processor's name and instruction set

from transformer_course.evaluation.metrics import corpus_bleu
from transformer_course.experiments.translation import beam_translations, evaluate_bleu
from transformer_course.reference import HERE, NAMES, load_reference, sample_translations
from transformer_course.training.compact_weights import FORMS, compact, load_state, rounded_copy

ALPHAS = (0.0, 0.6, 1.0, 2.0)  # chapter 9's (solutions/09_evaluation.ipynb, "The length penalty, measured")
BEAM = 4


def chapter9_sweep(model, data) -> dict[str, float]:
    """{alpha: BLEU} of beam search on chapter 9's validation sample (500 of the 2,000 sentences, seed 0)."""
    sample = sorted(random.Random(0).sample(range(len(data.valid_ids)), 500))
    sources = [data.valid_ids[i] for i in sample]
    references = [data.valid_references[i] for i in sample]
    return {str(a): corpus_bleu(beam_translations(model, data, sources, BEAM, a), references) for a in ALPHAS}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=NAMES)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, help="store the measurements here (JSON)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model, data, run = load_reference(args.name)
    stored_sample = json.loads((HERE / f"{args.name}-sample.json").read_text())["translations"]
    record = {
        "command": f"python tests/benchmarks/compact_weights_bleu.py {args.name} --threads {args.threads}"
        + (f" --out {args.out}" if args.out else ""),
        "name": args.name,
        "stored_form": run.get("stored_weights", {}).get("form", "float32"),
        "trained": {"valid_score": run["score"], "test_score": run["test_score"]},
        "torch": torch.__version__,
        "threads": args.threads,
        "processor": processor(),
        "beam": BEAM,
        "forms": {},
    }
    stored = load_state(HERE / f"{args.name}.pt")  # the forms below round the weights as stored
    assert all(torch.equal(t, stored[k]) for k, t in model.state_dict().items())
    for form in FORMS:
        buffer = io.BytesIO()
        torch.save(compact(model.state_dict(), form), buffer)
        start = time.perf_counter()
        twin = rounded_copy(model, form).eval()
        with torch.no_grad():
            valid, test = evaluate_bleu(twin, data, "valid"), evaluate_bleu(twin, data, "test")
            changed = sum(a != b for a, b in zip(sample_translations(twin, data), stored_sample))
            sweep = chapter9_sweep(twin, data)
        chosen = max(ALPHAS, key=lambda a: sweep[str(a)])  # the first of equal scores, as the notebook's max
        record["forms"][form] = {
            "bytes": buffer.tell(),
            "valid_score": valid,
            "test_score": test,
            "sample_translations_changed": changed,
            "chapter9_alpha_sweep": sweep,
            "chapter9_alpha": chosen,
        }
        print(
            f"{args.name} {form:8s} {buffer.tell() / 2**20:5.1f} MiB   greedy BLEU validation {valid:6.2f}, "
            f"test {test:6.2f}; {changed} of {len(stored_sample)} samples changed; chapter 9's sweep "
            + ", ".join(f"{a}: {s:.2f}" for a, s in sweep.items())
            + f" -> alpha {chosen}   ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
