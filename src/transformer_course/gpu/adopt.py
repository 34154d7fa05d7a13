"""A GPU run's results into the course: ``python -m transformer_course.gpu adopt DIR``, here, on the CPU.

Every run is kept: its records (the JSON files and the log, not the weights) go to ``runs/gpu/seedN/``, so that the
chapters can quote each figure as a mean over the runs with its spread. One model is stored: the course keeps the
Transformer whose validation BLEU is the highest (the model is chosen on validation, never on test), with its run's
records beside it where chapter 8 reads them (``runs/``) and its run and compact weights in ``reference/``. The
tracked tree has room for one GPU model only (the guide's "The GPU run"). When a new run's Transformer wins, its
sample translations are decoded here, on the CPU, from those very weights: the test suite decodes them again and
must find them to the token (tests/test_reference.py). Only finished results are taken; a run cut short has its
finished files adopted and the rest named.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import torch

from . import FILES
from .speed import SPEED_FILE

__all__ = ["adopt", "adopt_second", "adopt_speed", "adopted_runs", "second_runs", "seed_of", "speed_runs"]

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


def seed_of(results: Path) -> int:
    """The seed a run's results were made with: recorded by the run since its second version, read from the
    trainers' commands before that (the first run did not pass one: seed 0)."""
    machine = json.loads((Path(results) / FILES["machine"]).read_text())
    if "seed" in machine:
        return int(machine["seed"])
    for key in ("transformer", "gru"):
        path = Path(results) / FILES[key]
        if path.is_file():
            found = re.search(r"--seed (\d+)", json.loads(path.read_text()).get("command", ""))
            if found:
                return int(found.group(1))
    return 0


def adopted_runs(runs: Path | None = None) -> dict[int, dict[str, dict]]:
    """Every adopted GPU run's records by seed: ``{seed: {"machine": ..., "transformer": ..., "gru": ...,
    "throughput": ..., "step_time": ...}}``, the files that run returned (a key is missing if its file is)."""
    return _by_seed((PACKAGE / "runs" if runs is None else Path(runs)) / "gpu", FILES)


def _by_seed(folder: Path, files: dict[str, str]) -> dict[int, dict[str, dict]]:
    """The JSON records kept in folder/seedN/, by seed and by their key in ``files``."""
    found: dict[int, dict[str, dict]] = {}
    for run in sorted(folder.glob("seed*")):
        found[int(run.name.removeprefix("seed"))] = {
            key: json.loads((run / name).read_text())
            for key, name in files.items()
            if name.endswith(".json") and (run / name).is_file()
        }
    return dict(sorted(found.items()))


def _refuse_a_dry_run(results: Path, record: dict, dry_run_ok: bool) -> None:
    if record.get("dry_run") and not dry_run_ok:
        raise ValueError(f"{results} holds a dry run (on the CPU, tiny budgets): its figures are not the GPU's")


def _refuse_a_seed_held(kept: Path, record: dict, seed: int, which: str, folder: str, held: list[int]) -> None:
    """Two runs of one seed would count twice in a mean: a seed kept from another run (another start) is refused.
    Both versions name their record gpu-machine.json (``FILES["machine"]``, ``second.FILES["machine"]``)."""
    if (kept / FILES["machine"]).is_file():
        before = json.loads((kept / FILES["machine"]).read_text()).get("started")
        if before != record.get("started"):
            raise ValueError(
                f"seed {seed}{which} is already adopted, from the run started {before}: give the next run another"
                f" --seed ({folder} holds seeds {held})"
            )


def _copy_finished(results: Path, kept: Path, files: dict[str, str], keep=lambda key: True) -> tuple[list, dict]:
    """Copy each finished file of ``files`` (by key) from results into kept (those ``keep`` accepts): one line for
    each left out, and the finished ones' paths by key."""
    lines, finished = [], {}
    for key, name in files.items():
        source = results / name
        if not source.is_file() or not _finished(source):
            lines.append(f"left out {name}: {'missing' if not source.is_file() else 'not finished'}")
            continue
        finished[key] = source
        if keep(key):
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, kept / name)
    return lines, finished


def adopt_speed(results: Path, runs: Path, dry_run_ok: bool = False) -> list[str]:
    """Keep a speed run's record (``gpu speed``: the compiled step and its MFU) as ``runs/gpu/speed/STARTED.json``;
    every such run is kept, each a repeat of the measurement."""
    record = json.loads((results / SPEED_FILE).read_text())
    _refuse_a_dry_run(results, record, dry_run_ok)
    target = runs / "gpu" / "speed" / f"{record['started'].replace(':', '-')}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results / SPEED_FILE, target)
    return [f"kept the speed run of {record['started']} in {target}"]


