"""The GPU run's second version: the GPU Transformer trained twice, on people's targets and on a teacher's, each with
its step compiled, and how much of the GPU each used.

    PYTHONPATH=src python3 -m transformer_course.gpu run --version 2 --pack .gpu --out "$OUT" --minutes 9 --seed 0

Version one measured the machine, throughput and step times, and trained the Transformer and the GRU with attention.
Twice adopted, those figures stand. Version two spends the minutes on what issue 54 left open on a GPU:

1. the machine, and the pack (with the teacher's translations, ``training.teacher``: the pack must hold them);
2. the peak bf16 matrix-product rate and the FLOPs of one training step per target token (``speed``): the two
   numbers a model-FLOPs utilisation (MFU) needs;
3. the plan: two equal windows, each with room for compiling before its clock starts;
4. ``transformer-gpu`` trained on people's targets, compiled (``--compile``: ``torch.compile`` before the clock,
   the training forward one graph), Adam's fused kernel (the trainer's default on CUDA), bf16 autocast, batches of
   12,000 tokens chosen for the GPU (``configs``);
5. the same, trained on the teacher's beam-search translations (``--teacher-share 1.0``): sequence-level knowledge
   distillation (chapter 9) from the hour-long CPU reference Transformer;
6. both decoded on the test set with beam search (K = 4, alpha = 0.6), and each run's MFU: its FLOPs per target
   token times its target tokens per second of training, over the peak.

If compiling fails on the machine, that training runs eager and says so. No weights come back: version one's stored
model stays the course's GPU model. ``adopt`` keeps the records in ``runs/gpu/v2/seedN/``. ``--dry-run`` runs the
same code on the CPU with tiny budgets (``tests/test_gpu_second.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ..training.compiled import can_compile
from ..training.configs import CONFIGS
from .phases import beam_on_test, plan, train_in_window
from .run import TRANSFORMER, Budgets, Run

__all__ = ["BUDGETS", "FILES", "PHASES", "summary"]

# The files version two writes into --out (at most 8 come back).
FILES = {
    "machine": "gpu-machine.json",  # the machine, the plan, every phase's outcome; "version": 2
    "log": "gpu-run.log",
    "speed": "gpu-v2-speed.json",  # the peak and the FLOPs per target token
    "plain": "transformer-gpu-plain.json",  # the trainer's run format, plus beam search and MFU
    "distilled": "transformer-gpu-distilled.json",
}
RUNS = {"plain": [], "distilled": ["--teacher-share", "1.0"]}
_COMMON = {"beam": (4, 0.6), "reserve": 0.12, "train_share": 0.85}
BUDGETS = (
    Budgets(
        throughput={"sentences": 800, "peak_n": 8192},
        step_time={},
        train=["--eval-every-minutes", "0.5"],
        extras={"compile_seconds": 75.0},  # kept free in each window: compiling cold took 60 s on an H200
        **_COMMON,  # type: ignore[arg-type]
    ),
    Budgets(
        throughput={"sentences": 4, "peak_n": 0},
        step_time={},
        train=["--steps", "2", "--eval-every-steps", "1", "--limit-held-out", "48", "--max-tokens", "300"],
        max_tokens=300,
        extras={"compile_seconds": 0.0},
        **_COMMON,  # type: ignore[arg-type]
    ),
)


def _version(run: Run) -> None:
    from .machine import describe

    run.record["version"] = 2
    run.record["machine"] = describe(run.device)
    torch.manual_seed(run.seed)


def _data(run: Run) -> str:
    from ..training.teacher import read_teacher

    run.open_data()
    teacher = run.record["pack"]["manifest"].get("teacher")
    if not teacher:
        raise FileNotFoundError("the pack holds no teacher: make it (python -m transformer_course.reference.teacher)"
                                " and pack again (make gpu-pack)")  # fmt: skip
    run.results["teacher_lines"] = len(read_teacher())
    return f"the teacher's {run.results['teacher_lines']:,} translations"


def _speed(run: Run) -> str:
    """The peak and the FLOPs per target token of the configuration's training step, written at once."""
    from ..data.translation import VOCAB_SIZE
    from ..measurement.speed import random_batches
    from ..training.kinds import build_model
    from .speed import peak_tflops, step_flops

    b = run.budgets.throughput
    record: dict = {"command": run.command, "machine": run.machine(), "config": TRANSFORMER}
    if run.device.type == "cuda":
        record["peak"] = peak_tflops(run.device, b["peak_n"])
    model = build_model(CONFIGS[TRANSFORMER], VOCAB_SIZE, seed=run.seed).to(run.device)
    batches = [x.to(run.device) for x in random_batches(2, b["sentences"], VOCAB_SIZE, 8, 20, seed=run.seed)]
    with torch.autocast(device_type=run.device.type, dtype=torch.bfloat16, enabled=run.bf16):
        record["flops_per_target_token"] = step_flops(model, batches)
    run.results["speed"] = record
    run.save("speed", record)
    peak = f"peak {record['peak']['tflops']:.0f} TFLOP/s, " if "peak" in record else ""
    return f"{peak}{record['flops_per_target_token'] / 1e6:.1f} MFLOP per target token"


