"""Benchmark: how long grading takes, per chapter and for a class folder with ``--jobs 2`` against ``--jobs 1``.

    .venv/bin/python tests/benchmarks/grading_speed.py [--repeats 3] [--count 12] [--rounds 3] [--out FILE]

1. Each chapter's solution notebook graded ``--repeats`` times in the strongest sandbox this machine has (bwrap
   where it works), the median seconds per chapter (the witness's second run included).
2. A folder of ``--count`` chapter 5 submissions (the solution, the student notebook, the solution with its first
   exercise blank, in turn) graded by the command line with ``--jobs 1`` and ``--jobs 2`` alternately, ``--rounds``
   times, on the same folder: the ratio of the two wall times in each round (alternating, so that a change in the
   machine's load falls on both), and the scores must be the same every time.

Prints the figures and writes them with the command and the machine as JSON (``--out``; the course keeps its run in
src/transformer_course/runs/grading-speed.json, which the instructor guide quotes (book/instructor/grade.md) and
tests/test_grading_speed_record.py holds the guide to). Not a test: timings vary with the machine and its load; run
it on an idle machine.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_course.grading import registry
from transformer_course.grading.host import isolation
from transformer_course.grading.host.grader import grade_notebook
from transformer_course.repository import course_root

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--count", type=int, default=12)
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--out", type=Path)
args = parser.parse_args()

root = course_root()
mode = "bwrap" if isolation.bwrap_available() else "process"
record: dict = {
    "command": "python tests/benchmarks/grading_speed.py " + " ".join(sys.argv[1:]),
    "cpu_count": os.cpu_count(),
    "isolation": mode,
    "load_average_before": os.getloadavg(),
}

chapters = {}
for chapter in sorted(registry.CHAPTER_MODULES):
    notebook = root / "solutions" / registry.chapter_notebook(chapter)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        report = grade_notebook(notebook, root, isolation=mode)
        times.append(time.perf_counter() - start)
        assert report.score == report.max_score, report.markdown()
    chapters[str(chapter)] = {"median_seconds": round(statistics.median(times), 2), "seconds": times}
    print(f"chapter {chapter}: {statistics.median(times):.1f} s (median of {args.repeats})", flush=True)
record["chapters"] = chapters


def _notebooks() -> list[dict]:
    name = registry.chapter_notebook(5)
    solution = json.loads((root / "solutions" / name).read_text())
    student = json.loads((root / "notebooks" / name).read_text())
    partial = json.loads(json.dumps(solution))
    first = next(i for i, c in enumerate(partial["cells"]) if "exercise" in c.get("metadata", {}))
    exercise = partial["cells"][first]["metadata"]["exercise"]["id"]
    partial["cells"][first] = next(
        c for c in student["cells"] if c.get("metadata", {}).get("exercise", {}).get("id") == exercise
    )
    return [solution, student, partial]


def _grade_folder(folder: Path, jobs: int, out: Path) -> tuple[float, list]:
    start = time.perf_counter()
    command = [sys.executable, "-m", "transformer_course.grade", str(folder), "--chapter", "5"]
    command += ["--isolation", mode, "--jobs", str(jobs), "--out", str(out), "--quiet", "--exit-zero"]
    subprocess.run(command, check=True, cwd=root)
    seconds = time.perf_counter() - start
    with open(out / "scores.csv", newline="") as f:
        return seconds, sorted(tuple(row.values()) for row in csv.DictReader(f))


with tempfile.TemporaryDirectory() as tmp:
    folder = Path(tmp) / "submissions"
    folder.mkdir()
    kinds = _notebooks()
    for k in range(args.count):
        (folder / f"student-{k:03d}.ipynb").write_text(json.dumps(kinds[k % 3]))
    rounds, scores = [], None
    for r in range(args.rounds):
        seconds = {}
        for jobs in (1, 2) if r % 2 == 0 else (2, 1):
            seconds[jobs], table = _grade_folder(folder, jobs, Path(tmp) / f"out-{r}-{jobs}")
            assert scores is None or table == scores, "--jobs changed the scores"
            scores = table
        rounds.append({"jobs_1_seconds": seconds[1], "jobs_2_seconds": seconds[2], "ratio": seconds[1] / seconds[2]})
        print(f"round {r + 1}: --jobs 1 {seconds[1]:.1f} s, --jobs 2 {seconds[2]:.1f} s, "
              f"ratio {seconds[1] / seconds[2]:.2f}", flush=True)  # fmt: skip
record["folder"] = {"count": args.count, "chapter": 5, "rounds": rounds}
ratio = statistics.median(r["ratio"] for r in rounds)
per_submission = statistics.median(r["jobs_2_seconds"] for r in rounds) / args.count * 2  # core-seconds each
record["jobs_2_over_jobs_1"] = round(ratio, 2)
record["core_seconds_per_submission"] = round(per_submission, 2)
record["load_average_after"] = os.getloadavg()
print(f"--jobs 2 is {ratio:.2f} times as fast as --jobs 1; {per_submission:.2f} core-seconds per submission")
if args.out:
    args.out.write_text(json.dumps(record, indent=1) + "\n")
