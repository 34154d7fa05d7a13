"""Issue 56, item 3: scores in the CSV form Canvas imports, from the instructor's Canvas gradebook export.

The file keeps Canvas's identifier columns for every student of the roster, adds a "Points Possible" row and a column
per chapter graded (the best score, after any late policy), matches submissions by login, id or name whatever the
case, leaves a student without a submission empty, and says which graded students it could not place. A roster that
is not Canvas's export is a usage error before anything is graded.
"""

import csv

import pytest

from transformer_course.grading.host.cli import main
from transformer_course.grading.host.lms import CANVAS_FILE, IDENTIFIERS, RosterError, canvas_import
from transformer_course.grading.host.report import Report
from transformer_course.grading.host.report import TestResult as Result

EXPORT = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (101)\n"
    "    Points Possible,,,,,10\n"
    "\"Lovelace, Ada\",11,s-11,ada,A,9\n"
    "\"Turing, Alan\",12,s-12,aturing,A,8\n"
    "\"Hopper, Grace\",13,s-13,grace,B,\n"
    "\"Student, Test\",99,,,A,\n"
)


def _report(student: str, chapter: int, points: float, late_factor: float = 1.0) -> Report:
    r = Report(f"{student}.ipynb", chapter=chapter, student=student, chapter_max=14, late_factor=late_factor)
    r.tests = [Result("Exercise 5.1: x", points, 14, "")]
    return r


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_the_canvas_file_fills_a_column_per_chapter_by_login_id_or_name(tmp_path):
    roster = tmp_path / "export.csv"
    roster.write_text(EXPORT)
    reports = [
        ("a", _report("ADA", 5, 14)),  # the login, in another case
        ("a2", _report("ada", 5, 10)),  # a second submission: the best counts
        ("t", _report("s-12", 5, 14, late_factor=0.9)),  # the SIS user id; a day late at 10 % a day
        ("x", _report("mallory", 5, 3)),  # in no roster row
        ("g", _report("grace", 8, 20)),
    ]
    unmatched = canvas_import(roster, tmp_path, reports)
    assert unmatched == ["mallory"]
    rows = _rows(tmp_path / CANVAS_FILE)
    assert rows[0] == [*IDENTIFIERS, "Chapter 5 (course-grade)", "Chapter 8 (course-grade)"]
    assert rows[1] == ["Points Possible", "", "", "", "", "14", "14"]
    body = {r[0]: r[5:] for r in rows[2:]}
    assert body == {
        "Lovelace, Ada": ["14", ""],
        "Turing, Alan": ["12.6", ""],
        "Hopper, Grace": ["", "20"],
        "Student, Test": ["", ""],
    }
    assert rows[2][:5] == ["Lovelace, Ada", "11", "s-11", "ada", "A"]  # Canvas's identifiers, as exported


def test_a_roster_that_is_not_canvas_export_is_refused(tmp_path, capsys):
    roster = tmp_path / "names.csv"
    roster.write_text("name,email\nada,ada@example.org\n")
    with pytest.raises(RosterError, match="no column Student, ID, SIS User ID, SIS Login ID, Section"):
        canvas_import(roster, tmp_path, [])
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), "--canvas-roster", str(roster), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "is not a Canvas gradebook export" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--canvas-roster", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "out")])
    assert "cannot read the Canvas roster" in capsys.readouterr().err
