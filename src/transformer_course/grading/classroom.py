"""Write a student-facing repository that grades itself in CI: ``make classroom`` (or this module).

    python -m transformer_course.grading.classroom OUT_FOLDER

OUT_FOLDER gets the student notebooks (``notebooks/``, to work in), pristine copies of them for the
grader (``.course/notebooks/``), the course package (``src/``, which students have anyway: it is the
course's teaching package, reference implementations included), ``pyproject.toml`` and
``constraints.txt``, a GitHub Actions workflow that grades on every push, and the script it runs
(``.github/grade.sh``). No ``solutions/``. The workflow grades in the bubblewrap sandbox with a seed
drawn per run, so the score reflects the code in the exercise cells, not the reference next to it.
What CI in a student's own repository cannot promise (a student can edit the workflow) is said in
the instructor guide.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..repository import course_root

WORKFLOW = """\
# Grades the notebooks on every push: the score and each exercise's feedback are in the job's log
# and its summary page. The grader runs your exercise cells in a sandbox (bubblewrap), on hidden
# inputs drawn afresh on every run.
name: grade
on: [push, workflow_dispatch]
jobs:
  grade:
    runs-on: ubuntu-24.04
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the course package and the sandbox
        run: |
          sudo apt-get update -qq
          sudo apt-get install -y -qq bubblewrap
          # Ubuntu 24.04 runners forbid unprivileged user namespaces by default; bubblewrap needs them.
          sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true
          python -m pip install --quiet -c constraints.txt -e .
      - name: Grade
        run: bash .github/grade.sh notebooks/*.ipynb
"""

GRADE_SH = """\
#!/usr/bin/env bash
# The workflow's grading step (.github/workflows/grade.yml), also runnable by hand:
#     bash .github/grade.sh notebooks/05_self_attention.ipynb
# Grades the notebooks given (default: all of notebooks/) against the pristine copies in .course/,
# in the bubblewrap sandbox, prints every report, and exits 1 when a notebook is below full marks.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
if [ "$#" -eq 0 ]; then set -- notebooks/*.ipynb; fi
rm -rf grading-results
"$PYTHON" -m transformer_course.grade "$@" --root .course --out grading-results --isolation bwrap --quiet
status=$?
for report in grading-results/*/summary.md; do
    cat "$report"
    echo
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$report" >> "$GITHUB_STEP_SUMMARY"; fi
done
exit $status
"""

README = """\
# Attention, from RNNs to Transformers: your exercises

Work in `notebooks/`. Every push runs the grader (`.github/workflows/grade.yml`): the score and the
feedback for each exercise are in the workflow's log and on its summary page. To grade on your own
machine (Linux, with `bubblewrap` installed): `pip install -c constraints.txt -e .`, then
`bash .github/grade.sh notebooks/05_self_attention.ipynb`.

The grader runs only your exercise cells, in a sandbox, on hidden inputs drawn afresh on every run;
the self-check cells in the notebooks use other, public inputs.
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
    (out / ".github" / "workflows").mkdir(parents=True)
    (out / ".github" / "workflows" / "grade.yml").write_text(WORKFLOW, encoding="utf-8")
    (out / ".github" / "grade.sh").write_text(GRADE_SH, encoding="utf-8")
    (out / ".github" / "grade.sh").chmod(0o755)
    (out / "README.md").write_text(README, encoding="utf-8")
    (out / ".gitignore").write_text(
        "grading-results/\n__pycache__/\n*.egg-info/\n.ipynb_checkpoints/\n", encoding="utf-8"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a student repository that grades itself in CI.")
    parser.add_argument("out", type=Path, help="the folder to create")
    args = parser.parse_args(argv)
    try:
        build(args.out)
    except FileExistsError as exc:
        parser.error(str(exc))
    print(f"wrote {args.out}/: notebooks/, .course/, src/, .github/workflows/grade.yml (no solutions/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
