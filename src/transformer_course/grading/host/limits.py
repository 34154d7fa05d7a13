"""What the grader does to the worker's process from outside: the submission's deadline, resource limits set in
the child before it execs, the control groups that hold the whole sandbox, and a handle on the sandbox's PID 1 through which the
whole PID namespace is ended (``sandbox``). Host side: ``limit_child`` runs in the forked child before it execs
the worker, still the grader's code."""

from __future__ import annotations

import json
import os
import resource
import secrets
import select
import time
from pathlib import Path

__all__ = ["MAX_PROCESSES", "WEAK_SANDBOX", "Cgroups", "Deadline", "limit_child", "missing_groups", "namespace_init"]

MAX_PROCESSES = 64
_V1 = Path("/sys/fs/cgroup")
# begins the isolation line's note when the sandbox's control groups could not be made (missing_groups; report.py)
WEAK_SANDBOX = "a weaker sandbox"


class Deadline:
    """A submission's total time limit, and what one cell may take of what is left (at least a second)."""

    def __init__(self, seconds: int, cell_timeout: int) -> None:
        self.seconds, self.cell_timeout = seconds, cell_timeout
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def for_cell(self) -> float:
        return min(self.cell_timeout, max(1, self.left()))


def missing_groups(cgroups: Cgroups, frozen: bool) -> str:
    """What the report's isolation line adds when the sandbox's groups could not be made (frozen: whether the pids
    group froze the worker's tasks): the report then shows the line, since the limits that hold instead are weaker."""
    missing = []
    if not frozen:
        missing.append("no pids group, so the student's code could start threads and processes")
    if cgroups.memory is None:
        missing.append("no memory group, so the memory limit held per process only")
    return f"; {WEAK_SANDBOX}: {'; '.join(missing)}" if missing else ""


class Cgroups:
    """The sandbox's control groups (cgroup v1, where the grader may make them: as root on most Linux machines).

    pids: at most MAX_PROCESSES tasks (threads count) while the worker starts, then none more than it has once it
    is ready (``freeze_tasks``): the student's code can start no thread and no process. memory: the whole sandbox,
    every process and what they write into its memory file systems (/tmp, /dev/shm), under one limit. Either may
    be missing (no cgroup v1 hierarchy, or not allowed): ``pids``/``memory`` are then None and only the
    per-process limits of ``limit_child`` hold (an address space per process; processes by ``RLIMIT_NPROC``, which
    binds only non-root users). The report says so: its isolation line adds which group was missing and what held
    instead (``missing_groups``), and the report then shows that line; the worker's ``tasks_frozen`` stays
    False, and the tests that need a group (tests/test_grader_closed_world.py) are skipped with the reason."""

    def __init__(self, memory_mb: int) -> None:
        name = f"course-grade-{secrets.token_hex(6)}"
        self.pids = self._make(_V1 / "pids" / name, {"pids.max": str(MAX_PROCESSES)})
        own = _own_path("memory")
        self.memory = None
        if own is not None:  # under the grader's own memory group, so the sandbox counts against it as well
            limits = {"memory.limit_in_bytes": str(memory_mb * 2**20)}
            self.memory = self._make(_V1 / "memory" / own.lstrip("/") / name, limits)

    @staticmethod
    def _make(path: Path, settings: dict[str, str]) -> Path | None:
        try:
            path.mkdir()
        except OSError:
            return None
        try:
            for key, value in settings.items():
                (path / key).write_text(value)
            return path
        except OSError:
            path.rmdir()
            return None

    def groups(self) -> list[Path]:
        return [p for p in (self.pids, self.memory) if p is not None]

    def freeze_tasks(self) -> bool:
        """No new task (thread or process) from now on; False where there is no pids group."""
        if self.pids is None:
            return False
        try:
            (self.pids / "pids.max").write_text((self.pids / "pids.current").read_text().strip())
            return True
        except OSError:
            return False

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the sandbox for going past its memory limit."""
        if self.memory is None:
            return False
        try:
            fields = dict(line.split() for line in (self.memory / "memory.oom_control").read_text().splitlines())
            return int(fields.get("oom_kill", "0")) > 0
        except (OSError, ValueError):
            return False

    def tasks(self) -> list[int]:
        """The processes left in any of the groups."""
        found: set[int] = set()
        for group in self.groups():
            try:
                found |= {int(p) for p in (group / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return sorted(found)

    def remove(self) -> None:
        for group in self.groups():
            try:
                group.rmdir()
            except OSError:
                pass


def _own_path(controller: str) -> str | None:
    """This process's group in a cgroup v1 hierarchy (from /proc/self/cgroup), if that hierarchy is mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") and (_V1 / controller).is_dir():
            return path
    return None


def namespace_init(info: int, timeout: float = 30.0) -> int | None:
    """A pidfd for the sandbox's PID 1, read from bwrap's --info-fd ({"child-pid": N}); None if unavailable."""
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while b"}" not in data and time.monotonic() < deadline:
            ready, _, _ = select.select([info], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(info, 4096) if ready else b""
            if not chunk:
                break
            data += chunk
    finally:
        os.close(info)
    try:
        return os.pidfd_open(int(json.loads(data)["child-pid"]))
    except (ValueError, KeyError, TypeError, OSError, AttributeError):
        return None  # bwrap failed to start (reported elsewhere), or an old kernel: close() still kills what it can


def limit_child(memory_mb: int, cpu_seconds: int, groups: list[Path]) -> None:
    """In the child, before exec: resource limits, and the control groups where there are some."""
    for group in groups:
        try:
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
    for limit, value in (
        (resource.RLIMIT_AS, memory_mb * 2**20),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_NPROC, MAX_PROCESSES),
        (resource.RLIMIT_FSIZE, 64 * 2**20),
    ):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass
