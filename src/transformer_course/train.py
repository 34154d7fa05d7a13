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

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from .training import Settings, fit, pick_device

__all__ = ["main", "parameter_digest"]


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal digests mean bit-identical models."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _parser() -> argparse.ArgumentParser:
    from .translation import CONFIGS

    p = argparse.ArgumentParser(prog="python -m transformer_course.train", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--config",
        default="transformer-cpu",
        choices=sorted(CONFIGS),
        help="a configuration of transformer_course.translation.CONFIGS",
    )
    p.add_argument("--data", default="tatoeba", choices=["tatoeba", "copy"])
    budget = p.add_argument_group("budget (training time excludes evaluation)")
    budget.add_argument("--steps", type=int, help="stop after this many updates")
    budget.add_argument("--minutes", type=float, help="stop after this many minutes of training")
    p.add_argument(
        "--eval-every-minutes",
        type=float,
        default=0.0,
        help="score the model on the validation set every so many minutes of training (0: at the end only)",
    )
    p.add_argument(
        "--eval-every-steps",
        type=int,
        default=0,
        help="score the model on the validation set every so many steps (0: at the end only)",
    )
    p.add_argument("--peak-lr", type=float, help="override the configuration's peak learning rate")
    p.add_argument("--warmup", type=int, help="override the configuration's warm-up steps")
    p.add_argument("--max-tokens", type=int, help="override the configuration's tokens per batch")
    p.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        type=_override,
        help="override keys of the configuration, values in JSON (--set dropout=0 d_ff=512 norm_first=true)",
    )
    p.add_argument("--device", help="cpu, cuda or mps (default: CUDA, then MPS, then the CPU)")
    p.add_argument("--threads", type=int, help="CPU threads per process (default: PyTorch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", type=Path, help="save here at the end, and resume from here if it exists")
    p.add_argument("--out", type=Path, help="write the run (curve, score, configuration, machine) as JSON here")
    p.add_argument(
        "--save", type=Path, help="write the final weights here: a state dict for torch.load(..., weights_only=True)"
    )
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument(
        "--no-test",
        action="store_true",
        help="do not decode the test set at the end (tuning runs: they read validation BLEU only)",
    )
    return p


def _override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"the value of {key} must be JSON (a number, true, false or a \"string\"), got {value!r}"
        ) from None


def configuration(args: argparse.Namespace) -> dict:
    """The configuration a command line asks for: the named one, with its overrides."""
    from .configs import CONFIGS
    from .models import config_keys, typed

    config = {**CONFIGS[args.config]}
    for key, value in (("peak_lr", args.peak_lr), ("warmup", args.warmup), ("max_tokens", args.max_tokens)):
        if value is not None:
            config[key] = value
    for key, value in args.set:
        known = config_keys(config["model"])
        if key not in known:
            raise SystemExit(f"--set {key}: not a key of the {config['model']} configurations ({', '.join(known)})")
        config[key] = value
    try:
        typed(config)  # every value of the type its key takes
    except ValueError as exc:
        raise SystemExit(f"--set: {exc}") from None
    return config


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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.steps is None and args.minutes is None:
        _parser().error("give a budget: --steps N, --minutes M, or both")
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
        batches, vocab_size = data.train, len(data.tokenizer)

        def evaluate(model):
            return evaluate_bleu(model, data, "valid")

        def final_test(model):
            return evaluate_bleu(model, data, "test")

    model = build_model(config, vocab_size, seed=args.seed).to(device)
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
    )
    log = (lambda line: print(line, flush=True)) if rank == 0 else None
    start = time.perf_counter()
    history = fit(
        model,
        batches,
        settings,
        evaluate=evaluate,
        checkpoint=args.checkpoint,
        device=device,
        progress=not args.no_progress,
        log=log,
    )
    core = model.module if hasattr(model, "module") else model
    test_score = final_test(core) if final_test is not None and rank == 0 and not args.no_test else None
    digest = parameter_digest(core)
    digests: list = [digest]
    if world > 1:
        digests = [None] * world
        dist.all_gather_object(digests, digest)
        if rank == 0 and len(set(digests)) != 1:
            print(f"the processes' parameters differ: {digests}", file=sys.stderr)
            return 1
    result = {
        "command": "python -m transformer_course.train " + " ".join(argv if argv is not None else sys.argv[1:]),
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
        "test_score": test_score,  # the test set, decoded once at the end (greedy BLEU)
        "metric": "BLEU" if args.data == "tatoeba" else "exact match (%)",
        "parameter_digests": digests,  # one per process: equal under DDP
    }
    if rank == 0:
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
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
