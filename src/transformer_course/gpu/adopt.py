"""A GPU run's results into the course: ``python -m transformer_course.gpu adopt DIR``, here, on the CPU.

The run JSONs and the benchmarks go to ``runs/`` (where chapter 8 reads them), the Transformer's run and compact
weights to ``reference/`` beside the hour-long CPU models, and its sample translations are decoded here, on the CPU,
from those very weights: the test suite decodes them again and must find them to the token (tests/test_reference.py).
Only finished results are taken; a run cut short has its finished files adopted and the rest named.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch

from . import FILES

__all__ = ["adopt"]

PACKAGE = Path(__file__).resolve().parents[1]
TO_RUNS = ("machine", "log", "throughput", "step_time", "gru")
TO_REFERENCE = ("transformer", "weights")


def _finished(path: Path) -> bool:
    if path.suffix != ".json":
        return True
    run = json.loads(path.read_text())
    return run.get("finished", True) is not False and (
        "curve" not in run or run.get("test_score") is not None
    )  # a training run: tested at its end


def adopt(
    results: Path, runs: Path | None = None, reference: Path | None = None, dry_run_ok: bool = False
) -> list[str]:
    """Copy a GPU run's finished files from ``results`` into the course and write the Transformer's sample; returns
    one line per thing done or left out. A dry run's results are refused unless ``dry_run_ok`` (its tests)."""
    from ..reference import load_reference, sample_record

    results = Path(results)
    runs = PACKAGE / "runs" if runs is None else Path(runs)
    reference = PACKAGE / "reference" if reference is None else Path(reference)
    machine = results / FILES["machine"]
    if not machine.is_file():
        raise FileNotFoundError(f"{machine} is missing: is {results} the folder a GPU run wrote (its --out)?")
    record = json.loads(machine.read_text())
    if record.get("dry_run") and not dry_run_ok:
        raise ValueError(f"{results} holds a dry run (on the CPU, tiny budgets): its figures are not the GPU's")
    lines = []
    for key in TO_RUNS + TO_REFERENCE:
        source = results / FILES[key]
        if not source.is_file() or not _finished(source):
            lines.append(f"left out {FILES[key]}: {'missing' if not source.is_file() else 'not finished'}")
            continue
        target = (runs if key in TO_RUNS else reference) / FILES[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        lines.append(f"copied {FILES[key]} to {target}")
    weights, run = reference / FILES["weights"], reference / FILES["transformer"]
    if weights.is_file() and run.is_file():
        recorded = json.loads(run.read_text()).get("weights_sha256")
        if hashlib.sha256(weights.read_bytes()).hexdigest() != recorded:
            raise ValueError(f"{weights} is not the file the run's JSON describes: copy both from the same run")
        name = FILES["transformer"].removesuffix(".json")
        threads = torch.get_num_threads()
        torch.set_num_threads(2)  # as the test that decodes the sample again
        try:
            model, data, stored = load_reference(name, folder=reference)
            sample = sample_record(name, model, data, stored)
        finally:
            torch.set_num_threads(threads)
        path = reference / f"{name}-sample.json"
        path.write_text(json.dumps(sample, indent=1, ensure_ascii=False) + "\n")
        lines.append(f"decoded the sample of {name} here, from the stored weights: {path}")
    return lines
