"""The book builds from the stored outputs, with every Sphinx warning an error (what `make book` runs).

A test rather than a separate step, so that in `make test` it runs beside the other tests on a free worker.
"""

import shutil
import subprocess
import sys
from pathlib import Path


def test_book_builds_without_warnings(course_root, tmp_path):
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    assert jupyter_book.exists(), "jupyter-book is not installed in this environment: run `make venv`"
    run = subprocess.run([str(jupyter_book), "build", str(course_root), "-W", "-n", "--keep-going",
                          "--path-output", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    html = tmp_path / "_build" / "html"
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    assert {"index.html", "solutions/09_beam_search.html", "book/instructor.html"} <= pages, sorted(pages)[:20]
    shutil.rmtree(tmp_path / "_build" / ".doctrees", ignore_errors=True)
