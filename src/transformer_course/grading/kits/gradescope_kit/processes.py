"""What the Gradescope autograder (``autograde``) does to processes: the user that grading runs as without the
sandbox, and the end of every process that the grading left behind."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRADING_USER = "course-grader"  # made by the kit's setup.sh; else nobody
STARTUP = 150  # seconds the grading process may take to start: importing PyTorch on half a CPU is slow
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


def prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) > 1:
            kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def end_leftovers(timeout: float = 10.0) -> int:
    """Kill every process below this one (detached ones included: this process is their subreaper) and reap them.
    Returns how many were found."""
    me, found, deadline = os.getpid(), 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = _children_map()
        below, todo = [], list(kids.get(me, []))
        while todo:
            pid = todo.pop()
            below.append(pid)
            todo += kids.get(pid, [])
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not below:
            return found
        found += len(below)
        time.sleep(0.05)
    return found


def grading_user(kit: dict) -> tuple[int, int, str] | None:
    """(uid, gid, name) of the user that grading runs as in process mode: $COURSE_GRADING_USER, kit.json's
    (course-grader), else nobody; None when this process is not root or no such user exists."""
    import pwd

    if os.geteuid() != 0:
        return None
    names = [os.environ["COURSE_GRADING_USER"]] if "COURSE_GRADING_USER" in os.environ else []
    names += [kit.get("grading_user", GRADING_USER), "nobody"]
    for name in names:
        if not name:
            return None  # COURSE_GRADING_USER= (empty): stay as root
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid, name
    return None


def run_as(user: tuple[int, int, str] | None) -> dict:
    if user is None:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


def probe_user(user: tuple[int, int, str], env: dict, files: list[Path], cwd: Path) -> str | None:
    """None when the grading user can run the grader (its Python, PyTorch, the package) and read ``files``; else
    why not."""
    imports = "import torch, transformer_course.grading.host.grader\n"
    code = imports + "".join(f"open({str(f)!r}).close()\n" for f in files)
    try:
        run = subprocess.run(
            [sys.executable, "-s", "-P", "-c", code],
            env=env,
            cwd=cwd,
            capture_output=True,
            timeout=STARTUP,
            **run_as(user),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if run.returncode != 0:
        return (run.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {run.returncode}"])[-1]
    return None
