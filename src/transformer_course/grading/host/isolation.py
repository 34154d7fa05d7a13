"""Which isolation a grading run gets: bubblewrap where it is installed and can create its namespaces, else a
plain child process with a warning that goes into every report (``sandbox`` describes both)."""

from __future__ import annotations

import shutil
import subprocess
from typing import NamedTuple

__all__ = ["MODES", "Isolation", "IsolationError", "bwrap_available", "resolve"]

MODES = ("auto", "bwrap", "process")

_bwrap_works: bool | None = None


class IsolationError(RuntimeError):
    """The isolation that was asked for is not available here."""


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and can create its namespaces on this machine (checked once)."""
    global _bwrap_works
    if _bwrap_works is None:
        exe = shutil.which("bwrap")
        try:
            _bwrap_works = (
                exe is not None
                and subprocess.run(
                    [exe, "--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                    capture_output=True,
                    timeout=20,
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            _bwrap_works = False
    return _bwrap_works


class Isolation(NamedTuple):
    """An isolation mode resolved on this machine: the mode used, and the warning every report carries, or None."""

    mode: str
    warning: str | None


def resolve(mode: str) -> Isolation:
    """The mode ``mode`` gets here ("auto": bwrap where it works, else a plain process and a warning)."""
    if mode not in MODES:
        raise IsolationError(f"unknown isolation mode {mode!r}; use one of {', '.join(MODES)}")
    if mode in ("auto", "bwrap") and bwrap_available():
        return Isolation("bwrap", None)
    if mode == "bwrap":
        raise IsolationError(
            "--isolation bwrap: bubblewrap is not installed or cannot create namespaces here "
            "(apt-get install bubblewrap)"
        )
    why = "--isolation process was chosen" if mode == "process" else "bubblewrap is not available here"
    return Isolation(
        "process",
        f"WARNING: graded without a sandbox ({why}): the submission's code ran "
        "as the grader's user and could read the course's files; limits and clean-up still applied",
    )
