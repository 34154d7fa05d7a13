"""The GPU run: its phases in order, under one deadline, each result written as soon as it exists.

A phase that fails is recorded (with its traceback in the log) and the run goes on to the next; a phase that would
start past the deadline is skipped, and says so. ``gpu-machine.json`` holds the machine, the plan and every phase's
outcome, written again after each phase, so that whatever the run did is on disk when it stops, cut short or not.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import FILES, MAX_FILE_BYTES
from .pack import check_encoding, open_pack

__all__ = ["DRY_RUN", "GPU", "Budgets", "Run"]


@dataclass(frozen=True)
class Budgets:
    """How much each phase measures. ``GPU`` for the real run; ``DRY_RUN`` runs the same code in seconds on a CPU."""

    throughput: dict  # rounds, steps, warmup (per model), sentences (per batch)
    step_time: dict  # lengths, tokens (per batch), rounds
    train: list[str]  # the trainer's arguments for budget and evaluation (the GPU's minutes are added)
    max_tokens: int | None = None  # tokens per batch instead of the configurations' (the dry run: CPU-sized steps)
    beam: tuple[int, float] = (4, 0.6)  # beam size and length penalty: chapter 9's choice on validation, K = 4
    reserve: float = 0.15  # the share of the time left after the measurements kept for the end (test, beam, weights)
    train_share: float = 0.88  # the share of a model's window spent training (the rest: its evaluations)
    keep_int8_within: float = 0.3  # int8 weights are kept if they cost at most this much validation BLEU
    extras: dict = field(default_factory=dict)


GPU = Budgets(
    throughput={"rounds": 5, "steps": 10, "warmup": 5, "sentences": 800},  # about 11,000 target tokens a batch
    step_time={"lengths": [8, 16, 32, 64, 128, 256], "tokens": 12000, "rounds": 5},
    train=["--eval-every-minutes", "0.5"],
)
DRY_RUN = Budgets(
    throughput={"rounds": 1, "steps": 1, "warmup": 1, "sentences": 4},
    step_time={"lengths": [8, 16], "tokens": 64, "rounds": 1},
    train=["--steps", "2", "--eval-every-steps", "1", "--limit-held-out", "48", "--max-tokens", "300"],
    max_tokens=300,
)
TRANSFORMER, GRU = "transformer-gpu", "bahdanau-gpu"


def write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)  # never half a file, even when the run is killed


class Tee:
    """A stream that writes to the terminal and to the run's log file."""

    def __init__(self, stream, log) -> None:
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.log.write(text)
        self.log.flush()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()


class Run:
    """One GPU run into the folder ``out``: ``Run(...).execute()`` returns 0 when every phase was done, else 1."""

    def __init__(
        self,
        pack: Path,
        out: Path,
        minutes: float,
        device: str | None,
        dry_run: bool,
        seed: int,
        command: str,
        files: dict[str, str] | None = None,
        budgets: tuple[Budgets, Budgets] | None = None,
    ) -> None:
        from ..training.loop import pick_device

        self.started = time.time()
        self.deadline = self.started + 60 * minutes
        self.pack, self.out, self.seed, self.command = Path(pack), Path(out), seed, command
        self.budgets = (budgets or (GPU, DRY_RUN))[1 if dry_run else 0]
        self.files = files or FILES  # the files this version of the run writes (version two: second.FILES)
        self.device = pick_device(device)
        self.bf16 = self.device.type == "cuda"
        self.results: dict = {}  # what later phases need from earlier ones
        self.record: dict[str, Any] = {  # the run's record, written as JSON
            "command": command,
            "dry_run": dry_run,
            "minutes": minutes,
            "seed": seed,  # adopt keeps each seed's records apart (runs/gpu/seedN)
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "bf16_autocast": self.bf16,
            "phases": [],
        }

    # bookkeeping ---------------------------------------------------------------------------------------------------

    def left(self) -> float:
        return self.deadline - time.time()

    def save(self, key: str, obj: dict) -> None:
        write_json(self.out / self.files[key], obj)

    def phase(self, name: str, work: Callable[[], str | None]) -> None:
        """Run one phase: done, failed (traceback to the log) or skipped (past the deadline, or what it returns)."""
        t0 = time.time()
        if self.left() <= 0:
            status = "skipped: past the run's deadline"
        else:
            print(f"\n== {name} ({self.left():.0f} s left)", flush=True)
            try:
                note = work()
                status = "done" + (f": {note}" if note else "")
            except Exception as exc:  # noqa: BLE001 - a failed phase is recorded, and the run goes on to the next
                traceback.print_exc()
                status = f"failed: {type(exc).__name__}: {exc}"
        self.record["phases"].append({"phase": name, "status": status, "seconds": round(time.time() - t0, 2)})
        print(f"-- {name}: {status} ({time.time() - t0:.1f} s)", flush=True)
        self.save("machine", self.record)

    def execute(self, phases: list[tuple[str, Callable[[Run], str | None]]], summary: Callable[[Run], str]) -> int:
        """Run the phases in order (``phases.PHASES``), then print the summary; 0 when every phase was done."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / self.files["log"], "a", encoding="utf-8") as log:
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = Tee(stdout, log), Tee(stderr, log)
            try:
                print(f"{self.command}\nstarted {self.record['started']}, deadline in {self.left():.0f} s", flush=True)
                for name, work in phases:
                    # mypy cannot type a lambda whose default argument binds the loop's phase
                    self.phase(name, lambda work=work: work(self))  # type: ignore[misc]
                oversized = [p.name for p in self.out.iterdir() if p.stat().st_size > MAX_FILE_BYTES]
                if oversized:
                    print(f"over {MAX_FILE_BYTES >> 20} MiB, would not come back: {', '.join(oversized)}")
                print(summary(self), flush=True)
            finally:
                sys.stdout, sys.stderr = stdout, stderr
        failed = [p for p in self.record["phases"] if not p["status"].startswith("done")]
        return 1 if failed else 0

    # shared by the phases ------------------------------------------------------------------------------------------

    def open_data(self) -> None:
        from ..data.translation import data_for
        from ..training.configs import CONFIGS
        from ..training.kinds import typed

        cache = Path(tempfile.mkdtemp(prefix="course-cache-"))  # the packed tokenizer, and nothing trained before
        manifest = open_pack(self.pack, cache)
        # the data the trainer will load for the Transformer (one tokenisation serves both, and the GRU)
        max_tokens = self.budgets.max_tokens or CONFIGS[TRANSFORMER]["max_tokens"]
        data = data_for(typed({**CONFIGS[TRANSFORMER], "max_tokens": max_tokens}), self.seed)
        check_encoding(manifest, data)
        self.results["data"] = data
        self.record["pack"] = {"folder": str(self.pack), "manifest": manifest}

    def machine(self) -> dict:
        return {k: self.record["machine"].get(k) for k in ("gpu", "torch", "cuda", "device", "cpu_count")}
