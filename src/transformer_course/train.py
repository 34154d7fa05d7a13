"""Train a translation model from the command line: the same training as the notebooks, on any device,
and under ``torchrun`` with DistributedDataParallel.

    python -m transformer_course.train --config bahdanau-cpu --minutes 15 --eval-every-minutes 1 --out runs/b.json
    torchrun --standalone --nproc_per_node=2 -m transformer_course.train --config transformer-cpu --steps 100

``--data copy`` trains on a small synthetic task (repeating digit strings) instead of Tatoeba, for quick
checks. ``--set KEY=VALUE`` overrides any key of the configuration (``--set dropout=0 d_ff=512``), which is
how a sweep tries configurations. The JSON written by ``--out`` holds the command, the configuration, the
machine, the curve of validation BLEU (or exact match, for ``copy``) against training time, and the final
validation and test scores: the test set is decoded once, at the end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from .train_options import configuration
from .train_options import parser as _parser
from .training import Settings, fit, pick_device

__all__ = ["TrainerRun", "configuration", "main", "parameter_digest", "train"]


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal digests mean bit-identical models."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _copy_task(max_tokens: int, seed: int):
    """Digit strings to repeat: a small task whose data takes no time to make."""
    from .data.batching import token_batches
    from .data.digits import digit_vocab, make_digit_pairs

    vocab = digit_vocab()
    train = make_digit_pairs(4000, 3, 12, seed=seed)
    test = make_digit_pairs(200, 3, 12, seed=seed + 1000)
    batches = token_batches(
        [vocab.encode(a) for a, _ in train],
        [vocab.encode(b) for _, b in train],
        max_tokens,
        vocab.pad_id,
        vocab.eos_id,
        seed=seed,
    )
    return vocab, batches, test


@dataclass
class TrainerRun:
    """What ``train`` returns: the run as the JSON of ``--out`` holds it, the trained model, and its data."""

    result: dict
    model: torch.nn.Module  # the model itself, unwrapped from DistributedDataParallel, in eval mode
    data: object  # translation.TranslationData, or None for --data copy


def _write_json(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)  # a reader (or a run killed mid-write) never sees half a file


def train(
    argv: list[str],
    deadline: float | None = None,
    launched_by: str | None = None,
    after_eval: Callable[[dict, torch.nn.Module], None] | None = None,
) -> TrainerRun:
    """Train as ``python -m transformer_course.train ARGV`` does, and return the run, the model and the data.

    ``deadline``: a wall-clock time (time.time()) at which training stops, whatever the budget (evaluations
    included): the GPU run (``transformer_course.gpu``) calls this with one deadline for all it does. With
    ``--out``, the JSON is written after every evaluation too (``"finished": false``), so that a run cut short
    keeps its curve. ``launched_by``: the command that called this one, recorded with the run. ``after_eval(result,
    model)`` is called after every evaluation with the run so far (the GPU run saves the weights there).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.steps is None and args.minutes is None:
        parser.error("give a budget: --steps N, --minutes M, or both")
    if args.limit_held_out is not None and args.limit_held_out < 1:
        parser.error(f"--limit-held-out must be a positive number of sentences, got {args.limit_held_out}")
    if args.tatoeba is not None:
        from .data.tatoeba import ENVIRONMENT_VARIABLE, TatoebaUnavailable

        if not args.tatoeba.is_file():
            raise TatoebaUnavailable(f"--tatoeba {args.tatoeba}: no such file (spa.tsv, or spa.tsv.xz)")
        os.environ[ENVIRONMENT_VARIABLE] = str(args.tatoeba)
    from .translation import VOCAB_SIZE, build_model, evaluate_bleu, load_data

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = pick_device(args.device)
    if world > 1:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if device.type == "cuda":
            device = torch.device("cuda", local)
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if args.threads:
        torch.set_num_threads(args.threads)

    config = configuration(args)
    data = None
    if args.data == "copy":
        vocab, batches, test = _copy_task(config["max_tokens"], args.seed)
        vocab_size = len(vocab)

        def evaluate(model):
            from .evaluation import translate
            from .metrics import exact_match

            return 100 * exact_match(
                translate(model, [vocab.encode(a) for a, _ in test], vocab, 14), [b for _, b in test]
            )

        final_test = None
    else:
        data = load_data(config["max_tokens"], args.seed, config.get("vocab", VOCAB_SIZE))
        if args.limit_held_out:
            n = args.limit_held_out
            data = dataclasses.replace(
                data,
                **{
                    f"{part}_{what}": getattr(data, f"{part}_{what}")[:n]
                    for part in ("valid", "test")
                    for what in ("sources", "references", "ids")
                },
            )
        batches, vocab_size = data.train, len(data.tokenizer)

        def evaluate(model):
            return evaluate_bleu(model, data, "valid")

        def final_test(model):
            return evaluate_bleu(model, data, "test")

    model = build_model(config, vocab_size, seed=args.seed).to(device)
    core = model
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    settings = Settings(
        steps=args.steps,
        seconds=args.minutes * 60 if args.minutes else None,
        peak_lr=config["peak_lr"],
        warmup=config["warmup"],
        smoothing=config.get("smoothing", 0.1),
        seed=args.seed,
        eval_every_seconds=args.eval_every_minutes * 60,
        eval_every_steps=args.eval_every_steps,
        deadline=deadline,
        bf16=not args.fp32,
    )
    command = "python -m transformer_course.train " + " ".join(argv)
    start = time.perf_counter()

    def record(history: dict, finished: bool) -> dict:
        result = {
            "command": command,
            "config": args.config,
            "settings": config,
            "data": args.data,
            "world_size": world,
            "device": str(device),
            "device_name": torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "parameters": sum(p.numel() for p in core.parameters()),
            "steps": history["step"],
            "train_seconds": history["seconds"],
            "tokens": history["tokens"],
            "wall_seconds": time.perf_counter() - start,
            "curve": [{"step": s, "seconds": t, "score": v} for s, t, v in history["eval"]],
            "score": history["eval"][-1][2] if history["eval"] else None,
            "curve_on": "valid" if args.data == "tatoeba" else "test",  # what "curve" and "score" were measured on
            "test_score": None,  # the test set, decoded once at the end (greedy BLEU)
            "metric": "BLEU" if args.data == "tatoeba" else "exact match (%)",
        }
        if device.type == "cuda":
            result["autocast"] = "bfloat16" if settings.bf16 else None
        if deadline is not None and finished:  # it stopped before its budget: the deadline stopped it
            budget_reached = (args.steps is not None and history["step"] >= args.steps) or (
                args.minutes is not None and history["seconds"] >= 60 * args.minutes
            )
            result["stopped_by_deadline"] = not budget_reached
        if launched_by is not None:
            result["launched_by"] = launched_by
        if args.limit_held_out:
            result["limit_held_out"] = args.limit_held_out  # scored on a part of the held-out sets only
        if not finished:
            result["finished"] = False
        return result

    def write_progress(history: dict) -> None:
        if rank != 0:
            return
        result = record(history, finished=False)
        if args.out:
            _write_json(args.out, result)
        if after_eval is not None:
            after_eval(result, core)

    log = (lambda line: print(line, flush=True)) if rank == 0 else None
    history = fit(
        model,
        batches,
        settings,
        evaluate=evaluate,
        checkpoint=args.checkpoint,
        device=device,
        progress=not args.no_progress,
        log=log,
        after_eval=write_progress,
    )
    result = record(history, finished=True)
    if final_test is not None and rank == 0 and not args.no_test:
        result["test_score"] = final_test(core)
    digest = parameter_digest(core)
    digests: list = [digest]
    if world > 1:
        digests = [None] * world
        dist.all_gather_object(digests, digest)
        if rank == 0 and len(set(digests)) != 1:
            raise RuntimeError(f"the processes' parameters differ: {digests}")
    result["parameter_digests"] = digests  # one per process: equal under DDP
    if rank == 0:
        test_score = result["test_score"]
        test = f", test {test_score:.2f}" if test_score is not None else ""
        print(
            f"{result['metric']} {result['score']:.2f} ({result['curve_on']}{test}) after {history['step']} steps, "
            f"{history['seconds']:.0f} s of training on {world} x {device}",
            flush=True,
        )
        if args.save:
            args.save.parent.mkdir(parents=True, exist_ok=True)
            torch.save({k: v.detach().cpu() for k, v in core.state_dict().items()}, args.save)
            result["weights_sha256"] = hashlib.sha256(args.save.read_bytes()).hexdigest()
        if args.out:
            _write_json(args.out, result)
    if world > 1:
        dist.destroy_process_group()
    return TrainerRun(result, core.eval(), data)


def main(argv: list[str] | None = None) -> int:
    try:
        train(argv if argv is not None else sys.argv[1:])
    except RuntimeError as exc:
        if "parameters differ" not in str(exc):
            raise
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
