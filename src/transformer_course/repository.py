"""Where the course's files are: the repository root above ``src/``, which holds ``solutions/``, ``notebooks/``
and ``pyproject.toml`` (the release tool, the grader's command line and the classroom builder read them), and the
cache folder that keeps trained models and the learned tokenizer between runs."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "course_root"]


def course_root() -> Path:
    """The repository root: the folder above src/ that holds solutions/ and notebooks/."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "solutions").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    raise FileNotFoundError("cannot find the course folder (with solutions/ and pyproject.toml) above " + str(here))


def cache_dir() -> Path:
    """``$TRANSFORMER_COURSE_CACHE``, else ``~/.cache/transformer_course``."""
    return Path(os.environ.get("TRANSFORMER_COURSE_CACHE", Path.home() / ".cache" / "transformer_course"))
