"""Scores in the form Canvas imports: the instructor's Canvas gradebook export, with a column per chapter graded.

Canvas imports a CSV only with its own identifier columns (``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``,
``Section``), which the grader cannot know. So ``--canvas-roster export.csv`` takes the gradebook that Canvas
exports (Grades, Export), and writes ``canvas-import.csv`` beside the other files: those five columns for each
student of the roster, a "Points Possible" row, and one column per chapter graded, ``Chapter N (course-grade)``,
with the student's best score of it after any late policy (as in gradebook.csv). Canvas makes a new assignment of a
column it does not know, and leaves a cell that is empty unchanged. A submission is matched to a roster row by its
student's name (the folder or file it came in, ``overview.student_of``) against the SIS login, the SIS user id, the
Canvas id, then the student's name, ignoring case; ``canvas_import`` returns the students it could not match.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .report import Report

__all__ = ["CANVAS_FILE", "IDENTIFIERS", "RosterError", "canvas_import", "read_roster"]

CANVAS_FILE = "canvas-import.csv"
IDENTIFIERS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
_MATCHED_ON = ("SIS Login ID", "SIS User ID", "ID", "Student")


class RosterError(ValueError):
    """The roster is not a Canvas gradebook export: what was wrong."""


def read_roster(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"cannot read the Canvas roster {path}: {exc}") from None
    missing = [c for c in IDENTIFIERS if c not in header]
    if missing:
        raise RosterError(f"{path} is not a Canvas gradebook export: it has no column {', '.join(missing)}")
    # Canvas's export has rows that are not students: "Points Possible", and "Student, Test" (the test student)
    return [r for r in rows if (r.get("Student") or "").strip() not in ("", "Points Possible")]


def canvas_import(roster: Path, out: Path, reports: list[tuple[str, Report]]) -> list[str]:
    """Write out/canvas-import.csv (see the module's docstring); return the students graded that no roster row
    matched, whose scores it could not place. RosterError when the roster cannot be read as Canvas's export."""
    students = read_roster(roster)
    chapters = sorted({r.chapter for _, r in reports if r.chapter is not None})
    best: dict[str, dict[int, float]] = {}
    maxima: dict[int, float] = {}
    for _, r in reports:
        if r.chapter is not None:
            row = best.setdefault(r.student.casefold(), {})
            row[r.chapter] = max(row.get(r.chapter, 0.0), r.score)
            maxima[r.chapter] = max(maxima.get(r.chapter, 0.0), r.max_score)
    placed: set[str] = set()
    with open(out / CANVAS_FILE, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*IDENTIFIERS, *[f"Chapter {c} (course-grade)" for c in chapters]])
        writer.writerow(["Points Possible", "", "", "", "", *[f"{maxima[c]:g}" for c in chapters]])
        for student in students:
            keys = [student.get(column, "").strip().casefold() for column in _MATCHED_ON]
            match = next((k for k in keys if k and k in best), None)
            scores = best.get(match, {}) if match else {}
            placed.add(match or "")
            writer.writerow(
                [student[c] for c in IDENTIFIERS] + [f"{scores[c]:g}" if c in scores else "" for c in chapters]
            )
    return sorted({r.student for _, r in reports if r.chapter is not None and r.student.casefold() not in placed})
