"""The student edition of the book: the same pages built from ``notebooks/`` (the chapters with the answers taken
out) instead of ``solutions/``, so that no page shows a worked solution, for a class whose exercises count.

    python -m transformer_course.authoring.student_book --out _build/student     # make book-student

The public book is built from ``solutions/`` and shows every ``### BEGIN SOLUTION`` block with its outputs; this
edition has neither solutions nor outputs (the student notebooks store none). It stages a copy of the book's
sources in ``OUT/source`` (the configuration and table of contents pointed at ``notebooks/``, the prose pages'
links to the chapters too) and builds it into ``OUT/_build/html`` with every warning an error, as ``make book``
does. ``solution_lines`` and ``leaks`` are what ``tests/test_student_book.py`` checks the pages with.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..grading.cells import BEGIN, END

__all__ = ["build", "leaks", "solution_lines", "stage"]

TITLE_SUFFIX = " (student edition)"
MIN_LENGTH = 12  # shorter solution lines (`return x`, `)`) say nothing about the solution and occur everywhere


def stage(root: Path, folder: Path) -> Path:
    """Copy the book's sources from the course folder ``root`` into ``folder``, pointed at notebooks/."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    config = (root / "_config.yml").read_text()
    config = re.sub(r'^title: "(.*)"$', lambda m: f'title: "{m.group(1)}{TITLE_SUFFIX}"', config, count=1, flags=re.M)
    config = config.replace(" notebooks,", " solutions,")  # exclude_patterns: the chapters now come from notebooks/
    (folder / "_config.yml").write_text(config)
    (folder / "_toc.yml").write_text((root / "_toc.yml").read_text().replace("file: solutions/", "file: notebooks/"))
    shutil.copytree(root / "book", folder / "book", ignore=shutil.ignore_patterns("__pycache__"))
    for page in (folder / "book").glob("*.md"):
        page.write_text(page.read_text().replace("../solutions/", "../notebooks/"))
    shutil.copytree(root / "notebooks", folder / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return folder


def build(root: Path, out: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Stage and build the student edition; returns the finished jupyter-book process and the folder of pages."""
    source = stage(root, out / "source")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    run = subprocess.run(
        [str(jupyter_book), "build", str(source), "-W", "-n", "--keep-going", "--path-output", str(out)],
        capture_output=True,
        text=True,
    )
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    return run, out / "_build" / "html"


def _sources(notebook: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]]


def solution_lines(root: Path) -> dict[str, set[str]]:
    """Per solution notebook, the lines of its exercises' solutions (stripped, at least MIN_LENGTH characters) that
    appear nowhere in the student notebooks or the prose pages: a page that shows one shows a solution."""
    public = "\n".join(text for nb in sorted((root / "notebooks").glob("*.ipynb")) for text in _sources(nb))
    public += "\n".join(page.read_text() for page in sorted((root / "book").glob("*.md")))
    found: dict[str, set[str]] = {}
    for nb in sorted((root / "solutions").glob("*.ipynb")):
        lines: set[str] = set()
        for source in _sources(nb):
            inside = False
            for line in source.splitlines():
                if BEGIN.match(line):
                    inside = True
                elif END.match(line):
                    inside = False
                elif inside and len(line.strip()) >= MIN_LENGTH and line.strip() not in public:
                    lines.add(line.strip())
        if lines:
            found[nb.name] = lines
    return found


def page_text(page: Path) -> str:
    """A page's text as a reader sees it: tags removed (highlighted code is split into spans), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(errors="replace")))


def leaks(html_dir: Path, lines: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(page, solution line) for every solution line shown on any page of the built book."""
    every = set().union(*lines.values()) if lines else set()
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        text = page_text(page)
        found += [(str(page.relative_to(html_dir)), line) for line in sorted(every) if line in text]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the student edition of the book (no solutions)")
    parser.add_argument("--out", type=Path, default=Path("_build/student"))
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    run, html_dir = build(args.root.resolve(), args.out.resolve())
    sys.stdout.write(run.stdout[-2000:])
    sys.stderr.write(run.stderr[-4000:])
    if run.returncode != 0:
        return run.returncode
    shown = leaks(html_dir, solution_lines(args.root.resolve()))
    for page, line in shown:
        print(f"{page}: shows the solution line {line!r}", file=sys.stderr)
    print(f"Open {html_dir / 'index.html'}")
    return 1 if shown else 0


if __name__ == "__main__":
    raise SystemExit(main())
