"""What a folder run writes for the class as a whole, beside each submission's report folder: summary.md, a
table with a row per submission, and scores.csv, the same scores for a spreadsheet."""

from __future__ import annotations

import csv
from pathlib import Path

from .report import Report, md_escape

__all__ = ["OVERVIEW", "csv_cell", "write_overview"]

OVERVIEW = ("summary.md", "scores.csv")  # what a folder run writes beside the submissions' report folders


def csv_cell(value: object) -> str:
    """A CSV field that a spreadsheet shows as text: no formula, whatever a file was named."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_overview(
    out: Path, reports: list[tuple[str, Report]], skipped: list[tuple[str, str]], shown: dict[str, str]
) -> None:
    lines = ["# Grading summary", "", "| submission | report | score | max | problems |", "|---|---|---|---|---|"]
    for slug, r in reports:
        lines.append(
            f"| {md_escape(shown.get(slug, r.submission))} | {md_escape(slug)}/ | {r.score:g} | {r.max_score:g} | "
            f"{md_escape('; '.join(r.problems))} |"
        )
    if skipped:
        lines += ["", "Not graded:", ""] + [f"- {md_escape(p)}: {md_escape(why)}" for p, why in skipped]
    (out / OVERVIEW[0]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(out / OVERVIEW[1], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        names = sorted({t.name for _, r in reports for t in r.tests})
        writer.writerow(["submission", "report", "score", "max_score", *names])
        for slug, r in reports:
            by_name = {t.name: t.score for t in r.tests}
            writer.writerow(
                [
                    csv_cell(shown.get(slug, r.submission)),
                    csv_cell(slug),
                    f"{r.score:g}",
                    f"{r.max_score:g}",
                    *[by_name.get(n, "") for n in names],
                ]
            )
