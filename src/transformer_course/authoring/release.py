"""The release tool: make the student notebooks in notebooks/ from the single sources in solutions/.

    python -m transformer_course.authoring.release           # write notebooks/
    python -m transformer_course.authoring.release --check   # exit 1 if notebooks/ is out of date
    python -m transformer_course.authoring.release --leaks   # exit 1 if a given cell answers an exercise

Each solution block becomes ``raise NotImplementedError(...)``, outputs and execution counts are
cleared, cells tagged ``solution-only`` are dropped, exercise cells are tagged ``raises-exception``,
citation roles ({cite:p}`key`, which JupyterLab would show raw) become author-year text from
book/references.bib, and a short banner says how to work the notebook. The output is a pure function of the input, so a
test can regenerate it and compare. The tool writes nothing while a given cell (any code cell that is not an exercise
cell, which the student sees) answers one of its chapter's exercises (``given_leaks``): it names the chapter, the
cell, the function and the exercise.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

from ..grading import registry
from ..grading.cells import HEADER, blank_solution, exercise_id
from ..repository import course_root
from . import citations, given_leaks, given_runs

BANNER_TAG = "student-banner"
BANNER = """\
**Student version.** Fill in the cells that start with `# EXERCISE`: replace each
`raise NotImplementedError(...)` with your code, then run the `check(...)` cell right after it.
Until an exercise passes its check, the cells after it use the course's reference implementation,
so the notebook always runs from top to bottom. Only the exercise cells are graded."""
# A chapter's exercises are all in one notebook (registry.chapter_notebook); a chapter may have a second notebook
# that only reads measurements, and its student version says where the exercises are.
READING_BANNER = """\
**Student version.** This notebook has no exercises: run it from top to bottom and read what it measures.
The exercises of chapter {chapter} are in `{exercises}`."""


def chapter_of(path: Path) -> int:
    match = re.match(r"(\d+)_", path.name)
    if not match:
        raise ValueError(f"{path.name}: a chapter notebook's name starts with its number, e.g. 05_self_attention.ipynb")
    return int(match.group(1))


def make_student(
    solution: nbformat.NotebookNode, chapter: int, source_name: str, bib: Path | None = None
) -> nbformat.NotebookNode:
    nb = copy.deepcopy(solution)
    bib = bib or course_root() / "book" / "references.bib"
    exercises = registry.chapter_notebook(chapter)
    expected = {e.id: e for e in registry.chapter_exercises(chapter)} if source_name == exercises else {}
    seen: list[str] = []
    cells = []
    for cell in nb.cells:
        tags = list(cell.get("metadata", {}).get("tags", []))
        if "solution-only" in tags or BANNER_TAG in tags:
            continue
        if cell.cell_type == "markdown" and citations.ROLE.search(cell.source):
            try:
                cell.source = citations.render_roles(cell.source, citations.load(bib))
            except KeyError as exc:
                raise ValueError(f"{source_name}: {exc.args[0]} ({bib})") from None
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
            ex_id = exercise_id(cell)
            if ex_id is not None:
                _validate_exercise_cell(cell, ex_id, expected, source_name)
                seen.append(ex_id)
                cell.source = blank_solution(cell.source, ex_id)
                # The book shows the solution hidden; a student sees the cell as it is.
                tags = [t for t in tags if t not in ("hide-input", "hide-cell")]
                if "raises-exception" not in tags:
                    tags.append("raises-exception")
        if tags:
            cell.metadata["tags"] = tags
        else:
            cell.metadata.pop("tags", None)
        cells.append(cell)
    missing = sorted(set(expected) - set(seen))
    if missing:
        raise ValueError(f"{source_name}: no exercise cell for registered exercise(s) {', '.join(missing)}")
    text = BANNER if expected else READING_BANNER.format(chapter=chapter, exercises=exercises)
    banner = nbformat.v4.new_markdown_cell(text, metadata={"tags": [BANNER_TAG]})
    banner.id = "student-banner"
    nb.cells = cells[:1] + [banner] + cells[1:]  # after the title cell
    nb.metadata["transformer_course"] = {"chapter": chapter, "generated_from": f"solutions/{source_name}"}
    return nb


def _validate_exercise_cell(cell, ex_id: str, expected: dict, source_name: str) -> None:
    if ex_id not in expected:
        if not expected:
            raise ValueError(
                f"{source_name}: exercise cell {ex_id} is in a notebook without exercises; this chapter's exercises "
                "belong in the notebook that its exercise module names (exercises/chNN.py: NOTEBOOK)"
            )
        raise ValueError(f"{source_name}: exercise cell {ex_id} is not registered in transformer_course.exercises")
    meta = cell.metadata.get("exercise")
    header = HEADER.match(cell.source.lstrip("\n").split("\n", 1)[0])
    if not isinstance(meta, dict) or meta.get("id") != ex_id or not header or header.group(1) != ex_id:
        raise ValueError(
            f"{source_name}: exercise {ex_id} needs both metadata {{'exercise': {{'id': ...}}}} and a '# EXERCISE {ex_id}' first line"
        )
    if meta.get("points") != expected[ex_id].points:
        raise ValueError(
            f"{source_name}: exercise {ex_id} says {meta.get('points')} points, the registry {expected[ex_id].points}"
        )


def render(solution_path: Path, bib: Path | None = None) -> str:
    """The text of the student notebook made from one solution notebook."""
    solution = nbformat.read(solution_path, as_version=4)
    student = make_student(solution, chapter_of(solution_path), solution_path.name, bib)
    return nbformat.writes(student) + "\n"


class GivenCellLeak(ValueError):
    """A given cell answers an exercise (``given_leaks``): the release writes nothing."""


def chapter_notebooks(root: Path, chapter: int) -> dict[str, tuple[dict, dict]]:
    """{notebook name: (solution, student notebook)} for every notebook of the chapter in root's solutions/."""
    out: dict[str, tuple[dict, dict]] = {}
    for path in sorted((root / "solutions").glob(f"{chapter:02d}_*.ipynb")):
        solution = nbformat.read(path, as_version=4)
        out[path.name] = (solution, make_student(solution, chapter, path.name, root / "book" / "references.bib"))
    return out


