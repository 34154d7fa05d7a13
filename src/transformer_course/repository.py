"""Where the course's files are: the repository root above ``src/``, which holds ``solutions/``, ``notebooks/``
and ``pyproject.toml`` (the release tool, the grader's command line and the classroom builder read them)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["course_root"]


def course_root() -> Path:
    """The repository root: the folder above src/ that holds solutions/ and notebooks/."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "solutions").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    raise FileNotFoundError("cannot find the course folder (with solutions/ and pyproject.toml) above " + str(here))
