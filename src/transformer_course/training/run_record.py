"""What a trainer's run records (``python -m transformer_course.train``): the machine it ran on, and the run as its
JSON holds it (command, configuration, machine, curve and scores)."""

from __future__ import annotations

import os
import platform

import torch

__all__ = ["machine_record", "run_record"]


def machine_record(device: torch.device, world: int) -> dict:
    return {
        "world_size": world,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def run_record(args, argv, config: dict, machine: dict, history: dict, parameters: int, seconds: float) -> dict:
    """The run as its JSON holds it: command, configuration, machine, curve and scores (the test's added after)."""
    return {
        "command": "python -m transformer_course.train " + " ".join(argv),
        "config": args.config,
        "settings": config,
        "data": args.data,
        **machine,
        "parameters": parameters,
        "steps": history["step"],
        "train_seconds": history["seconds"],
        "tokens": history["tokens"],
        "wall_seconds": seconds,
        "curve": [{"step": s, "seconds": t, "score": v} for s, t, v in history["eval"]],
        "score": history["eval"][-1][2] if history["eval"] else None,
        "curve_on": "valid" if args.data == "tatoeba" else "test",  # what "curve" and "score" were measured on
        "test_score": None,  # the test set, decoded once at the end (greedy BLEU)
        "metric": "BLEU" if args.data == "tatoeba" else "exact match (%)",
    }
