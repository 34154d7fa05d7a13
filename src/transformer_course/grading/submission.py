"""Reading a submission and merging its exercise cells into the pristine student notebook."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import registry
from .cells import exercise_id
from .execute import PROBE_TAG
from .probe import probe_source

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
        raise SubmissionError(f"{path.name} is {what} (JSON error at line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionError(f"{path.name} is JSON but not a Jupyter notebook (it has no list of cells)")
    return data


def _source_text(cell: dict) -> str | None:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return source if isinstance(source, str) else None


def extract(data: dict, path: Path) -> Extracted:
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
    chapter = _chapter(data, sources, path)
    known = {e.id for e in registry.chapter_exercises(chapter)}
    for ex_id in sorted(set(sources) - known):
        notes.append(f"exercise cell {ex_id} is not an exercise of chapter {chapter}; ignored")
        del sources[ex_id]
    for ex_id in sorted(known - set(sources)):
        notes.append(f"exercise {ex_id} is missing from the submission")
    if not sources:
        raise SubmissionError(
            f"{path.name} has no exercise cells of chapter {chapter} (cells whose first line is '# EXERCISE {chapter}.N')"
        )
    return Extracted(chapter, sources, notes)


def _chapter(data: dict, sources: dict[str, str], path: Path) -> int:
    meta = data.get("metadata")
    course = meta.get("transformer_course") if isinstance(meta, dict) else None
    candidates = []
    if isinstance(course, dict) and isinstance(course.get("chapter"), int):
        candidates.append(course["chapter"])
    candidates += sorted({int(i.split(".")[0]) for i in sources})
    match = re.match(r"(\d+)_", path.name)
    if match:
        candidates.append(int(match.group(1)))
    for chapter in candidates:
        if chapter in registry.CHAPTER_MODULES:
            return chapter
    raise SubmissionError(f"cannot tell which chapter {path.name} belongs to: it has no exercise cells of a graded chapter")


_BANNED_NAMES = {"__import__", "importlib", "exec", "eval", "compile", "__builtins__", "sys"}


def static_problem(source: str, exercise: registry.Exercise) -> str | None:
    """Why an exercise cell is refused before it runs, or None. A guard against shortcuts, not a sandbox."""
    if "transformer_course" in source:
        return "the cell uses the course's reference package (`transformer_course`), which grading does not allow"
    lines = [ln for ln in source.split("\n") if not ln.lstrip().startswith(("%", "!"))]  # IPython magics
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None  # it will fail when it runs, and the report will show Python's own message
    for node in ast.walk(tree):
        attributes, names = [], []  # x.attr, and bare or imported names
        if isinstance(node, ast.Attribute):
            attributes.append(node.attr)
        elif isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                attributes += alias.name.split(".")
                names.append(alias.name.split(".")[0])
            if isinstance(node, ast.ImportFrom) and node.module:
                attributes += node.module.split(".")
                names.append(node.module.split(".")[0])
        for name in attributes:
            if name in exercise.forbidden:
                return f"the cell uses PyTorch's `{name}`, which this exercise asks you to build yourself"
        for name in names:
            if name in _BANNED_NAMES:
                return f"the cell uses `{name}`, which exercise cells may not use"
    return None


def _code_cell(source: str, metadata: dict) -> dict:
    return {"cell_type": "code", "metadata": metadata, "source": source, "outputs": [], "execution_count": None}


def merge(pristine: dict, extracted: Extracted, nonce: str) -> tuple[dict, dict[str, str]]:
    """The pristine notebook (as JSON data) with the submitted exercise cells in place and a probe after each.

    Returns the merged notebook and, per exercise, the reason its cell was refused (if it was).
    """
    refused: dict[str, str] = {}
    cells = []
    for cell in pristine["cells"]:
        if SKIP_TAG in cell.get("metadata", {}).get("tags", []):
            continue  # a demonstration (a figure, a training run) that no exercise needs
        cell = {**cell, "source": _source_text(cell) or ""}
        ex_id = exercise_id(cell)
        if ex_id is None:
            cells.append(cell)
            continue
        submitted = extracted.sources.get(ex_id)
        if submitted is not None:
            problem = static_problem(submitted, registry.get(ex_id))
            if problem:
                refused[ex_id] = problem
            else:
                cell = _code_cell(submitted, dict(cell.get("metadata", {})))
        cells.append(cell)
        cells.append(_code_cell(probe_source(ex_id, nonce), {"tags": [PROBE_TAG], "probe": ex_id}))
    return {**pristine, "cells": cells}, refused
