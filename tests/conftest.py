import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


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
