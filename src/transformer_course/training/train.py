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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from .averaging import LastEvaluations
from .loop import Settings, fit, pick_device
from .options import configuration
from .options import parser as _parser
from .run_record import machine_record, run_record

__all__ = ["TrainerRun", "configuration", "main", "parameter_digest", "train"]


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal digests mean bit-identical models."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


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


@dataclass
class _Task:
    """What a run trains on and how it is scored: the batches, the vocabulary's size, and the two evaluations."""

    batches: list
    vocab_size: int
    evaluate: Callable[[torch.nn.Module], float]  # on the validation set (the curve)
    final_test: Callable[[torch.nn.Module], float] | None  # on the test set, once at the end (None: no test set)
    data: object = None  # translation.TranslationData, for Tatoeba


def _processes(args) -> tuple[int, int, torch.device]:
    """(world size, rank, device): one process, or one of torchrun's (DistributedDataParallel set up here)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = pick_device(args.device)
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if args.threads:
        torch.set_num_threads(args.threads)
    return world, rank, device


def _task(args, config) -> _Task:
    """Tatoeba (its validation and test sets, or their first --limit-held-out sentences), or the copy task."""
    if args.data == "copy":
        from ..data.digits import copy_task
        from ..evaluation.metrics import exact_match
        from ..evaluation.translate import translate

        vocab, batches, test = copy_task(config.max_tokens, args.seed)

        def copied(model):
            outputs = translate(model, [vocab.encode(a) for a, _ in test], vocab, 14)
            return 100 * exact_match(outputs, [b for _, b in test])

        return _Task(batches, len(vocab), copied, None)
    from ..data.translation import data_for
    from ..evaluation.translate import evaluate_bleu

    data = data_for(config, args.seed)
    if args.limit_held_out:
        parts = [f"{part}_{what}" for part in ("valid", "test") for what in ("sources", "references", "ids")]
        data = dataclasses.replace(data, **{name: getattr(data, name)[: args.limit_held_out] for name in parts})
    if args.teacher_share:  # the same pairs, some targets the teacher's (training.teacher)
        from .teacher import distilled_batches

        data = dataclasses.replace(
            data, train=distilled_batches(data, args.teacher_share, config.max_tokens, args.seed)
        )
    return _Task(
        data.train,
        len(data.tokenizer),
        lambda model: evaluate_bleu(model, data, "valid"),
        lambda model: evaluate_bleu(model, data, "test"),
        data,
    )


def _parse(argv: list[str]):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.steps is None and args.minutes is None:
        parser.error("give a budget: --steps N, --minutes M, or both")
    if args.limit_held_out is not None and args.limit_held_out < 1:
        parser.error(f"--limit-held-out must be a positive number of sentences, got {args.limit_held_out}")
    if args.tatoeba is not None:
        from ..data.tatoeba import ENVIRONMENT_VARIABLE, TatoebaUnavailable

        if not args.tatoeba.is_file():
            raise TatoebaUnavailable(f"--tatoeba {args.tatoeba}: no such file (spa.tsv, or spa.tsv.xz)")
        os.environ[ENVIRONMENT_VARIABLE] = str(args.tatoeba)
    return args


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
    from .kinds import build_model, typed

    args = _parse(argv)
    world, rank, device = _processes(args)
    config = configuration(args)  # the named configuration and its overrides, recorded with the run
    budget = {"steps": args.steps, "seconds": args.minutes * 60 if args.minutes else None}
    typed_config = dataclasses.replace(typed(config), **budget)  # one typed configuration for all that follows
    task = _task(args, typed_config)
    core = build_model(typed_config, task.vocab_size, seed=args.seed).to(device)
    model = core
    compile_seconds = None
    if args.compile:  # compiled before the clock starts: the budget is training time (training.compiled)
        from .compiled import compile_model, shape_samples, warm_up

        model = compile_model(core)
        compile_seconds = warm_up(model, shape_samples(task.batches), device, bf16=not args.fp32)
        print(f"compiled in {compile_seconds:.1f} s, before the clock started", flush=True)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(core, device_ids=[device] if device.type == "cuda" else None)
    settings = Settings.from_config(
        typed_config,
        seed=args.seed,
        eval_every_seconds=args.eval_every_minutes * 60,
        eval_every_steps=args.eval_every_steps,
        deadline=deadline,
        bf16=not args.fp32,
    )
    machine = machine_record(device, world)
    parameters = sum(p.numel() for p in core.parameters())
    start = time.perf_counter()

    def record(history: dict, finished: bool) -> dict:
        result = run_record(args, argv, config, machine, history, parameters, time.perf_counter() - start)
        if device.type == "cuda":
            result["autocast"] = "bfloat16" if settings.bf16 else None
        if deadline is not None and finished:  # it stopped before its budget: the deadline stopped it
            budget_reached = (args.steps is not None and history["step"] >= args.steps) or (
                args.minutes is not None and history["seconds"] >= 60 * args.minutes
            )
            result["stopped_by_deadline"] = not budget_reached
        if launched_by is not None:
            result["launched_by"] = launched_by
        if compile_seconds is not None:
            result["compile_seconds"] = round(compile_seconds, 2)
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

    averager = LastEvaluations(task.evaluate, args.average_last) if args.average_last else None
    history = fit(
        model,
        task.batches,
        settings,
        evaluate=averager or task.evaluate,
        checkpoint=args.checkpoint,
        device=device,
        progress=not args.no_progress,
        log=(lambda line: print(line, flush=True)) if rank == 0 else None,
        after_eval=write_progress,
    )
    result = record(history, finished=True)
    if task.final_test is not None and rank == 0 and not args.no_test:
        result["test_score"] = task.final_test(core)
    if averager is not None and rank == 0:  # the last evaluations' weights averaged, chosen on validation
        result["averaged"] = averager.report(core, task.evaluate, None if args.no_test else task.final_test)
    result["parameter_digests"] = _digests(core, world, rank)  # one per process: equal under DDP
    if rank == 0:
        _finish(args, result, core, history, world, device)
    if world > 1:
        dist.destroy_process_group()
    return TrainerRun(result, core.eval(), task.data)


def _digests(core: torch.nn.Module, world: int, rank: int) -> list:
    digests: list = [parameter_digest(core)]
    if world > 1:
        digests = [None] * world
        dist.all_gather_object(digests, parameter_digest(core))
        if rank == 0 and len(set(digests)) != 1:
            raise RuntimeError(f"the processes' parameters differ: {digests}")
    return digests


def _finish(args, result: dict, core: torch.nn.Module, history: dict, world: int, device: torch.device) -> None:
    """Say how it went, and write the weights (--save) and the run (--out)."""
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