def _plan(run: Run) -> str:
    """Version one's plan (two equal windows), each window keeping the budgets' seconds for compiling."""
    note = plan(run)
    if run.device.type == "cuda" and run.results["minutes"] < 0.5:
        raise RuntimeError(f"{run.left():.0f} s left: too little to train two models (give --minutes more)")
    return note


def _train(run: Run, key: str) -> str | None:
    out = FILES[key]
    until = min(time.time() + run.results["window"], run.deadline)  # an eager retry keeps to the same window
    if can_compile(run.device):
        try:
            run.results[key] = train_in_window(
                run, TRANSFORMER, out=out, extra=[*RUNS[key], "--compile"], deadline=until
            )
            return None
        except Exception as exc:  # noqa: BLE001 - whatever broke compiling, the model still trains, eager
            note = f"eager: compiling failed ({type(exc).__name__}: {str(exc)[:200]})"
            print(note, flush=True)
    else:
        note = "eager: no C++ compiler for Inductor here (make compiler)"
    run.results[key] = train_in_window(run, TRANSFORMER, out=out, extra=RUNS[key], deadline=until)
    return note


def _finish(run: Run) -> str:
    """Beam search on the test set for both runs, and each run's MFU."""
    speed = run.results.get("speed", {})
    done = []
    for key in RUNS:
        if key not in run.results:
            continue
        trained = run.results[key]
        result = {**trained.result, **beam_on_test(run, trained.model, trained.data)}
        rate = result["tokens"] / max(result["train_seconds"], 1e-9)  # target tokens a second of training
        result["target_tokens_per_second"] = rate
        if "peak" in speed:
            result["mfu"] = speed["flops_per_target_token"] * rate / (speed["peak"]["tflops"] * 1e12)
        run.save(key, result)
        run.results[f"{key}_result"] = result
        done.append(key)
    if not done:
        raise RuntimeError("no model was trained")
    return ", ".join(done)


PHASES: list[tuple[str, Callable[[Run], str | None]]] = [
    ("machine", _version),
    ("data and teacher", _data),
    ("peak and FLOPs", _speed),
    ("plan", _plan),
    ("train on people's targets", lambda run: _train(run, "plain")),
    ("train on the teacher's targets", lambda run: _train(run, "distilled")),
    ("beam search and MFU", _finish),
]


def summary(run: Run) -> str:
    """The figures of the run in a few lines (the end of the output is what a caller sees first)."""
    m = run.record.get("machine", {})
    lines = [
        f"\n== summary, version 2: {m.get('gpu') or m.get('device')}, torch {m.get('torch')}, CUDA {m.get('cuda')}"
    ]
    lines += [f"   {p['phase']}: {p['status']} ({p['seconds']:.0f} s)" for p in run.record["phases"]]
    for key, label in (("plain", "people's targets"), ("distilled", "the teacher's targets")):
        r = run.results.get(f"{key}_result") or (run.results[key].result if key in run.results else None)
        if r is None:
            continue
        mfu = f", MFU {100 * r['mfu']:.1f} %" if "mfu" in r else ""
        beam = f", beam {r['beam']['size']} {r['test_score_beam']:.2f}" if "test_score_beam" in r else ""
        compiled = f", compiled in {r['compile_seconds']:.0f} s" if "compile_seconds" in r else ", eager"
        lines.append(
            f"{label}: {r['steps']} steps in {r['train_seconds']:.0f} s{compiled}, "
            f"{r['tokens'] / max(r['train_seconds'], 1e-9):,.0f} target tokens/s{mfu}; "
            f"validation BLEU {r['score']:.2f}, test {r['test_score']:.2f}{beam}"
        )
    lines.append(f"files in {run.out}: {', '.join(sorted(p.name for p in run.out.iterdir()))}")
    return "\n".join(lines)
