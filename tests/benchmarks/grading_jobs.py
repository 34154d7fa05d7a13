"""Benchmark: grading a class folder one submission at a time and with ``--jobs``.

    .venv/bin/python tests/benchmarks/grading_jobs.py [--count 60] [--jobs 1 2] [--chapter 5]

Makes a folder of COUNT submissions of one chapter (its solution notebook, its student notebook and
its solution with the first exercise left unsolved, in turn, so that the folder holds full, empty and
partial marks), grades it with ``python -m transformer_course.grade --isolation bwrap --jobs N`` for
each N, and prints the wall time, the seconds per submission and the speed-up over ``--jobs 1``;
the scores of every run must be the same. Not a test: timings vary with the machine and its load.
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_course.repository import course_root

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--count", type=int, default=60)
parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
parser.add_argument("--chapter", default="5")
parser.add_argument("--out", type=Path, help="write the figures here as JSON")
args = parser.parse_args()

root = course_root()
stem = {"5": "05_self_attention"}.get(args.chapter, args.chapter)
solution = json.loads((root / "solutions" / f"{stem}.ipynb").read_text())
student = json.loads((root / "notebooks" / f"{stem}.ipynb").read_text())
partial = json.loads(json.dumps(solution))
# the first exercise cell of the solution replaced by the student's starter: partial marks
first = next(i for i, c in enumerate(partial["cells"]) if "exercise" in c.get("metadata", {}))
exercise = partial["cells"][first]["metadata"]["exercise"]["id"]
partial["cells"][first] = next(
    c for c in student["cells"] if c.get("metadata", {}).get("exercise", {}).get("id") == exercise
)
kinds = [solution, student, partial]

with tempfile.TemporaryDirectory() as tmp:
    folder = Path(tmp) / "submissions"
    folder.mkdir()
    for k in range(args.count):
        (folder / f"student-{k:03d}.ipynb").write_text(json.dumps(kinds[k % 3]))
    results = {
        "count": args.count,
        "chapter": args.chapter,
        "cpu_count": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "runs": [],
    }
    scores = None
    for jobs in args.jobs:
        out = Path(tmp) / f"results-{jobs}"
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "transformer_course.grade",
                str(folder),
                "--chapter",
                args.chapter,
                "--isolation",
                "bwrap",
                "--jobs",
                str(jobs),
                "--out",
                str(out),
                "--quiet",
                "--exit-zero",
            ],
            check=True,
            cwd=root,
        )
        seconds = time.perf_counter() - start
        with open(out / "scores.csv", newline="") as f:
            table = sorted(tuple(row.values()) for row in csv.DictReader(f))
        assert scores is None or table == scores, "--jobs changed the scores"
        scores = table
        results["runs"].append({"jobs": jobs, "seconds": seconds, "per_submission": seconds / args.count})
        print(
            f"--jobs {jobs}: {args.count} submissions in {seconds:.0f} s, "
            f"{seconds / args.count:.2f} s each, speed-up {results['runs'][0]['seconds'] / seconds:.2f}",
            flush=True,
        )
        shutil.rmtree(out)
    results["load_average_after"] = os.getloadavg()
    print(f"load average before {results['load_average_before']}, after {results['load_average_after']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
