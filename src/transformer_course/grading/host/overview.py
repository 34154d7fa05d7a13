"""What a folder run writes for the class as a whole, beside each submission's report folder: summary.md, a
table with a row per submission, and scores.csv, the same rows for a gradebook or a spreadsheet.

Each row names the student, the chapter, the score out of the chapter's full maximum and a status (report.STATUSES).
``complete`` fills in what the grader of one file cannot know: who submitted it, and for a file with nothing graded
(unreadable, or another chapter's under --chapter) the chapter being graded and its maximum.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

from .. import registry
from .report import STATUSES, Report, capped, md_escape

__all__ = [
    "COLUMNS",
    "OVERVIEW",
    "complete",
    "csv_cell",
    "exercise_order",
    "say",
    "student_of",
    "tally",
    "write_overview",
]

OVERVIEW = ("summary.md", "scores.csv", "gradebook.csv")  # what a folder run writes beside the report folders
# scores.csv's columns, then one per exercise (its score). The submission's path comes first: the one column that
# tells every row apart (a student may hand in two notebooks).
PROBLEMS_CHARS = 2000  # of a row's problems, on one line
# With --due, the last three: the file's time, started days late, and the points before the late policy.
COLUMNS = ("submission", "student", "score", "max_score", "percent", "chapter", "status", "report", "problems",
           "submitted", "late_days", "raw_score")  # fmt: skip


def exercise_order(name: str) -> tuple:
    """A test's place among the columns: "Exercise 10.1: ..." after "Exercise 9.4: ...", by chapter and number (as
    text, 10.1 came before 2.1); a name of another form after them, by its text."""
    match = re.match(r"Exercise (\d+)\.(\d+)\b", name)
    return (0, int(match.group(1)), int(match.group(2)), name) if match else (1, 0, 0, name)


def csv_cell(value: object) -> str:
    """A CSV field that a spreadsheet shows as text: no formula, whatever a file was named."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _course_names() -> set[str]:
    return {Path(registry.chapter_notebook(c)).stem for c in registry.CHAPTER_MODULES}


def student_of(path: Path, base: Path | None) -> str:
    """Who handed the notebook in: in a folder of per-student folders, the folder below the one given
    (``subs/alice/notebooks/05_self_attention.ipynb``: alice); else the file's stem, unless that is the course's own
    name for the notebook (it was not renamed), which says nothing: then the name of the folder it is in."""
    if base is not None and len(path.relative_to(base).parts) > 1:
        return path.relative_to(base).parts[0]
    if path.stem in _course_names() and path.parent.name and (base is None or path.parent != base):
        return path.parent.name
    return path.stem


def chapter_max(chapter: int) -> float:
    return sum(e.points for e in registry.chapter_exercises(chapter))


def complete(report: Report, path: Path, base: Path | None, chapter: int | None) -> Report:
    """Fill in the student, and the chapter and its maximum: the chapter the grader found in the file; else the one
    being graded (--chapter); else the one the file is named after (``05_...``); else unknown (no maximum)."""
    report.student = report.student or student_of(path, base)
    named = re.match(r"(\d+)_", path.name)
    for candidate in (report.chapter, chapter, int(named.group(1)) if named else None):
        if candidate in registry.CHAPTER_MODULES:
            report.chapter = candidate
            report.chapter_max = chapter_max(candidate)
            break
    return report


def say(path: Path, folder: Path, report: Report) -> None:
    """What the command line prints of one submission, as it is graded (not with --quiet)."""
    print(f"{path}: {report.score:g} / {report.max_score:g}, {report.status} ({report.seconds:.1f} s) -> {folder}/")
    if report.lateness:
        print(f"    {report.lateness} Points before: {report.raw_score:g}.")
    for problem in report.problems:
        print(f"    {problem}")
    for test in report.tests:
        print(f"    {test.name}: {test.score:g} / {test.max_score:g} {test.verdict}")


def tally(reports: list[Report]) -> str:
    """'3 full marks, 1 unreadable': how many submissions have each status, in the order of STATUSES."""
    counts = Counter(r.status for r in reports)
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])


def _problems(r: Report) -> str:
    return capped(" ".join("; ".join(r.problems).split()), PROBLEMS_CHARS)


def _percent(r: Report) -> str:
    return f"{100 * r.score / r.max_score:.1f}" if r.max_score else ""


def write_overview(
    out: Path, reports: list[tuple[str, Report]], skipped: list[tuple[str, str]], shown: dict[str, str]
) -> None:
    lines = [
        "# Grading summary",
        "",
        f"{len(reports)} submission(s) graded: {tally([r for _, r in reports])}.",
        "",
        "| student | chapter | submission | report | score | max | status | problems |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for slug, r in reports:
        lines.append(
            f"| {md_escape(r.student)} | {'' if r.chapter is None else r.chapter} | "
            f"{md_escape(shown.get(slug, r.submission))} | {md_escape(slug)}/ | {r.score:g} | "
            f"{r.max_score:g} | {r.status} | {md_escape(_problems(r))} |"
        )
    if skipped:
        lines += ["", "Not graded:", ""] + [f"- {md_escape(p)}: {md_escape(why)}" for p, why in skipped]
    (out / OVERVIEW[0]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(out / OVERVIEW[1], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        names = sorted({t.name for _, r in reports for t in r.tests}, key=exercise_order)
        writer.writerow([*COLUMNS, *names])
        for slug, r in reports:
            by_name = {t.name: f"{t.score:g}" for t in r.tests}
            writer.writerow(
                [
                    csv_cell(shown.get(slug, r.submission)),
                    csv_cell(r.student),
                    f"{r.score:g}",
                    f"{r.max_score:g}" if r.max_score else "",
                    _percent(r),
                    "" if r.chapter is None else r.chapter,
                    r.status,
                    f"{slug}/summary.md",
                    csv_cell(_problems(r)),
                    r.submitted,
                    r.late_days if r.submitted else "",
                    f"{r.raw_score:g}",
                    *[by_name.get(n, "") for n in names],
                ]
            )
    write_gradebook(out, reports)


def write_gradebook(out: Path, reports: list[tuple[str, Report]]) -> None:
    """gradebook.csv: one row per student, a column per chapter (the best of the student's submissions of it), the
    total and its maximum. A learning-management system imports it with the student column as the key (Moodle's
    "Import grades from CSV" maps the columns; in Canvas, paste the chapter columns into its exported gradebook)."""
    chapters = sorted({r.chapter for _, r in reports if r.chapter is not None})
    best: dict[str, dict[int, float]] = {}
    for _, r in reports:
        if r.chapter is not None:
            row = best.setdefault(r.student, {})
            row[r.chapter] = max(row.get(r.chapter, 0.0), r.score)
    maxima = {c: chapter_max(c) for c in chapters}
    with open(out / OVERVIEW[2], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *[f"chapter {c} (of {maxima[c]:g})" for c in chapters], "total", "max_total"])
        for student in sorted(best):
            scores = best[student]
            total = sum(scores.values())
            top = sum(maxima[c] for c in chapters)
            cells = [f"{scores[c]:g}" if c in scores else "" for c in chapters]
            writer.writerow([csv_cell(student), *cells, f"{total:g}", f"{top:g}"])
