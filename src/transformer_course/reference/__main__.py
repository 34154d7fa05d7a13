"""python -m transformer_course.reference {bleu,sample,compact,translate} NAME: see the package's docstring.

``translate NAME [--beam 1|4] [--weights stored|float16] TEXT`` prints ``{"pieces": [...], "output": "..."}``, the
contract of the book's page (``reference.browser``): the page's ``window.courseModel.translate`` answers the same.
Text the model is not asked about (nothing typed, too long) prints ``{"refused": "why"}`` and exits with status 2."""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from . import NAMES, _path, load_reference, sample_record


def _compact(name: str, form: str) -> int:
    """Store a float32 reference model's weights in a compact form, once, after scoring that form.

    The run keeps the trained weights' scores (``score``, ``test_score``); ``stored_weights`` adds the stored form's,
    greedy on the validation and the test set, decoded here, as the GPU run records its own (``gpu.phases``)."""
    from ..evaluation.translate import evaluate_bleu
    from ..training.compact_weights import is_compact, rounded_copy, save_compact

    path = _path(name, ".pt")
    if is_compact(torch.load(path, map_location="cpu", weights_only=True)):
        raise SystemExit(f"{path} is stored compactly already: compacting it again would round it twice")
    model, data, run = load_reference(name)
    stored = rounded_copy(model, form).eval()
    with torch.no_grad():
        valid, test = (evaluate_bleu(stored, data, split) for split in ("valid", "test"))
    trained_digest = run["weights_sha256"]
    run["weights_sha256"] = save_compact(model.state_dict(), form, path)
    run["stored_weights"] = {
        "form": form,
        "bytes": path.stat().st_size,
        "command": f"python -m transformer_course.reference compact {name} --form {form}",
        "why": "the repository travels to a GPU machine (64 MiB in all): float32 weights would double the file",
        "trained_weights_sha256": trained_digest,  # the float32 file the trainer wrote
        "valid_score": valid,
        "test_score": test,
        "threads": torch.get_num_threads(),
    }
    _path(name, ".json").write_text(json.dumps(run, indent=1) + "\n")
    print(
        f"{name}: {form}, {path.stat().st_size / 2**20:.1f} MiB; greedy BLEU of the stored weights: validation "
        f"{valid:.2f} (trained {run['score']:.2f}), test {test:.2f} (trained {run['test_score']:.2f})"
    )
    return 0


def _translate(name: str, text: str | None, beam: int, weights: str) -> int:
    from .browser import InputRefused, load_translator, translate

    if text is None:
        raise SystemExit("translate needs the TEXT to translate")
    model, tokenizer = load_translator(name, weights)
    try:
        answer = translate(model, tokenizer, text, beam)
    except InputRefused as refused:
        print(json.dumps({"refused": str(refused)}, ensure_ascii=False))
        return 2
    print(json.dumps(answer, ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m transformer_course.reference",
        description="Check or refresh what is stored with a reference model.",
    )
    p.add_argument(
        "what",
        choices=["bleu", "sample", "compact", "translate"],
        help="bleu: decode the whole test set again and compare with the stored BLEU; "
        "sample: write NAME-sample.json from the stored weights; "
        "compact: store float32 weights in a compact form (then run sample again); "
        "translate: translate TEXT and print its BPE pieces and the output as JSON (the book page's contract)",
    )
    p.add_argument("name", choices=NAMES)
    p.add_argument("text", nargs="?", help="for translate: the English text")
    p.add_argument("--beam", type=int, choices=[1, 4], default=1, help="for translate: 1 greedy, 4 beam search")
    p.add_argument(
        "--weights",
        choices=["stored", "float16"],
        default="stored",
        help="for translate: the stored weights, or rounded to float16 as the book's page holds them",
    )
    p.add_argument("--threads", type=int, default=2, help="CPU threads (default 2, the course's budget)")
    p.add_argument("--form", choices=["float16", "int8"], default="float16", help="for compact (default float16)")
    args = p.parse_intermixed_args(argv)  # the text may come after --beam
    torch.set_num_threads(args.threads)
    if args.what == "compact":
        return _compact(args.name, args.form)
    if args.what == "translate":
        return _translate(args.name, args.text, args.beam, args.weights)
    model, data, run = load_reference(args.name)
    if args.what == "sample":
        record = sample_record(args.name, model, data, run)
        _path(args.name, "-sample.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {_path(args.name, '-sample.json')}")
        return 0
    from ..evaluation.translate import evaluate_bleu

    start = time.perf_counter()
    with torch.no_grad():
        bleu = evaluate_bleu(model, data, "test")  # as the trainer scored the test set at the end of its run
    # Weights stored compactly were scored in that form too (greedy; by a GPU run on the GPU): compare with that
    # score. Decoded on another device, a near tie between two tokens can fall the other way, hence 0.1 there.
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
