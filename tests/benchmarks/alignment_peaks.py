"""Benchmark (not a test): where chapter 4's two encoders make the decoder look (stored for the chapter).

    .venv/bin/python tests/benchmarks/alignment_peaks.py --one-way W1 --one-way-run R1 \
        --bidirectional W2 --bidirectional-run R2 --out src/transformer_course/runs/alignment-peaks-seed0.json

W1, W2: weights saved by ``python -m transformer_course.train --config bahdanau-cpu`` (``bahdanau-bi-cpu``)
``--save``; R1, R2: the JSON runs those commands wrote (their commands are stored with the result). Two
measurements, on both models: (1) over the whole test set, the output pieces that a model copies from the
source (a piece of letters or digits, two characters or more, that occurs exactly once among the sentence's
source pieces: *Tom*, *Boston*, numbers), where each one's attention peaks: on its own source position, one
to the right (the one-step lag), one to the left, on the last source piece (the final full stop), on the
first, or elsewhere, and its mean weight on its own position; (2) the attention maps of chapter 4's two
sentences, stored in full so that the chapter can draw them. Greedy decoding, one thread.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

from transformer_course.evaluation.translate import translate
from transformer_course.experiments.translation import data_for
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model, typed

SENTENCES = ["I didn't know that you could speak French.", "The red car is in front of my house."]
PLACES = ("own", "+1", "-1", "last", "first", "elsewhere")


def load(config: str, weights: Path):
    cfg = typed(CONFIGS[config])
    data = data_for(cfg)
    model = build_model(cfg, len(data.tokenizer))
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))  # what --save writes
    return model.eval(), data


def copied_pieces(model, data) -> dict:
    ids = [data.tokenizer.encode(s) for s in data.test_sources]
    outputs, weights = translate(model, ids, data.tokenizer, max_len=40, return_weights=True)
    counts = dict.fromkeys(PLACES, 0)
    on_own = 0.0
    for src_ids, out, w in zip(ids, outputs, weights):
        keys = [data.tokenizer.decode([i]).strip() for i in src_ids]
        for t, piece in enumerate(p.strip() for p in data.tokenizer.tokens(out)):
            if len(piece) < 2 or not piece[0].isalnum() or keys.count(piece) != 1:
                continue
            j, peak = keys.index(piece), int(w[t].argmax())
            place = (
                "own"
                if peak == j
                else "+1"
                if peak == j + 1
                else "-1"
                if peak == j - 1
                else "last"
                if peak == len(keys) - 1
                else "first"
                if peak == 0
                else "elsewhere"
            )
            counts[place] += 1
            on_own += float(w[t, j])
    n = sum(counts.values())
    return {"sentences": len(ids), "pieces": n, "peaks": counts, "mean_weight_on_own": on_own / n}


def maps(model, data) -> list[dict]:
    ids = [data.tokenizer.encode(s) for s in SENTENCES]
    outputs, weights = translate(model, ids, data.tokenizer, max_len=40, return_weights=True)
    result = []
    for sentence, src_ids, out, w in zip(SENTENCES, ids, outputs, weights):
        pieces = data.tokenizer.tokens(out) + ["<eos>"]
        result.append(
            {
                "source": sentence,
                "output": out,
                "keys": [data.tokenizer.decode([i]) for i in src_ids],
                "queries": pieces,
                "weights": [[round(float(x), 4) for x in row] for row in w[: len(pieces)]],
            }
        )
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for side in ("one-way", "bidirectional"):
        p.add_argument(f"--{side}", type=Path, required=True)
        p.add_argument(f"--{side}-run", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    result: dict = {"command": "python tests/benchmarks/alignment_peaks.py " + " ".join(sys.argv[1:]), "models": {}}
    for side, weights, run_file in (
        ("one-way", args.one_way, args.one_way_run),
        ("bidirectional", args.bidirectional, args.bidirectional_run),
    ):
        run = json.loads(run_file.read_text())
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        model, data = load(run["config"], weights)
        entry = {
            "config": run["config"],
            "trained_by": run["command"],
            "steps": run["steps"],
            "valid_bleu": run["score"],
            "test_bleu": run["test_score"],
            "weights_sha256": digest,
            "copied": copied_pieces(model, data),
            "maps": maps(model, data),
        }
        result["models"][side] = entry
        c = entry["copied"]
        shares = ", ".join(f"{k} {v / c['pieces']:.1%}" for k, v in c["peaks"].items())
        print(
            f"{side}: {c['pieces']} copied pieces in {c['sentences']} sentences: {shares}; "
            f"mean weight on its own piece {c['mean_weight_on_own']:.2f}",
            flush=True,
        )
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