def given_cell_leaks(root: Path, chapters: list[int] | None = None) -> list[given_leaks.Leak]:
    """The given functions that answer one of their chapter's exercises, by both checks (``given_leaks``,
    ``given_runs``), in the chapters given (default: every chapter of root's solutions/ that has exercises)."""
    found = {int(p.name[:2]) for p in (root / "solutions").glob("[0-9][0-9]_*.ipynb")} & set(registry.CHAPTER_MODULES)
    leaks = []
    for chapter in sorted(found) if chapters is None else chapters:
        notebooks = chapter_notebooks(root, chapter)
        leaks += given_leaks.ast_leaks(chapter, notebooks) + given_runs.run_leaks(chapter, notebooks)
    return leaks


def release(root: Path, check_only: bool = False) -> list[str]:
    """Write (or, with check_only, compare) every student notebook; return the names that differ. Before writing,
    refuse (GivenCellLeak) a chapter whose given cells answer one of its exercises."""
    stale = []
    solutions = sorted((root / "solutions").glob("[0-9]*.ipynb"))
    if not check_only:
        leaks = given_cell_leaks(root)
        if leaks:
            raise GivenCellLeak(given_leaks.refusal(leaks))
    for path in solutions:
        target = root / "notebooks" / path.name
        text = render(path, root / "book" / "references.bib")
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            stale.append(path.name)
            if not check_only:
                target.parent.mkdir(exist_ok=True)
                target.write_text(text, encoding="utf-8")
    orphans = sorted({p.name for p in (root / "notebooks").glob("*.ipynb")} - {p.name for p in solutions})
    for name in orphans:
        stale.append(name)
        if not check_only:
            (root / "notebooks" / name).unlink()
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course-release", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report notebooks that are out of date")
    parser.add_argument("--leaks", action="store_true", help="only list the given cells that answer an exercise")
    parser.add_argument("--root", type=Path, default=None, help="the course folder (default: found from this package)")
    args = parser.parse_args(argv)
    root = args.root or course_root()
    if args.leaks:
        leaks = given_cell_leaks(root)
        print(given_leaks.refusal(leaks) if leaks else "no given cell answers an exercise")
        return 1 if leaks else 0
    try:
        stale = release(root, check_only=args.check)
    except GivenCellLeak as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if stale:
            print("out of date (run `make release`): " + ", ".join(stale))
            return 1
        print("notebooks/ is up to date")
        return 0
    print("regenerated: " + (", ".join(stale) if stale else "nothing (already up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
