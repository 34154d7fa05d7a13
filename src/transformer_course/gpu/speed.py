"""The GPU run's second version, its first part: how fast a training step of the GPU Transformer can go, and how much
of the GPU it uses. ``python -m transformer_course.gpu speed --out DIR --minutes 4`` (no pack: random batches).

In order, under one deadline, each result written to ``gpu-speed.json`` as soon as it exists:

1. the machine (``machine.describe``);
2. the peak: a large bf16 matrix product (8192 cubed, random data, CUDA events, median of ten after three warm-ups),
   the rate any model-FLOPs utilisation (MFU) is measured against;
3. the FLOPs of one training step (forward, label-smoothed loss, backward) of the course's Transformer
   (``transformer-gpu``) and of ``nn.Transformer`` of the same size, counted by PyTorch's ``FlopCounterMode``
   (matrix products and attention: what the matrix units do), per target token;
4. training throughput with bf16 autocast, four models alternating round by round on the same batches (about
   11,000 target tokens each): the course's Transformer and ``nn.Transformer``, each eager and compiled
   (``training.compiled``: ``torch.compile``, Inductor's Triton kernels). Each model's MFU is its FLOPs per token
   times its tokens a second over the peak.

``--dry-run`` runs the same code on the CPU in seconds (``transformer-tiny``, tiny batches, no peak product):
``tests/test_gpu.py`` does, so that a GPU's minutes are never spent on a typo. ``adopt`` takes its file.
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

__all__ = ["SPEED_FILE", "speed"]

SPEED_FILE = "gpu-speed.json"
GPU: dict = {"config": "transformer-gpu", "rounds": 5, "steps": 10, "warmup": 8, "sentences": 800, "peak_n": 8192}
DRY_RUN: dict = {"config": "transformer-tiny", "rounds": 1, "steps": 1, "warmup": 2, "sentences": 4, "peak_n": 0}


def peak_tflops(device: torch.device, n: int) -> dict:
    """bf16 matrix-product rate on random data: the median of ten timed products after three warm-ups."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    times = []
    for i in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize(device)
        if i >= 3:
            times.append(start.elapsed_time(end) / 1000)
    seconds = statistics.median(times)
    return {"n": n, "seconds": seconds, "tflops": 2 * n**3 / seconds / 1e12}


def step_flops(model: torch.nn.Module, batches: list) -> float:
    """FLOPs of one training step per target token, over the batches (FlopCounterMode counts matrix products)."""
    from torch.utils.flop_counter import FlopCounterMode

    from ..training.loop import label_smoothed_loss

    flops, tokens = 0, 0
    for batch in batches:
        with FlopCounterMode(display=False) as counter:
            out = model(batch.src, batch.src_mask, batch.tgt)
            logits = out[0] if isinstance(out, tuple) else out
            label_smoothed_loss(logits, batch.tgt, batch.tgt_mask).backward()
        model.zero_grad(set_to_none=True)
        flops += counter.get_total_flops()
        tokens += int(batch.tgt_mask.sum())
    return flops / tokens


def _phase(record: dict, out: Path, deadline: float, name: str, work) -> None:
    t0 = time.time()
    if time.time() >= deadline:
        status = "skipped: past the run's deadline"
    else:
        print(f"\n== {name} ({deadline - time.time():.0f} s left)", flush=True)
        try:
            work()
            status = "done"
        except Exception as exc:  # noqa: BLE001 - recorded, and the run goes on
            traceback.print_exc()
            status = f"failed: {type(exc).__name__}: {exc}"
    record["phases"].append({"phase": name, "status": status, "seconds": round(time.time() - t0, 2)})
    print(f"-- {name}: {status}", flush=True)
    (out / SPEED_FILE).write_text(json.dumps(record, indent=1) + "\n")


def speed(out: Path, minutes: float, device: torch.device, dry_run: bool, command: str) -> int:
    """Run the phases above into ``out``; 0 when every phase was done."""
    from ..data.translation import VOCAB_SIZE
    from ..measurement.speed import random_batches, throughput
    from ..models.transformer_torch import to_torch
    from ..training.compiled import compile_model, warm_up
    from ..training.configs import CONFIGS
    from ..training.kinds import build_model
    from .machine import describe

    budget: dict = DRY_RUN if dry_run else GPU
    bf16 = device.type == "cuda"
    deadline = time.time() + 60 * minutes
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {"command": command, "dry_run": dry_run, "minutes": minutes, "budget": budget, "phases": []}
    record["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    config = CONFIGS[budget["config"]]
    batches = [x.to(device) for x in random_batches(8, budget["sentences"], VOCAB_SIZE, 8, 20, seed=0)]
    ours = build_model(config, VOCAB_SIZE, seed=0).to(device)
    theirs = to_torch(ours).to(device)  # type: ignore[arg-type]

    def machine() -> None:
        record["machine"] = describe(device)
        record["settings"] = {"config": budget["config"], **config}
        record["parameters"] = sum(p.numel() for p in ours.parameters())

    def peak() -> None:
        if device.type == "cuda":
            record["peak"] = peak_tflops(device, budget["peak_n"])
            print(f"bf16 matrix product {budget['peak_n']}^3: {record['peak']['tflops']:.0f} TFLOP/s", flush=True)

    def flops() -> None:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            record["flops_per_target_token"] = {"ours": step_flops(ours, batches), "torch": step_flops(theirs, batches)}
        print(f"FLOPs per target token: {record['flops_per_target_token']}", flush=True)

    def measure() -> None:
        models = {"ours": ours, "ours, compiled": ours, "torch": theirs, "torch, compiled": theirs}
        for name in ("ours, compiled", "torch, compiled"):  # compiled first, apart: one that fails is left out
            start = time.time()
            try:
                models[name] = compile_model(copy.deepcopy(models[name]))
                warm_up(models[name], batches, device, bf16)  # every shape compiled off the clock
                record.setdefault("compile_seconds", {})[name] = round(time.time() - start, 1)
            except Exception as exc:  # noqa: BLE001 - the eager pair is still worth measuring
                traceback.print_exc()
                record.setdefault("compile_failed", {})[name] = f"{type(exc).__name__}: {exc}"
                del models[name]
        b = budget
        result = throughput(models, batches, b["rounds"], b["steps"], b["warmup"], bf16, log=print)
        record["throughput"] = result
        rate = result["tokens_per_second"]
        pairs = {
            "ours / torch, eager": ("ours", "torch"),
            "ours / torch, compiled": ("ours, compiled", "torch, compiled"),
            "ours compiled / eager": ("ours, compiled", "ours"),
            "torch compiled / eager": ("torch, compiled", "torch"),
        }
        record["ratios"] = {k: rate[a] / rate[b] for k, (a, b) in pairs.items() if a in rate and b in rate}
        if "peak" in record and "flops_per_target_token" in record:
            per_token = record["flops_per_target_token"]
            record["mfu"] = {
                name: per_token["ours" if name.startswith("ours") else "torch"] * r / (record["peak"]["tflops"] * 1e12)
                for name, r in rate.items()
            }

    for name, work in (("machine", machine), ("peak", peak), ("FLOPs", flops), ("throughput", measure)):
        _phase(record, out, deadline, name, work)
    for key in ("ratios", "mfu"):
        for name, value in record.get(key, {}).items():
            print(f"{key}: {name}: {value:.3f}", flush=True)
    failed = [p for p in record["phases"] if p["status"] != "done"]
    print(f"files in {out}: {SPEED_FILE}", file=sys.stdout, flush=True)
    return 1 if failed else 0
