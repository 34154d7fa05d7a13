"""Reading submissions, in the grader's process: which files of a folder are graded, and of one notebook, read as data
(size, encoding, JSON checked), the exercise cells by id and the chapter, decided from the whole file."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..cells import exercise_id

SKIP_TAG = "skip-in-grading"  # cells the grader leaves out, to keep grading fast
MAX_BYTES = 20 * 1024 * 1024  # a chapter notebook with its figures is well under this


class SubmissionError(Exception):
    """The submission cannot be graded at all; the message says why, for the report."""


@dataclass
class Extracted:
    chapter: int
    sources: dict[str, str]  # exercise id -> the submitted cell's code
    notes: list[str] = field(default_factory=list)


def read_notebook(path: Path) -> dict:
    if path.suffix != ".ipynb":
        raise SubmissionError(f"{path.name} is not a notebook (expected a .ipynb file)")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SubmissionError(f"{path.name} is {size / 1e6:.0f} MB, larger than the {MAX_BYTES // 2**20} MiB limit")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionError(f"{path.name} is not a text file (not valid UTF-8), so not a notebook") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ends_early = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        what = "truncated: its JSON stops before the end" if ends_early else "not valid JSON"
        raise SubmissionError(
            f"{path.name} is {what} (JSON error at line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionError(f"{path.name} is JSON but not a Jupyter notebook (it has no list of cells)")
    return data


def _source_text(cell: dict) -> str | None:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return source if isinstance(source, str) else None


def extract(data: dict, path: Path, expected_chapter: int | None = None) -> Extracted:
    """The exercise cells of a submission, by id, and notes on anything odd about them."""
    sources: dict[str, str] = {}
    notes: list[str] = []
    for cell in data["cells"]:
        if not isinstance(cell, dict):
            continue
        text = _source_text(cell)
        if text is None:
            continue
        ex_id = exercise_id({**cell, "source": text})
        if ex_id is None:
            continue
        if ex_id in sources:
            notes.append(f"exercise {ex_id} appears more than once; the first cell is graded")
            continue
        sources[ex_id] = text
    chapter = _chapter(data, sources, path, expected_chapter)
    named = re.match(r"(\d+)_", path.name)
    others = sorted({int(i.split(".")[0]) for i in sources} - {chapter})
    if expected_chapter is not None and not any(i.startswith(f"{chapter}.") for i in sources) and others:
        raise SubmissionError(
            f"{path.name} holds the exercises of chapter {', '.join(map(str, others))}, but chapter {chapter} is "
            "being graded (--chapter); nothing was graded"
        )
    if named and int(named.group(1)) != chapter:
        notes.append(
            f"the file is named like chapter {int(named.group(1))} but holds the exercises of chapter "
            f"{chapter}; it was graded as chapter {chapter}"
        )
    known = {e.id for e in registry.chapter_exercises(chapter)}
    for ex_id in sorted(set(sources) - known):
        notes.append(f"exercise cell {ex_id} is not an exercise of chapter {chapter}; ignored")
        del sources[ex_id]
    for ex_id in sorted(known - set(sources)):
        notes.append(f"exercise {ex_id} is missing from the submission")
    if not sources:
        raise SubmissionError(
            f"{path.name} has no exercise cells of chapter {chapter} (cells whose first line is '# EXERCISE {chapter}.N'); "
            f"chapter {chapter}'s exercises are in {registry.chapter_notebook(chapter)}"
        )
    return Extracted(chapter, sources, notes)


def without_exercises(path: Path, root: Path) -> str | None:
    """Why a notebook is not graded, when it is one of the course's notebooks without exercises (a chapter's
    second notebook, which only reads measurements) and holds no exercise cell; else None, and it is graded.

    The classroom's workflow grades every notebook of notebooks/: these would otherwise fail it with no points to
    earn. A copy with an exercise cell pasted in is graded as usual, so nothing is skipped that could score."""
    match = re.match(r"(\d+)_", path.name)
    if not match or int(match.group(1)) not in registry.CHAPTER_MODULES:
        return None
    chapter = int(match.group(1))
    exercises = registry.chapter_notebook(chapter)
    if path.name == exercises or not (root / "notebooks" / path.name).is_file():
        return None
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: graded, so that the report says so
        return None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return None
    for cell in cells:
        text = _source_text(cell) if isinstance(cell, dict) else None
        if text is not None and exercise_id({**cell, "source": text}) is not None:
            return None
    return f"a notebook without exercises (chapter {chapter}'s are in {exercises})"


def _chapter(data: dict, sources: dict[str, str], path: Path, expected: int | None = None) -> int:
    """The chapter a submission is graded as: the one given (--chapter), else the evidence of the whole file.

    The exercise cells vote, one each, for their chapter (a scratch cell pasted from another chapter is outvoted);
    a tie goes to the chapter the file is named after, then to the notebook's metadata. Without exercise cells
    the metadata, then the file name, say which chapter's exercises are missing."""
    if expected is not None:
        if expected not in registry.CHAPTER_MODULES:
            raise SubmissionError(f"chapter {expected} has no graded exercises (--chapter)")
        return expected
    meta = data.get("metadata")
    course = meta.get("transformer_course") if isinstance(meta, dict) else None
    claimed = course.get("chapter") if isinstance(course, dict) and isinstance(course.get("chapter"), int) else None
    match = re.match(r"(\d+)_", path.name)
    named = int(match.group(1)) if match else None
    votes = Counter(c for c in (int(i.split(".")[0]) for i in sources) if c in registry.CHAPTER_MODULES)
    if votes:
        most = max(votes.values())
        tied = sorted(c for c, n in votes.items() if n == most)
        return next((c for c in (named, claimed) if c in tied), tied[0])
    for chapter in (claimed, named):
        if chapter in registry.CHAPTER_MODULES:
            return chapter
    raise SubmissionError(
        f"cannot tell which chapter {path.name} belongs to: it has no exercise cells of a graded chapter"
    )


def submissions_in(path: Path, exclude: Path | None = None) -> list[Path]:
    """The files of a folder to consider (hidden ones, checkpoints and the folder ``exclude`` left out), or [path]."""
    if not path.is_dir():
        return [path]
    skip = exclude.resolve() if exclude is not None else None
    found = []
    for p in sorted(path.rglob("*")):
        if not p.is_file() or p.is_symlink() or ".ipynb_checkpoints" in p.parts:
            continue
        if any(part.startswith(".") for part in p.relative_to(path).parts):
            continue
        if skip is not None and (p.resolve() == skip or skip in p.resolve().parents):
            continue
        found.append(p)
    return found


def unusual_in(folder: Path, exclude: Path | None = None) -> list[tuple[str, str]]:
    """The entries of a folder that are neither folders nor regular files, each with why it is not graded:
    symbolic links (a link could point at another student's file, or out of the folder) and special files."""
    skip = exclude.resolve() if exclude is not None else None
    found = []
    for p in sorted(folder.rglob("*")):
        if any(part.startswith(".") for part in p.relative_to(folder).parts) or ".ipynb_checkpoints" in p.parts:
            continue
        if skip is not None and (p.absolute() == skip or skip in p.absolute().parents):
            continue
        if p.is_symlink():
            found.append((str(p), "a symbolic link, which grading does not follow"))
        elif not p.is_dir() and not p.is_file():
            found.append((str(p), "not a regular file (a pipe, socket or device)"))
    return found
