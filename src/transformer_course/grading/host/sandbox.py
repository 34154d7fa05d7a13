"""The process that runs a student's code: where it runs, what it can reach, and how it is ended.

Two isolation modes (``--isolation``):

``bwrap``   bubblewrap (Debian package ``bubblewrap``): the worker runs in new user, PID, network, IPC, UTS
            and mount namespaces, as uid 65534, with a file system that holds only the Python
            installation (read-only, the course package hidden under an empty folder), the worker's two
            files (read-only) and a private /tmp of 64 MiB. No network, no view of the grader's processes or files,
            the course repository (reference code, solutions/, notebooks/, results) absent; every process
            it starts dies with it (PID namespace, --die-with-parent).
``process`` a plain child process, for machines without bubblewrap: resource limits, a session of its
            own, a scrubbed environment, ``python -I`` and the same kill-everything-at-the-end; but the
            student's code runs as the grader's user and CAN read any file the grader can (the reference
            package and solutions/ included) and reach the network. The grader says so in every report.

Both: memory (address space) per process, CPU time, open files, core dumps off; where the machine lets the
grader make cgroup v1 groups (``limits.Cgroups``: as root), one memory limit for the whole sandbox (every
process, and what they write into /tmp and /dev/shm) and a pids group that allows no new thread or process
once the worker is ready (RLIMIT_NPROC otherwise, which binds only non-root users); the worker's output
drained in bounded chunks (the first 64 KiB kept); answers capped in size. In process mode the student's code
runs as the grader's user: as root it could leave these groups, so there the clean-up is what the process
group and the groups reach, not a guarantee.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .limits import Cgroups, limit_child, namespace_init

KEEP_OUTPUT = 64 * 1024  # bytes of the worker's stdout/stderr kept; the rest is counted and dropped
MAX_ANSWER = 32 * 1024 * 1024  # bytes of one answer on the channel
STARTUP = 120  # seconds a worker may take to start (importing PyTorch: 1-3 s, far more on a loaded machine)
GRACE = 5.0  # seconds past a command's own time limit before the worker counts as hung
# What the sandbox gets, copied into its job folder (read here as bytes, never imported): the worker, and the codec
# that both sides share, which the worker imports as course_codec. Nothing else of the package crosses.
_GRADING = Path(__file__).parent.parent
WORKER_FILES = {"worker.py": _GRADING / "inside" / "worker.py", "course_codec.py": _GRADING / "codec.py"}
TMP_BYTES = 64 * 2**20  # the sandbox's /tmp: no exercise writes a file; a flood of writes stops here


def _package_dirs() -> list[str]:
    """Folders that hold the course package, to be hidden inside the sandbox."""
    import transformer_course

    return [str(Path(p).resolve()) for p in transformer_course.__path__]


class Worker:
    """One sandboxed worker process; ``request`` sends a command and returns its answer (None once it is gone)."""

    created: list[Path] = []  # every job folder made in this process (the tests check that none is left)

    def __init__(self, mode: str, memory_mb: int = 4096, cpu_seconds: int = 600, threads: int = 1):
        self.mode = mode
        self.memory_mb = memory_mb
        self.dead: str | None = None  # why the worker is gone, for the report
        self.given: set[str] = set()  # exercises whose class the worker holds as a case input
        self.tasks_frozen = False  # no thread or process may start (see wait_ready)
        self.output = bytearray()
        self.dropped = 0
        self._buffer = b""
        self._job = Path(tempfile.mkdtemp(prefix="course-sandbox-"))
        Worker.created.append(self._job)
        os.chmod(self._job, 0o755)
        for name, source in WORKER_FILES.items():
            (self._job / name).write_bytes(source.read_bytes())
        self.cgroups = Cgroups(memory_mb)
        self._ns_init: int | None = None  # a pidfd for the sandbox's PID 1 (bwrap mode), see _wait_for_namespace
        info_read, info_write = os.pipe() if mode == "bwrap" else (None, None)
        self._info_fd = info_write
        read_end, write_end = os.pipe()
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": "PASSIVE",
            "TQDM_DISABLE": "1",
            "MPLBACKEND": "Agg",
        }
        command = self._command(write_end)
        limits = (memory_mb, cpu_seconds, self.cgroups.groups())
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write_end,) if info_write is None else (write_end, info_write),
            cwd=str(self._job) if mode == "process" else "/",
            preexec_fn=lambda: limit_child(*limits),
            start_new_session=True,
        )
        os.close(write_end)
        if info_read is not None:
            os.close(info_write)  # type: ignore[arg-type]  # the other end of info_read's pipe
            self._ns_init = namespace_init(info_read)
        self._channel = read_end
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()

    def _command(self, fd: int) -> list[str]:
        python = sys.executable
        if self.mode == "process":
            return [python, "-I", str(self._job / "worker.py"), str(fd)]
        binds = []
        for path in sorted({sys.base_prefix, sys.prefix, str(Path(sys.executable).resolve().parent.parent)}):
            binds += ["--ro-bind", path, path]
        for path in ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/alternatives"):
            binds += ["--ro-bind-try", path, path]
        hide = []
        for package in _package_dirs():
            if any(package == p or package.startswith(p.rstrip("/") + "/") for p in binds[2::3]):
                hide += ["--tmpfs", package]
        # The private /tmp comes first: bwrap mounts in order, so the Python installation stays visible when it lives
        # under /tmp itself (a checkout cloned there, with its .venv).
        return [
            shutil.which("bwrap") or "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--uid",
            "65534",
            "--gid",
            "65534",
            "--info-fd",
            str(self._info_fd),
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--size",
            str(TMP_BYTES),
            "--tmpfs",
            "/tmp",
            *binds,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--ro-bind",
            str(self._job),
            "/job",
            *hide,
            "--chdir",
            "/tmp",
            "--",
            python,
            "-I",
            "/job/worker.py",
            str(fd),
        ]

    def _drain_output(self) -> None:
        stream = self.proc.stdout
        assert stream is not None  # stdout=PIPE
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            room = KEEP_OUTPUT - len(self.output)
            if room > 0:
                self.output += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def request(self, command: dict, timeout: float) -> dict | None:
        """Send one command; its answer, or None when the worker died, hung or sent too much (see .dead)."""
        if self.dead:
            return None
        try:
            self.proc.stdin.write(json.dumps(command).encode() + b"\n")  # type: ignore[union-attr]  # stdin=PIPE
            self.proc.stdin.flush()  # type: ignore[union-attr]  # stdin=PIPE
        except (BrokenPipeError, OSError):
            self._gone("the grading process was killed by the submission")
            return None
        return self._answer(time.monotonic() + timeout + GRACE)

    def wait_ready(self, timeout: float) -> bool:
        """Whether the worker started; once it has, it may start no thread or process (where a pids group is)."""
        ready = self._answer(time.monotonic() + timeout) is not None
        self.tasks_frozen = ready and self.cgroups.freeze_tasks()
        return ready

    def _answer(self, deadline: float) -> dict | None:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._gone("hung", kill=True)
                return None
            ready, _, _ = select.select([self._channel], [], [], min(left, 0.25))
            if not ready:
                if self.proc.poll() is not None:  # gone, even if a detached child still holds the channel
                    self._gone(self._exit_reason())
                    return None
                continue
            chunk = os.read(self._channel, 1 << 20)
            if not chunk:
                self.proc.wait()
                self._gone(self._exit_reason())
                return None
            self._buffer += chunk
            if len(self._buffer) > MAX_ANSWER:
                self._gone("the submission's answer was larger than the grader accepts", kill=True)
                return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            self._gone("the grading process sent something that is not an answer", kill=True)
            return None
        return answer

    def _exit_reason(self) -> str:
        if self.cgroups.out_of_memory():
            return f"the grading process ran past the sandbox's memory limit of {self.memory_mb} MB and was killed"
        code = self.proc.poll()
        if code is not None and code < 0 and -code in (signal.SIGXCPU, signal.SIGKILL):
            what = "ran out of CPU time" if -code == signal.SIGXCPU else "was killed"
            return f"the grading process {what} (memory or time limit, or the submission's own doing)"
        return "the grading process was killed by the submission (it exited or crashed Python)"

    def _gone(self, why: str, kill: bool = False) -> None:
        self.dead = (
            "a cell ran past its time limit and did not stop; the grading process was ended" if why == "hung" else why
        )
        if kill:
            self.close()

    def close(self) -> None:
        """End the worker and every process it started; remove what it left. Safe to call twice."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b'{"op": "quit"}\n')  # type: ignore[union-attr]  # stdin=PIPE
                self.proc.stdin.flush()  # type: ignore[union-attr]  # stdin=PIPE
                self.proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass
        for _ in range(50):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            stragglers = self.cgroups.tasks()
            for pid in stragglers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self.proc.poll() is not None and not stragglers:
                break
            time.sleep(0.02)
        self.proc.wait()
        self._wait_for_namespace()
        for stream in (self.proc.stdin,):
            try:
                stream.close()  # type: ignore[union-attr]  # stdin=PIPE
            except OSError:
                pass
        self._drain.join(timeout=2)
        try:
            os.close(self._channel)
        except OSError:
            pass
        self.cgroups.remove()
        shutil.rmtree(self._job, ignore_errors=True)

    def _wait_for_namespace(self, timeout: float = 10.0) -> None:
        """Kill the sandbox's PID 1 and wait until it has exited, which the kernel allows only once every other
        process of its PID namespace has been killed and reaped. Without this wait, a detached process of the
        submission could still be alive for a moment after the grader returned its report (bwrap itself, the
        process we started, dies first; the namespace is emptied asynchronously)."""
        if self._ns_init is None:
            return
        try:
            signal.pidfd_send_signal(self._ns_init, signal.SIGKILL)
        except OSError:
            pass  # already gone
        select.select([self._ns_init], [], [], timeout)  # readable once PID 1 has exited
        os.close(self._ns_init)
        self._ns_init = None
