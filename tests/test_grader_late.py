"""Issue 56, item 3: a due date, the file's time, a late flag and a late policy, applied to the totals.

A class folder with work handed in on time, a day late and three days late is graded with ``--due`` and each
policy: scores.csv, gradebook.csv, each report and Gradescope's results.json give the points after the policy, the
points before it and how late; a bad ``--due`` or ``--late-policy`` is a usage error that says what was wrong.
"""

import csv
import json
import os
import shutil
from datetime import UTC, datetime, timedelta

import pytest

from gradertools import notebook_name
from transformer_course.grading.host.cli import main
from transformer_course.grading.host.late import LatePolicy, late_days, parse_due

DUE = datetime(2026, 12, 1, 23, 59, tzinfo=UTC)


def test_days_late_are_started_days():
    assert late_days(DUE, DUE) == 0 and late_days(DUE - timedelta(days=3), DUE) == 0
    assert late_days(DUE + timedelta(minutes=1), DUE) == 1
    assert late_days(DUE + timedelta(days=1), DUE) == 1
    assert late_days(DUE + timedelta(days=1, seconds=1), DUE) == 2


def test_policies_and_what_they_keep():
    assert LatePolicy.parse("none").factor(5) == 1.0
    assert LatePolicy.parse("zero").factor(1) == 0.0 and LatePolicy.parse("zero").factor(0) == 1.0
    penalty = LatePolicy.parse("penalty:10")
    assert [penalty.factor(d) for d in (0, 1, 3)] == [1.0, 0.9, 0.7]
    assert penalty.factor(12) == 0.0  # never below nothing
    for bad, words in [("penalty:ten", "percentage per day"), ("penalty:0", "above 0"), ("half", "none, zero")]:
        with pytest.raises(ValueError, match=words):
            LatePolicy.parse(bad)
    assert parse_due("2026-12-01T23:59+00:00") == DUE
    assert parse_due("2026-12-01T23:59").tzinfo is not None  # a date without a zone is the machine's local time
    with pytest.raises(ValueError, match="such as 2026-12-01T23:59"):
        parse_due("tomorrow")


@pytest.fixture(scope="module")
def class_folder(course_root, tmp_path_factory):
    """alice on time, bob a day late, carol three days late (a blank notebook): files dated as handed in."""
    folder = tmp_path_factory.mktemp("late") / "submissions"
    folder.mkdir()
    solution = course_root / "solutions" / notebook_name(5)
    blank = course_root / "notebooks" / notebook_name(5)
    for name, source, late in [("alice", solution, -2), ("bob", solution, 20), ("carol", blank, 60)]:
        path = folder / f"{name}.ipynb"
        shutil.copy(solution if source == solution else blank, path)
        when = (DUE + timedelta(hours=late)).timestamp()
        os.utime(path, (when, when))
    return folder


def _graded(folder, out, *options):
    assert main([str(folder), "--chapter", "5", "--isolation", "process", "--out", str(out), "--quiet",
                 "--exit-zero", "--due", DUE.isoformat(), *options]) == 0  # fmt: skip
    with open(out / "scores.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    with open(out / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    return rows, book


def test_a_penalty_per_day_is_applied_to_the_scores_and_the_totals(class_folder, tmp_path):
    roster = tmp_path / "canvas.csv"  # Canvas's gradebook export: its import file gets the totals after the policy
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\nBob B,2,s2,bob,A\nAlice A,1,s1,alice,A\n")
    rows, book = _graded(class_folder, tmp_path / "out", "--late-policy", "penalty:10", "--canvas-roster", str(roster))
    with open(tmp_path / "out" / "canvas-import.csv", newline="") as f:
        canvas = list(csv.reader(f))
    assert canvas[2:] == [["Bob B", "2", "s2", "bob", "A", "12.6"], ["Alice A", "1", "s1", "alice", "A", "14"]]
    assert {s: r["late_days"] for s, r in rows.items()} == {"alice": "0", "bob": "1", "carol": "3"}
    assert rows["alice"]["score"] == rows["alice"]["raw_score"] == rows["alice"]["max_score"] == "14"
    assert (rows["bob"]["raw_score"], rows["bob"]["score"], rows["bob"]["status"]) == ("14", "12.6", "full marks")
    assert rows["carol"]["score"] == rows["carol"]["raw_score"] == "0"
    assert all(r["submitted"].startswith("2026-12-0") for r in rows.values())
    assert (book["bob"]["total"], book["alice"]["total"]) == ("12.6", "14")  # the gradebook's totals after the policy
    bob = next(p for p in (tmp_path / "out").iterdir() if p.name.startswith("bob"))
    report = (bob / "summary.md").read_text()
    assert "**Score: 12.6 / 14**" in report and "1 day late" in report and "10 % off per day late" in report
    assert "Points before: 14" in report
    results = json.loads((bob / "results.json").read_text())
    assert results["score"] == 12.6 and "1 day late" in results["output"]
    alice = next(p for p in (tmp_path / "out").iterdir() if p.name.startswith("alice"))
    assert "late" not in (alice / "summary.md").read_text().lower().split("## ")[0]


def test_zero_and_none(class_folder, tmp_path):
    rows, _ = _graded(class_folder, tmp_path / "zero", "--late-policy", "zero")
    assert (rows["alice"]["score"], rows["bob"]["score"], rows["bob"]["raw_score"]) == ("14", "0", "14")
    rows, _ = _graded(class_folder, tmp_path / "none")  # the default: marked late, nothing taken off
    assert (rows["bob"]["score"], rows["bob"]["late_days"]) == ("14", "1")


def test_without_a_due_date_nothing_is_late(class_folder, tmp_path):
    out = tmp_path / "plain"
    assert main([str(class_folder), "--chapter", "5", "--isolation", "process", "--out", str(out), "--quiet",
                 "--exit-zero"]) == 0  # fmt: skip
    with open(out / "scores.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {r["submitted"] for r in rows.values()} == {""} and rows["bob"]["score"] == "14"


@pytest.mark.parametrize(
    "options, words",
    [
        (["--late-policy", "zero"], "--late-policy needs --due"),
        (["--due", "next week"], "such as 2026-12-01T23:59"),
        (["--due", "2026-12-01T23:59", "--late-policy", "penalty:150"], "at most 100"),
    ],
)
def test_bad_options_are_usage_errors_that_say_what_was_wrong(class_folder, tmp_path, capsys, options, words):
    with pytest.raises(SystemExit) as exit_:
        main([str(class_folder), "--out", str(tmp_path / "x"), *options])
    assert exit_.value.code == 2 and words in capsys.readouterr().err
