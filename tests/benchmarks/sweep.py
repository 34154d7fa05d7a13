"""Tune a configuration for a time budget on validation BLEU: the sweeps of book/instructor/models.md.

    .venv/bin/python tests/benchmarks/sweep.py speed SPEC.json           # 1. the cost of a step of each trial
    .venv/bin/python tests/benchmarks/sweep.py run SPEC.json             # 2. train every trial, two at a time
    .venv/bin/python tests/benchmarks/sweep.py summary SPEC.json OUT.json  # 3. one table, stored with the commands

SPEC.json names the sweep's trials: {"budget_seconds": 300, "two_thread_speedup": 1.5, "trials": {"T01": {"base":
"transformer-cpu", "set": {"dropout": 0.0}}, ...}}. A trial is a configuration of CONFIGS with overrides.

Why steps, not seconds: every trial gets the number of steps that its configuration trains in ``budget_seconds``
on two cores, and trains them on one thread, two trials at a time, so that a sweep uses both cores and its
result does not depend on what else the machine did meanwhile. The cost of a step is measured in CPU time on
one thread (``time.process_time``, which other work on the machine hardly changes; 30 steps after a warm-up,
and trials whose step costs the same, the same architecture and batches, share the mean of their
measurements), then scaled by the two-thread speed-up measured for the base configuration on an idle machine.
Each trial is a run of the command-line trainer (``--steps N --threads 1 --no-test``): it scores validation BLEU
at the end and never decodes the test set.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COST_KEYS = (
    "model",
    "d_model",
    "n_heads",
    "n_encoder_layers",
    "n_decoder_layers",
    "d_ff",
    "dropout",
    "max_tokens",
    "d_emb",
    "d_hidden",
    "d_att",
    "d_readout",
    "vocab",
)


def _config(trial: dict) -> dict:
    from transformer_course.training.configs import CONFIGS

    return {**CONFIGS[trial["base"]], **trial["set"]}


def speed(spec_path: Path) -> None:
    """Steps per CPU-second on one thread, for every trial: written to SPEC.speed.json."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from steps_per_second import timed_steps  # this script's folder is on the path when it runs

    torch.set_num_threads(1)
    spec = json.loads(spec_path.read_text())
    out = spec_path.with_suffix(".speed.json")
    result = json.loads(out.read_text()) if out.exists() else {}
    for name, trial in spec["trials"].items():
        if name in result:
            continue
        history, _, cpu = timed_steps(_config(trial), 30, warmup=(5, 3))
        result[name] = {"steps_per_cpu_second": history["step"] / cpu, "tokens_per_cpu_second": history["tokens"] / cpu}
        print(name, result[name], flush=True)
        out.write_text(json.dumps(result, indent=1) + "\n")


def budgets(spec: dict, measured: dict) -> dict[str, int]:
    """Steps per trial: the budget at the mean speed of the trials of equal cost, times the two-thread speed-up."""
    groups: dict[tuple, list[str]] = {}
    for name, trial in spec["trials"].items():
        cfg = _config(trial)
        groups.setdefault(tuple(cfg.get(k) for k in COST_KEYS), []).append(name)
    steps = {}
    for names in groups.values():
        rate = statistics.mean(measured[n]["steps_per_cpu_second"] for n in names)
        for n in names:
            steps[n] = round(spec["budget_seconds"] * spec["two_thread_speedup"] * rate)
    # A trial added after others of its cost had run names their budget, so that equal cost means equal steps.
    steps.update({n: t["steps"] for n, t in spec["trials"].items() if "steps" in t})
    return steps


def command(spec: dict, name: str, steps: int, outdir: Path) -> list[str]:
    trial = spec["trials"][name]
    sets = [f"{k}={json.dumps(v)}" for k, v in trial["set"].items()]
    return [
        "python",
        "-m",
        "transformer_course.training.train",
        "--config",
        trial["base"],
        "--steps",
        str(steps),
        "--threads",
        "1",
        "--no-test",
        "--no-progress",
        "--seed",
        str(trial.get("seed", 0)),
        "--out",
        str(outdir / f"{name}.json"),
    ] + (["--set", *sets] if sets else [])


def run(spec_path: Path, names: list[str]) -> None:
    """Train the trials (all, or those named) two at a time on one thread each; each writes OUTDIR/NAME.json."""
    spec = json.loads(spec_path.read_text())
    steps = budgets(spec, json.loads(spec_path.with_suffix(".speed.json").read_text()))
    outdir = spec_path.with_suffix("")
    outdir.mkdir(exist_ok=True)
    queue = [n for n in (names or spec["trials"]) if not (outdir / f"{n}.json").exists()]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "TQDM_DISABLE": "1"}
    running: list[tuple[str, subprocess.Popen]] = []
    while queue or running:
        while queue and len(running) < 2:
            name = queue.pop(0)
            cmd = command(spec, name, steps[name], outdir)
            print(time.strftime("%H:%M:%S"), "start", name, " ".join(cmd), flush=True)
            log = open(outdir / f"{name}.log", "w")
            running.append(
                (name, subprocess.Popen([sys.executable, *cmd[1:]], env=env, stdout=log, stderr=subprocess.STDOUT))
            )
        time.sleep(5)
        for name, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, proc))
                print(time.strftime("%H:%M:%S"), "done", name, "exit", proc.returncode, flush=True)


def summary(spec_path: Path, out: Path) -> None:
    """One JSON: the protocol, and per trial its overrides, command, steps, validation BLEU and speed."""
    spec = json.loads(spec_path.read_text())
    measured = json.loads(spec_path.with_suffix(".speed.json").read_text())
    outdir = spec_path.with_suffix("")
    trials = []
    for name, trial in spec["trials"].items():
        path = outdir / f"{name}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        trials.append(
            {
                "name": name,
                "base": trial["base"],
                "set": trial["set"],
                "settings": r["settings"],
                "command": r["command"],
                "steps": r["steps"],
                "parameters": r["parameters"],
                "valid_bleu": r["score"],
                "tokens_per_cpu_second": measured[name]["tokens_per_cpu_second"],
                "train_seconds_one_thread": r["train_seconds"],
                "torch": r["torch"],
            }
        )
    result = {
        "protocol": __doc__.split("\n\n", 2)[2].strip(),
        "budget_seconds": spec["budget_seconds"],
        "two_thread_speedup": spec["two_thread_speedup"],
        "trials": trials,
        **{k: spec[k] for k in ("notes", "two_thread_speedup_measured", "dropped_before_running") if k in spec},
        "speed_notes": {n: m["note"] for n, m in measured.items() if "note" in m},
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    for t in sorted(trials, key=lambda t: -t["valid_bleu"]):
        print(f"{t['name']}  {t['valid_bleu']:5.2f}  {t['steps']:5d} steps  {t['set']}")


if __name__ == "__main__":
    verb, path = sys.argv[1], Path(sys.argv[2])
    if verb == "speed":
        speed(path)
    elif verb == "run":
        run(path, sys.argv[3:])
    elif verb == "summary":
        summary(path, Path(sys.argv[3]))
    else:
        sys.exit(f"unknown verb {verb!r}: speed, run or summary")
