"""Benchmark: seconds to grade one submission (the solution notebook), median of five runs.

    .venv/bin/python tests/benchmarks/grading_time.py [NOTEBOOK]

Not a test: timings vary with the machine. The targets (issue 32), on 2 CPU cores: under 5 s for a chapter's
correct submission, under 12 s for chapter 8's, whose exercise 8.6 trains a model.
"""

import statistics
import sys
import time
from pathlib import Path

from transformer_course.grading.host.grader import grade_notebook
from transformer_course.repository import course_root

root = course_root()
notebook = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "solutions" / "05_self_attention.ipynb"
times = []
for run in range(5):
    start = time.perf_counter()
    report = grade_notebook(notebook, root)
    times.append(time.perf_counter() - start)
    print(f"run {run + 1}: {report.score:g} / {report.max_score:g} in {times[-1]:.2f} s", flush=True)
print(f"median {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s")
