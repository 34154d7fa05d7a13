"""What the grader does to the worker's process from outside: resource limits set in the child before it
execs, and a handle on the sandbox's PID 1 through which the whole PID namespace is ended (``sandbox``)."""

from __future__ import annotations

import json
import os
import resource
import select
import time
from pathlib import Path

__all__ = ["MAX_PROCESSES", "limit_child", "namespace_init"]

MAX_PROCESSES = 64


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


def limit_child(memory_mb: int, cpu_seconds: int, cgroup: Path | None) -> None:
    """In the child, before exec: resource limits, and the pids cgroup where there is one."""
    if cgroup is not None:
        try:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
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
