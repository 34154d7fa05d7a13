"""Train a translation model from the command line: the same training as the notebooks, on any device,
and under ``torchrun`` with DistributedDataParallel.

    python -m transformer_course.train --config bahdanau-cpu --minutes 15 --eval-every-minutes 1 --out runs/b.json
    torchrun --standalone --nproc_per_node=2 -m transformer_course.train --config transformer-cpu --steps 100

``--data copy`` trains on a small synthetic task (repeating digit strings) instead of Tatoeba, for quick
checks. The JSON written by ``--out`` holds the command, the configuration, the machine, the curve of
held-out BLEU (or exact match, for ``copy``) against training time, and the final score.
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
    p.add_argument("--config", default="transformer-cpu", choices=sorted(CONFIGS),
                   help="a configuration of transformer_course.translation.CONFIGS")
    p.add_argument("--data", default="tatoeba", choices=["tatoeba", "copy"])
    budget = p.add_argument_group("budget (training time excludes evaluation)")
    budget.add_argument("--steps", type=int, help="stop after this many updates")
    budget.add_argument("--minutes", type=float, help="stop after this many minutes of training")
    p.add_argument("--eval-every-minutes", type=float, default=0.0,
                   help="score the model on the test set every so many minutes of training (0: at the end only)")
    p.add_argument("--peak-lr", type=float, help="override the configuration's peak learning rate")
    p.add_argument("--warmup", type=int, help="override the configuration's warm-up steps")
    p.add_argument("--max-tokens", type=int, help="override the configuration's tokens per batch")
    p.add_argument("--device", help="cpu, cuda or mps (default: CUDA, then MPS, then the CPU)")
    p.add_argument("--threads", type=int, help="CPU threads per process (default: PyTorch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", type=Path, help="save here at the end, and resume from here if it exists")
    p.add_argument("--out", type=Path, help="write the run (curve, score, configuration, machine) as JSON here")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    return p


def _copy_task(max_tokens: int, seed: int):
    """Digit strings to repeat: a small task whose data takes no time to make."""
    from .data.batching import token_batches
    from .data.digits import digit_vocab, make_digit_pairs

    vocab = digit_vocab()
    train = make_digit_pairs(4000, 3, 12, seed=seed)
    test = make_digit_pairs(200, 3, 12, seed=seed + 1000)
    batches = token_batches([vocab.encode(a) for a, _ in train], [vocab.encode(b) for _, b in train], max_tokens,
                            vocab.pad_id, vocab.eos_id, seed=seed)
    return vocab, batches, test


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.steps is None and args.minutes is None:
        _parser().error("give a budget: --steps N, --minutes M, or both")
    from .translation import CONFIGS, build_model, evaluate_bleu, load_data

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

    config = {**CONFIGS[args.config]}
    for key, value in (("peak_lr", args.peak_lr), ("warmup", args.warmup), ("max_tokens", args.max_tokens)):
        if value is not None:
            config[key] = value
    if args.data == "copy":
        vocab, batches, test = _copy_task(config["max_tokens"], args.seed)
        vocab_size = len(vocab)

        def evaluate(model):
            from .metrics import exact_match
            from .seq2seq import translate

            return 100 * exact_match(translate(model, [vocab.encode(a) for a, _ in test], vocab, 14),
                                     [b for _, b in test])
    else:
        data = load_data(config["max_tokens"], args.seed)
        batches, vocab_size = data.train, len(data.tokenizer)

        def evaluate(model):
            return evaluate_bleu(model, data)

    model = build_model(config, vocab_size, seed=args.seed).to(device)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    settings = Settings(steps=args.steps, seconds=args.minutes * 60 if args.minutes else None,
                        peak_lr=config["peak_lr"], warmup=config["warmup"], smoothing=config.get("smoothing", 0.1),
                        seed=args.seed, eval_every_seconds=args.eval_every_minutes * 60)
    log = (lambda line: print(line, flush=True)) if rank == 0 else None
    start = time.perf_counter()
    history = fit(model, batches, settings, evaluate=evaluate, checkpoint=args.checkpoint, device=device,
                  progress=not args.no_progress, log=log)
    core = model.module if hasattr(model, "module") else model
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
        "config": args.config, "settings": config, "data": args.data, "world_size": world,
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else
        platform.processor() or platform.machine(), "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "parameters": sum(p.numel() for p in core.parameters()),
        "steps": history["step"], "train_seconds": history["seconds"], "tokens": history["tokens"],
        "wall_seconds": time.perf_counter() - start,
        "curve": [{"step": s, "seconds": t, "score": v} for s, t, v in history["eval"]],
        "score": history["eval"][-1][2] if history["eval"] else None,
        "metric": "BLEU" if args.data == "tatoeba" else "exact match (%)",
        "parameter_digests": digests,  # one per process: equal under DDP
    }
    if rank == 0:
        print(f"{result['metric']} {result['score']:.2f} after {history['step']} steps, "
              f"{history['seconds']:.0f} s of training on {world} x {device}", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
