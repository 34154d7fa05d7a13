"""The student repository of `make classroom`: built into a temporary folder, and its CI grading step run
exactly as its workflow runs it (.github/grade.sh, in the bubblewrap sandbox), on a solved and an unsolved
notebook."""

import os
import shutil
import subprocess
import sys

import pytest

from gradertools import full_points
from transformer_course.grading import isolation
from transformer_course.grading.classroom import build


def test_classroom_repository_has_no_solutions(course_root, tmp_path):
    repo = build(tmp_path / "classroom", course_root)
    assert not (repo / "solutions").exists()
    assert sorted(p.name for p in (repo / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (course_root / "notebooks").glob("*.ipynb")
    )
    texts = [p.read_text() for p in repo.rglob("*.ipynb")]
    assert texts and not any("BEGIN SOLUTION" in t for t in texts)
    workflow = (repo / ".github" / "workflows" / "grade.yml").read_text()
    assert "bubblewrap" in workflow and "bash .github/grade.sh" in workflow
    assert "--isolation bwrap" in (repo / ".github" / "grade.sh").read_text()
    with pytest.raises(FileExistsError):
        build(repo, course_root)


@pytest.mark.skipif(
    not isolation.bwrap_available(), reason="bubblewrap is not available here: install it with `make sandbox` (as root)"
)
def test_classroom_grading_step_runs_as_the_workflow_does(course_root, tmp_path):
    repo = build(tmp_path / "classroom", course_root)
    shutil.copy(course_root / "solutions" / "05_self_attention.ipynb", repo / "notebooks")  # a solved notebook
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(repo / "src")}  # the repository's own package
    run = subprocess.run(
        ["bash", ".github/grade.sh", "notebooks/05_self_attention.ipynb", "notebooks/07_positional_encoding.ipynb"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # the unsolved notebook is below the pass mark
    five, seven = sum(full_points(5).values()), sum(full_points(7).values())
    assert f"**Score: {five} / {five}** (chapter 5)" in run.stdout, run.stdout
    assert f"**Score: 0 / {seven}** (chapter 7)" in run.stdout, run.stdout
    assert "| not attempted |" in run.stdout and "WARNING" not in run.stdout
    assert "could not be loaded" not in run.stdout  # the reference fallbacks from the package work
