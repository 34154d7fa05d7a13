"""Reading a submission and merging its exercise cells into the pristine student notebook."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import registry
from .cells import exercise_id
from .closed_world import closed_world_problem, forbidden_family, module_aliases

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


_ALLOWED_WORDS = "torch and its numerical parts, math, random, collections, itertools, functools and the like"

# Cell magics whose body is plain Python and that change nothing it computes: the body is graded as it is.
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")


def _python_cell_magic(source: str) -> bool:
    first = source.lstrip().split("\n", 1)[0]
    return first.startswith("%%") and first[2:].split(" ", 1)[0].strip() in PYTHON_CELL_MAGICS


def clean_source(source: str) -> tuple[str, str | None]:
    """The cell as plain Python: IPython magics and shell lines become ``pass`` (they are not run during
    grading), so that the code the static check reads is the code that runs. Returns (code, note)."""
    lines, dropped = [], 0
    for line in source.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            lines.append(line[: len(line) - len(stripped)] + "pass")
            dropped += 1
        else:
            lines.append(line)
    note = f"note: {dropped} IPython magic or shell line(s) were not run during grading" if dropped else None
    return "\n".join(lines), note


def _own_names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """What the cell defines itself: (names, attributes, imported names).

    names: functions, classes, variables and arguments; attributes: methods of its classes and
    attributes it assigns (``self.x = ...``); imported: names its imports bind.
    """
    names, attributes, imported = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                attributes |= {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            attributes.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names, attributes, imported


_MODULE_NAMES = {"torch", "nn", "F", "functional", "math", "np", "numpy"}  # the notebooks' own imports


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# The modules the chapters' notebooks import, for a caller that does not pass the chapter's own imports.
DEFAULT_IMPORTS = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F"


def static_problem(
    source: str,
    exercise: registry.Exercise,
    exercise_names: set[str] | frozenset[str] = frozenset(),
    given_imports: str = DEFAULT_IMPORTS,
) -> str | None:
    """Why an exercise cell is refused before it runs, or None.

    It reads the syntax tree, never the text, so comments and strings cost nothing, and a method or
    variable the cell defines itself is not the built-in of the same name. Two checks: the exercise's
    forbidden built-ins, with their family where a module reaches them (``torch._x_math`` of ``x``), then
    the closed world (``closed_world.py``): nothing that could reach the watch on PyTorch's calls, the
    answer channel, another thread or process, or a module outside the allowed ones. given_imports: the
    imports of the chapter's notebook, whose names the cell sees (its modules are followed too).
    """
    code, _ = clean_source(source)
    if code.lstrip().startswith("pass") and source.lstrip().startswith("%%") and not _python_cell_magic(source):
        return "the cell is a cell magic (%%...) whose body is not Python, which grading does not run"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None  # it will fail when it runs, and the report will show Python's own message
    own, own_attributes, imported = _own_names(tree)
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        if any(m.split(".")[0] == "transformer_course" for m in modules):
            return (
                "the cell imports the course's reference package (`transformer_course`), which grading does not allow"
            )
        used = []  # (name, how)
        family = []  # names reached through a module, whose whole family is forbidden
        if isinstance(node, ast.Attribute):
            # `self.attend(...)` of the cell's own method is not PyTorch's; `F.x`, `torch.x` always are
            base = _base_name(node)
            if node.attr not in own_attributes or base in _MODULE_NAMES | imported or base is None:
                used.append(node.attr)
            if base in _MODULE_NAMES | imported:
                family.append(node.attr)
        elif (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in (own - imported) | exercise_names
        ):
            used.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                used += alias.name.split(".")
            if isinstance(node, ast.ImportFrom) and node.module:
                used += node.module.split(".")
            family += used
        for name in family:
            found = forbidden_family(name, exercise.forbidden)
            if found:
                what = f"`{name}`" + (f" (of `{found}`)" if found != name else "")
                return f"the cell uses PyTorch's {what}, which this exercise asks you to build yourself"
        for name in used:
            if name in exercise.forbidden:
                return f"the cell uses PyTorch's `{name}`, which this exercise asks you to build yourself"
    reached = closed_world_problem(tree, module_aliases(given_imports))
    if reached:
        return f"{reached}, which graded cells may not use (they may import only {_ALLOWED_WORDS})"
    return None
