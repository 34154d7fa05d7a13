"""The grader: one submitted notebook in, a score per exercise out.

1. Read the submission; anything that is not a readable notebook gets a report that says so.
2. Take only its exercise cells and merge them into the pristine student notebook of notebooks/,
   with a probe cell after each (``submission.merge``).
3. Run the merged notebook in a fresh kernel, in a subprocess, with a time limit per cell and in total.
4. Decode what the probes published and compare it here, in the grader's process, with the reference
   run on the same hidden cases. All or nothing per exercise; the inputs are seeded, so the same
   submission gets the same score every time.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import registry
from .codec import CodecError, decode
from .execute import PROBE_TAG
from .probe import MIME
from .registry import HIDDEN_SEED, Exercise, compare, run_case
from .submission import SubmissionError, extract, merge, read_notebook

MAX_OUTPUT = 4000  # characters of report text per exercise


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    output: str

    @property
    def status(self) -> str:
        return "passed" if self.score == self.max_score else "failed"


@dataclass
class Report:
    submission: str
    chapter: int | None = None
    tests: list[TestResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # about the submission as a whole
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    def gradescope(self) -> dict:
        return {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.seconds, 1),
            "output": "\n".join(self.problems) or "Graded every exercise.",
            "stdout_visibility": "visible",
            "tests": [
                {"name": t.name, "number": t.name.split(":")[0].replace("Exercise ", ""), "score": t.score,
                 "max_score": t.max_score, "status": t.status, "output": t.output}
                for t in self.tests
            ],
        }

    def markdown(self) -> str:
        head = f"# Grading report: {self.submission}\n\n"
        head += f"**Score: {self.score:g} / {self.max_score:g}**"
        head += f" (chapter {self.chapter})" if self.chapter is not None else ""
        head += f", graded in {self.seconds:.1f} s\n\n"
        if self.problems:
            head += "".join(f"- {p}\n" for p in self.problems) + "\n"
        if self.tests:
            head += "| exercise | score | status |\n|---|---|---|\n"
            head += "".join(f"| {t.name} | {t.score:g} / {t.max_score:g} | {t.status} |\n" for t in self.tests)
            for t in self.tests:
                head += f"\n## {t.name}\n\n```text\n{t.output}\n```\n"
        return head


def grade_notebook(path: Path, root: Path, cell_timeout: int = 60, timeout: int = 600) -> Report:
    """Grade one submission. Never raises: whatever goes wrong is in the report."""
    start = time.monotonic()
    report = Report(submission=path.name)
    try:
        _grade_into(report, path, root, cell_timeout, timeout)
    except SubmissionError as exc:
        report.problems.append(str(exc))
    except Exception as exc:  # a bug of the grader's own: still a report, and no points
        report.problems.append(f"internal grader error ({type(exc).__name__}: {exc}); please tell the course staff")
        report.tests = [TestResult(t.name, 0, t.max_score, t.output) for t in report.tests]
    report.seconds = time.monotonic() - start
    return report


def _grade_into(report: Report, path: Path, root: Path, cell_timeout: int, timeout: int) -> None:
    data = read_notebook(path)
    extracted = extract(data, path)
    report.chapter = extracted.chapter
    report.problems += extracted.notes
    pristine_path = root / "notebooks" / registry.chapter_notebook(extracted.chapter)
    pristine = json.loads(pristine_path.read_text(encoding="utf-8"))
    nonce = secrets.token_hex(16)
    merged, refused = merge(pristine, extracted, nonce)
    outputs, run_problems = _run(merged, nonce, cell_timeout, timeout)
    report.problems += run_problems
    for ex in registry.chapter_exercises(extracted.chapter):
        report.tests.append(_score(ex, extracted, refused, outputs))


def _run(merged: dict, nonce: str, cell_timeout: int, timeout: int) -> tuple[dict[str, dict], list[str]]:
    """Execute the merged notebook; return per exercise {'probe': payload, 'errors': [...]}, and problems."""
    index_of = {}
    for i, cell in enumerate(merged["cells"]):
        meta = cell.get("metadata", {})
        if PROBE_TAG in meta.get("tags", []):
            index_of[i] = ("probe", meta["probe"])
        elif "exercise" in meta:
            index_of[i] = ("cell", meta["exercise"]["id"])
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        nb_path, results = Path(tmp) / "merged.ipynb", Path(tmp) / "results.jsonl"
        nb_path.write_text(json.dumps(merged), encoding="utf-8")
        env = {**os.environ, "TQDM_DISABLE": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"}
        command = [sys.executable, "-m", "transformer_course.grading.execute", "--grading", str(nb_path), str(results),
                   "--cell-timeout", str(cell_timeout)]
        # A session of its own, so that on time-out the runner and its kernel are killed together.
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=tmp)
        problem = None
        try:
            log, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                problem = "the notebook could not be run: " + log.decode(errors="replace").strip().splitlines()[-1][:300]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            problem = f"the notebook did not finish within the total time limit of {timeout} s; exercises after that point got no points"
        found: dict[str, dict] = {}
        given_problems: list[str] = []
        for line in results.read_text(encoding="utf-8").splitlines() if results.exists() else []:
            event = json.loads(line)
            if event.get("event") == "kernel-died":
                problem = "the kernel died (the code exited or crashed Python); exercises after that point got no points"
                continue
            if event.get("event") == "kernel-hung":
                problem = "a cell ran past its time limit and did not stop when interrupted; exercises after that point got no points"
                continue
            kind, ex_id = index_of.get(event.get("cell"), (None, None))
            if kind is None:
                given = [o for o in event.get("outputs", []) if o.get("output_type") == "error"]
                what = f"raised {given[0].get('ename')}: {str(given[0].get('evalue'))[:200]}" if given else "ran out of time"
                cell = merged["cells"][event["cell"]] if isinstance(event.get("cell"), int) and 0 <= event["cell"] < len(merged["cells"]) else {}
                first = str(cell.get("source", "")).strip().split("\n")[0][:60]
                given_problems.append(f"the course's cell `{first}` {what}; an exercise before it may return something unexpected")
                continue
            entry = found.setdefault(ex_id, {"probe": None, "errors": []})
            if kind == "cell" and event.get("status") == "timeout":
                entry["errors"].append(f"a time-out: the cell ran longer than the {cell_timeout} s limit per cell")
            for out in event.get("outputs", []):
                if kind == "cell" and out.get("output_type") == "error":
                    entry["errors"].append(f"{out.get('ename')}: {str(out.get('evalue'))[:300]}")
                payload = out.get("data", {}).get(MIME) if kind == "probe" else None
                if isinstance(payload, dict) and payload.get("nonce") == nonce and payload.get("exercise") == ex_id:
                    entry["probe"] = payload  # the last one wins: the probe publishes after the student's code ran
    problems = ([problem] if problem else []) + given_problems[:3]
    return found, problems


def _score(ex: Exercise, extracted, refused: dict[str, str], outputs: dict[str, dict]) -> TestResult:
    name = f"Exercise {ex.id}: {ex.title}"
    lines: list[str] = []
    if ex.id not in extracted.sources:
        lines.append("missing from the submission")
    elif ex.id in refused:
        lines.append(f"refused: {refused[ex.id]}")
    entry = outputs.get(ex.id)
    if not lines and entry is None:
        lines.append("not graded: the notebook stopped before this exercise")
    if not lines:
        lines += [f"your cell raised {e}" for e in entry["errors"]]
        probe = entry["probe"]
        if probe is None:
            lines.append("no result: the grader's probe did not run after this cell (time limit or crash)")
        elif "error" in probe:
            lines.append(str(probe["error"])[:500])
        else:
            lines += _compare_cases(ex, probe.get("results"))
    passed = bool(lines) and all(line.startswith("✓") for line in lines)
    output = "\n".join(lines)
    if len(output) > MAX_OUTPUT:
        output = output[:MAX_OUTPUT] + "\n… (cut)"
    return TestResult(name, ex.points if passed else 0, ex.points, output)


def _compare_cases(ex: Exercise, results) -> list[str]:
    cases = ex.cases(HIDDEN_SEED)
    if not isinstance(results, list) or len(results) != len(cases):
        return ["malformed probe output"]
    lines = []
    for case, result in zip(cases, results):
        if not isinstance(result, dict):
            lines.append(f"✗ case '{case.label}': malformed result")
            continue
        if "error" in result:
            lines.append(f"✗ case '{case.label}': {str(result['error'])[:300]}")
            continue
        try:
            actual = decode(result.get("value"))
        except CodecError as exc:
            lines.append(f"✗ case '{case.label}': the result could not be read ({exc})")
            continue
        expected = run_case(ex, ex.reference, case)
        problem = compare(expected, actual, ex.atol, ex.rtol)
        lines.append(f"✓ case '{case.label}'" if problem is None else f"✗ case '{case.label}': {problem}")
    return lines


def submissions_in(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts
                      and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [path]
