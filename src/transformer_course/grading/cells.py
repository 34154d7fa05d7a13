"""Exercise cells in notebooks: how they are marked, found and blanked.

An exercise cell is a code cell whose metadata holds ``{"exercise": {"id": "5.3", "points": 3}}`` and
whose first line reads ``# EXERCISE 5.3 (3 points): title``. The metadata is the primary key; the
header line finds the cell when a student copied its code into a new cell, which loses metadata.
The solution sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ID = re.compile(r"\d{1,3}\.\d{1,3}")  # a well-formed exercise id; anything else in metadata is ignored
HEADER = re.compile(r"^\s*#\s*EXERCISE\s+(\d+\.\d+)\b", re.IGNORECASE)
BEGIN = re.compile(r"^(\s*)###\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*###\s*END SOLUTION\s*$")


class MarkerError(ValueError):
    """An exercise cell's solution markers are malformed."""


def exercise_id(cell: dict) -> str | None:
    """The exercise id of a cell, from its metadata or else its header line; None for other cells."""
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return None
    metadata = cell.get("metadata")
    meta = metadata.get("exercise") if isinstance(metadata, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("id"), str) and ID.fullmatch(meta["id"]):
        return meta["id"]
    source = cell.get("source", "")
    if not isinstance(source, str):
        return None
    first = source.lstrip("\n").split("\n", 1)[0]
    match = HEADER.match(first)
    return match.group(1) if match else None


def blank_solution(source: str, exercise: str) -> str:
    """Replace each BEGIN/END SOLUTION block with a ``raise NotImplementedError`` at the block's indentation."""
    out: list[str] = []
    indent: str | None = None
    blocks = 0
    for number, line in enumerate(source.split("\n"), start=1):
        begin = BEGIN.match(line)
        if begin:
            if indent is not None:
                raise MarkerError(f"exercise {exercise}: BEGIN SOLUTION inside another solution block (line {number})")
            indent = begin.group(1)
            out.append(f'{indent}raise NotImplementedError("Exercise {exercise}: replace this line with your code")')
            blocks += 1
        elif END.match(line):
            if indent is None:
                raise MarkerError(f"exercise {exercise}: END SOLUTION without BEGIN SOLUTION (line {number})")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise MarkerError(f"exercise {exercise}: BEGIN SOLUTION is never closed by END SOLUTION")
    if blocks == 0:
        raise MarkerError(f"exercise {exercise}: the cell has no '### BEGIN SOLUTION' block")
    return "\n".join(out)


@dataclass(frozen=True)
class ExerciseCell:
    index: int
    id: str
    source: str