def speed_runs(runs: Path | None = None) -> list[dict]:
    """Every adopted speed run's record, oldest first."""
    folder = (PACKAGE / "runs" if runs is None else Path(runs)) / "gpu" / "speed"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def adopt_second(results: Path, runs: Path, dry_run_ok: bool = False) -> list[str]:
    """Keep a version-two run's finished records under ``runs/gpu/v2/seedN/`` (no model comes back from it);
    a seed already adopted from another version-two run is refused, as for version one."""
    from . import second

    record = json.loads((results / second.FILES["machine"]).read_text())
    _refuse_a_dry_run(results, record, dry_run_ok)
    seed = int(record["seed"])
    kept = runs / "gpu" / "v2" / f"seed{seed}"
    _refuse_a_seed_held(kept, record, seed, " of version two", "runs/gpu/v2/", sorted(second_runs(runs)))
    lines, _ = _copy_finished(results, kept, second.FILES)
    kept.mkdir(parents=True, exist_ok=True)
    lines.append(f"kept the records of version two, seed {seed}, in {kept}")
    return lines


def second_runs(runs: Path | None = None) -> dict[int, dict[str, dict]]:
    """Every adopted version-two run's records by seed: ``{seed: {"machine": ..., "speed": ..., "plain": ...,
    "distilled": ...}}``, the files that run returned."""
    from . import second

    return _by_seed((PACKAGE / "runs" if runs is None else Path(runs)) / "gpu" / "v2", second.FILES)


def _validation(path: Path) -> float | None:
    return json.loads(path.read_text()).get("score") if path.is_file() else None


def adopt(
    results: Path, runs: Path | None = None, reference: Path | None = None, dry_run_ok: bool = False
) -> list[str]:
    """Keep a GPU run's finished records under ``runs/gpu/seedN/``, and store its Transformer if it beats the
    stored one on validation; returns one line per thing done or left out. A dry run's results are refused unless
    ``dry_run_ok`` (its tests). A seed already adopted from another run is refused: two runs of one seed would
    count twice in a mean."""
    from ..reference import load_reference, sample_record

    results = Path(results)
    runs = PACKAGE / "runs" if runs is None else Path(runs)
    reference = PACKAGE / "reference" if reference is None else Path(reference)
    machine = results / FILES["machine"]
    if not machine.is_file() and (results / SPEED_FILE).is_file():
        return adopt_speed(results, runs, dry_run_ok)
    if not machine.is_file():
        raise FileNotFoundError(f"{machine} is missing: is {results} the folder a GPU run wrote (its --out)?")
    record = json.loads(machine.read_text())
    if record.get("version") == 2:
        return adopt_second(results, runs, dry_run_ok)
    _refuse_a_dry_run(results, record, dry_run_ok)
    seed = seed_of(results)
    kept = runs / "gpu" / f"seed{seed}"
    _refuse_a_seed_held(kept, record, seed, "", "runs/gpu/", sorted(adopted_runs(runs)))
    files = {key: FILES[key] for key in TO_RUNS + TO_REFERENCE}
    lines, finished = _copy_finished(results, kept, files, keep=lambda key: key != "weights")
    lines.append(f"kept the records of seed {seed} in {kept}")

    stored, new = _validation(reference / FILES["transformer"]), _validation(results / FILES["transformer"])
    if "transformer" not in finished or "weights" not in finished:
        lines.append("stored no model: the run returned no finished Transformer with its weights")
        return lines
    if stored is not None and new is not None and new <= stored:
        lines.append(
            f"kept the stored transformer-gpu: validation BLEU {stored:.2f} against this run's {new:.2f}"
            " (the stored model is chosen on validation)"
        )
        return lines
    for key, source in finished.items():
        target = (runs if key in TO_RUNS else reference) / FILES[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        lines.append(f"copied {FILES[key]} to {target}")
    weights, run = reference / FILES["weights"], reference / FILES["transformer"]
    recorded = json.loads(run.read_text()).get("weights_sha256")
    if hashlib.sha256(weights.read_bytes()).hexdigest() != recorded:
        raise ValueError(f"{weights} is not the file the run's JSON describes: copy both from the same run")
    name = FILES["transformer"].removesuffix(".json")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # as the test that decodes the sample again
    try:
        model, data, stored_run = load_reference(name, folder=reference)
        sample = sample_record(name, model, data, stored_run)
    finally:
        torch.set_num_threads(threads)
    path = reference / f"{name}-sample.json"
    path.write_text(json.dumps(sample, indent=1, ensure_ascii=False) + "\n")
    lines.append(f"decoded the sample of {name} here, from the stored weights: {path}")
    return lines
