"""Command line of the grader.

    python -m transformer_course.grade SUBMISSION [SUBMISSION ...] [--out DIR]

A SUBMISSION is a notebook or a folder of them. For each one, DIR/<name>/results.json (Gradescope's
format) and DIR/<name>/summary.md; for several, also DIR/summary.md and DIR/scores.csv.
Exit status: 0 when every submission reaches the pass mark, 1 when one does not, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

from .grader import Report, grade_notebook, submissions_in
from .release import course_root


def _slug(path: Path, base: Path | None) -> str:
    rel = path.relative_to(base) if base is not None else Path(path.name)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(rel.with_suffix("")).replace("/", "__")) or "submission"


def _unique(slug: str, taken: set[str]) -> str:
    """slug, or slug-2, slug-3, ... when two submissions share a name (given as separate paths)."""
    n = 1
    candidate = slug
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    return candidate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course-grade", description="Grade submitted notebooks of the course.")
    parser.add_argument("submissions", nargs="+", type=Path, help="a notebook (.ipynb) or a folder of notebooks")
    parser.add_argument("--out", type=Path, default=Path("grading-results"), help="where reports go (default: grading-results)")
    parser.add_argument("--cell-timeout", type=int, default=60, help="seconds one cell may run (default: 60)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one submission may run in total (default: 600)")
    parser.add_argument("--pass-mark", type=float, default=1.0, help="fraction of the points that counts as a pass (default: 1.0)")
    parser.add_argument("--root", type=Path, default=None, help="the course folder with notebooks/ (default: found from the package)")
    parser.add_argument("--quiet", action="store_true", help="print only the final line")
    args = parser.parse_args(argv)

    if not 0 <= args.pass_mark <= 1:
        parser.error("--pass-mark is a fraction between 0 and 1")
    if args.cell_timeout < 1 or args.timeout < 1:
        parser.error("time limits are positive numbers of seconds")
    jobs: list[tuple[Path, Path | None]] = []
    for given in args.submissions:
        if not given.exists():
            parser.error(f"no such file or folder: {given}")
        found = submissions_in(given)
        if given.is_dir() and not found:
            parser.error(f"the folder {given} holds no files to grade")
        jobs += [(p, given if given.is_dir() else None) for p in found]
    root = args.root or course_root()

    reports: list[tuple[str, Report]] = []
    for path, base in jobs:
        report = grade_notebook(path, root, cell_timeout=args.cell_timeout, timeout=args.timeout)
        slug = _unique(_slug(path, base), {s for s, _ in reports})
        folder = args.out / slug
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(report.gradescope(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "summary.md").write_text(report.markdown(), encoding="utf-8")
        reports.append((slug, report))
        if not args.quiet:
            print(f"{path}: {report.score:g} / {report.max_score:g} ({report.seconds:.1f} s) -> {folder}/")
            for problem in report.problems:
                print(f"    {problem}")
    if len(reports) > 1:
        _write_overview(args.out, reports)

    failing = [slug for slug, r in reports if r.max_score == 0 or r.score < args.pass_mark * r.max_score]
    print(f"graded {len(reports)} submission(s); {len(reports) - len(failing)} reached the pass mark; reports in {args.out}/")
    return 1 if failing else 0


def _write_overview(out: Path, reports: list[tuple[str, Report]]) -> None:
    lines = ["# Grading summary", "", "| submission | score | max | problems |", "|---|---|---|---|"]
    for slug, r in reports:
        lines.append(f"| {r.submission} | {r.score:g} | {r.max_score:g} | {'; '.join(r.problems).replace('|', '/')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(out / "scores.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        names = sorted({t.name for _, r in reports for t in r.tests})
        writer.writerow(["submission", "report", "score", "max_score", *names])
        for slug, r in reports:
            by_name = {t.name: t.score for t in r.tests}
            writer.writerow([r.submission, slug, f"{r.score:g}", f"{r.max_score:g}", *[by_name.get(n, "") for n in names]])


if __name__ == "__main__":
    sys.exit(main())
