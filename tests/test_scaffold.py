"""`make new-chapter` (authoring.scaffold): a new chapter touches three existing files, and the chapter it makes is
whole: in the manifest and the table of contents, executed, released, graded with full marks, its tests green.

The chapter is made in a copy of the course (its tracked and new files, in a git repository of its own, so that
`git status` counts what changed), by the copy's own package."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from transformer_course.authoring import scaffold

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def ghost(tmp_path_factory) -> Path:
    """A copy of the course with chapter 12, 'ghost', made by the scaffold."""
    copy = tmp_path_factory.mktemp("course") / "course"
    listed = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-qm", "the course")
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "transformer_course.authoring.scaffold", "12", "ghost", "A ghost chapter"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return copy


def test_a_new_chapter_changes_three_existing_files(ghost):
    status = [line.split(maxsplit=1) for line in _git(ghost, "status", "--porcelain", "-uall").splitlines()]
    changed = sorted(path for code, path in status if code != "??")
    created = sorted(path for code, path in status if code == "??")
    assert changed == ["_toc.yml", "book/preface.md", "src/transformer_course/chapters.toml"]
    assert created == [
        "book/mistakes/ch12.md",
        "notebooks/12_ghost.ipynb",
        "solutions/12_ghost.ipynb",
        "src/transformer_course/exercises/ch12.py",
        "src/transformer_course/models/ghost.py",
        "tests/test_ghost.py",
        "tests/wrong_answers/ch12.py",
    ]
    assert "      - file: solutions/12_ghost\n" in (ghost / "_toc.yml").read_text()
    assert "| 12 | {doc}`A ghost chapter <../solutions/12_ghost>`" in (ghost / "book" / "preface.md").read_text()


def test_the_new_chapter_is_executed_released_and_its_checks_pass(ghost):
    solution = nbformat.read(ghost / "solutions" / "12_ghost.ipynb", as_version=4)
    nbformat.validate(solution)
    printed = "".join(o.get("text", "") for c in solution.cells if c.cell_type == "code" for o in c.outputs)
    assert printed.count("passed all") == 3 and "PyTorch's attention, to 1e-12: True" in printed
    student = json.loads((ghost / "notebooks" / "12_ghost.ipynb").read_text())
    blanks = "".join("".join(c["source"]) for c in student["cells"])
    assert blanks.count('raise NotImplementedError("Exercise 12.') == 3 and "### BEGIN SOLUTION" not in blanks


def test_the_new_chapters_tests_and_the_courses_lists_agree(ghost):
    env = {**os.environ, "PYTHONPATH": str(ghost / "src")}
    tests = ["tests/test_ghost.py", "tests/test_manifest.py", "tests/test_package_structure.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=ghost, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_solution_of_the_new_chapter_gets_full_marks(ghost, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ghost / "src")}
    command = [sys.executable, "-m", "transformer_course.grade", str(ghost / "solutions" / "12_ghost.ipynb"),
               "--root", str(ghost), "--out", str(tmp_path), "--isolation", "process", "--quiet"]  # fmt: skip
    done = subprocess.run(command, cwd=ghost, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = tmp_path.rglob("results.json")
    results = json.loads(report.read_text())
    assert [t["score"] for t in results["tests"]] == [1.0, 2.0, 1.0], results


def test_a_chapter_that_exists_or_a_bad_name_is_refused_before_anything_is_written(ghost):
    before = _git(ghost, "status", "--porcelain", "-uall")
    for number, slug, module, message in (
        (12, "again", None, "chapter 12 exists"),
        (13, "Not-A-Slug", None, "lower case"),
        (13, "other", "nowhere.other", "LAYER.NAME"),
        (13, "ghost", None, "exist already"),
    ):
        with pytest.raises(scaffold.ScaffoldError, match=message):
            scaffold.new_chapter(ghost, number, slug, "T", module=module, execute=False)
    assert _git(ghost, "status", "--porcelain", "-uall") == before
