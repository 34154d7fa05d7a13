import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

# Under test, a model budgeted in minutes trains the steps they buy instead (training.budget), so that a busy
# machine is slower but gets the same verdict; the notebooks' kernels inherit it.
os.environ.setdefault("TRANSFORMER_COURSE_REPRODUCIBLE", "1")


@pytest.fixture(scope="session")
def course_root() -> Path:
    # COURSE_TEST_ROOT lets the grader tests run against another copy of the course (a scratch chapter).
    return Path(os.environ.get("COURSE_TEST_ROOT", ROOT))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def book_build(course_root, tmp_path_factory):
    """The book built as `make book` builds it (every warning an error), once per test process.

    tests/test_book.py checks the build; tests/test_browser.py reads the pages in a browser. Returns the
    finished process and the folder of HTML pages.
    """
    if os.environ.get(
        "COURSE_TEST_BOOK"
    ):  # a book built beforehand (`make book`: _build/html), to try the browser test
        html = Path(os.environ["COURSE_TEST_BOOK"]).resolve()
        return subprocess.CompletedProcess(
            ["(built beforehand)"], 0 if (html / "index.html").is_file() else 1, "", ""
        ), html
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    assert jupyter_book.exists(), "jupyter-book is not installed in this environment: run `make venv`"
    out = tmp_path_factory.mktemp("book")
    run = subprocess.run(
        [str(jupyter_book), "build", str(course_root), "-W", "-n", "--keep-going", "--path-output", str(out)],
        capture_output=True,
        text=True,
    )
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    return run, out / "_build" / "html"


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """At the very end: what this machine could not test, and the command that enables each (the README's promise)."""
    import re
    from collections import Counter

    skipped = Counter(_skip_reason(r) for r in terminalreporter.stats.get("skipped", []))
    if not skipped:
        return
    terminalreporter.section("skipped on this machine, and what enables them")
    for reason, n in sorted(skipped.items(), key=lambda item: -item[1]):
        command = re.search(r"`([^`]+)`", reason)
        if "run strictly there" in reason:
            enable = "nothing to enable: by design (tests/schedule.py)"
        elif "CUDA GPU" in reason and "without a CUDA GPU" not in reason:
            enable = "a machine with a CUDA GPU: no command installs one (book/instructor/gpu.md, 'The GPU run')"
        elif command:
            enable = command.group(1)
        else:
            enable = "(no command known: say why in the skip's reason)"
        terminalreporter.write_line(f"{n:4d} x {reason}\n       enable: {enable}")
