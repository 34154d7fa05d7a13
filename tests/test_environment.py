"""Pins agree everywhere, and the README opens with the two commands."""

import re
import tomllib

from conftest import ROOT


def _pins(lines):
    pins = {}
    for line in lines:
        match = re.match(r"^\s*-?\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _requirements() -> list[str]:
    """Every requirement of pyproject.toml: the package's own, then each extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]


def test_every_dependency_is_pinned_and_environment_yml_agrees():
    requirements = _requirements()
    from_pyproject = _pins(requirements)
    assert len(from_pyproject) == len(requirements), "every requirement in pyproject.toml is pinned with =="
    assert from_pyproject["torch"] == "2.13.0"
    from_conda = _pins((ROOT / "environment.yml").read_text().splitlines())
    assert from_conda == from_pyproject


def test_a_student_install_needs_no_test_or_book_tools():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = set(_pins(project["dependencies"]))
    assert {"torch", "tokenizers", "sacrebleu", "jupyterlab", "ipykernel"} <= runtime
    assert not runtime & {"pytest", "nbval", "hypothesis", "jupyter-book", "pytest-xdist", "ruff", "mypy"}


def test_lock_agrees_with_the_pins():
    lock = _pins((ROOT / "constraints.txt").read_text().splitlines())
    project = _pins(_requirements())
    for name, version in project.items():
        assert lock.get(name) == version, f"constraints.txt has {name}=={lock.get(name)}, pyproject.toml {version}"
    assert not any("nvidia" in name or "cuda" in name for name in lock), "the lock must not pull a CUDA build"


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```(?:bash|sh)?\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.split("#")[0].strip()]
    assert commands[:2] == ["make book", "make test"]
