"""Command line of the grader.

    python -m transformer_course.grade SUBMISSION [SUBMISSION ...] [--out DIR] [--chapter N]
                                       [--isolation auto|bwrap|process] [--pass-mark F] [--exit-zero]
                                       [--due DATE [--late-policy none|zero|penalty:P]] [--canvas-roster CSV]

A SUBMISSION is a notebook or a folder of them (its .ipynb files; other files are listed and skipped,
and so is the output folder when it lies inside). A copy of one of the course's notebooks without
exercises (a chapter's second notebook) is skipped too, unless an exercise cell was pasted into it.
For each one, DIR/<name>/results.json (Gradescope's format) and DIR/<name>/summary.md; for several,
also DIR/summary.md, DIR/gradebook.csv (a row per student: a column per chapter, the total) and DIR/scores.csv,
a row per submission: student, chapter, score out of the chapter's
maximum, status (report.STATUSES), report (grading/host/overview.py). With --due, each file's time decides how late
it is, and the late policy what it loses (late.py); with --canvas-roster, DIR/canvas-import.csv (lms.py).
The hidden cases' seed is secret: keyed on the submission with the key in $COURSE_GRADER_KEY (or the
file --key-file) when there is one, so that a submission always gets the same cases; else fresh per run.
Exit status (EXIT): 0 every submission graded and at the pass mark (--exit-zero: graded, whatever the score);
1 one below the pass mark (a normal outcome, reports written; a CI job fails on it); 2 a usage error (or the
output folder cannot be written, or --isolation bwrap is not available); 3 the grader failed on a submission
(status "internal error"; the other reports are written) or crashed. 3 wins over 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from ...repository import course_root
from .. import registry
from . import isolation
from .grader import grade_notebook, secret_seed
from .late import LatePolicy, apply_lateness, parse_due
from .lms import CANVAS_FILE, canvas_import, read_roster
from .overview import OVERVIEW, complete, say, tally, write_overview
from .report import Report
from .submission import submissions_in, unusual_in, without_exercises

EXIT = {"graded": 0, "below the pass mark": 1, "usage error": 2, "internal error": 3}


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course-grade", description="Grade submitted notebooks of the course.")
    parser.add_argument("submissions", nargs="+", type=Path, help="a notebook (.ipynb) or a folder of notebooks")
    parser.add_argument(
        "--out", type=Path, default=Path("grading-results"), help="where reports go (default: grading-results)"
    )
    parser.add_argument(
        "--chapter",
        type=int,
        default=None,
        help="the chapter being graded: a notebook of another chapter gets no points",
    )
    parser.add_argument(
        "--isolation",
        choices=isolation.MODES,
        default="auto",
        help="where student code runs: bwrap (bubblewrap sandbox; an error when missing), process (no "
        "sandbox, limits only) or auto (bwrap when it works, else process with a warning)",
    )
    parser.add_argument(
        "--key-file",
        type=Path,
        default=None,
        help="secret key for the hidden cases' seed (default: $COURSE_GRADER_KEY)",
    )
    parser.add_argument("--cell-timeout", type=int, default=60, help="seconds one cell may run (default: 60)")
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds one submission may run in total (default: 600)"
    )
    parser.add_argument(
        "--memory", type=int, default=4096, help="MiB of address space for the student's code (default: 4096)"
    )
    parser.add_argument(
        "--pass-mark", type=float, default=1.0, help="fraction of the points that counts as a pass (default: 1.0)"
    )
    parser.add_argument(
        "--root", type=Path, default=None, help="the course folder with notebooks/ (default: found from the package)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the final line")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 below the pass mark too (2, 3: errors)")
    parser.add_argument(
        "--jobs", type=int, default=1, help="submissions graded at once, each in its own sandbox (default: 1)"
    )
    parser.add_argument(
        "--canvas-roster", type=Path, default=None, help="Canvas's gradebook export: write canvas-import.csv from it"
    )
    parser.add_argument("--due", default=None, help="the due date, e.g. 2026-12-01T23:59: a later file is late")
    parser.add_argument(
        "--late-policy",
        default="none",
        help="what late work loses: none (only marked late; the default), zero, or penalty:P (P %% per day late)",
    )
    return parser


def _jobs(parser, submissions: list[Path], out: Path, root: Path) -> tuple[list[tuple[Path, Path | None]], list]:
    """The notebooks to grade, each with the folder it was found in (None: given by name), and the files skipped,
    each with why: not a notebook, or a course notebook without exercises."""
    jobs: list[tuple[Path, Path | None]] = []
    skipped: list[tuple[str, str]] = []
    for given in submissions:
        if not given.exists():
            parser.error(f"no such file or folder: {given}")
        found = submissions_in(given, exclude=out)
        if given.is_dir():
            skipped += unusual_in(given, exclude=out)
            skipped += [(str(p), "not a notebook") for p in found if p.suffix != ".ipynb"]
            found = [p for p in found if p.suffix == ".ipynb"]
            if not found:
                parser.error(f"the folder {given} holds no notebooks (.ipynb) to grade")
        for p in found:
            reason = without_exercises(p, root)
            if reason:
                skipped.append((str(p), reason))
            else:
                jobs.append((p, given if given.is_dir() else None))
    return jobs, skipped


def _writable(folder: Path, what: Report | None = None) -> bool:
    """Can reports be written there? With a report, write it (the placeholder a killed grader leaves behind)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if what is None:
            probe = folder / ".write-test"
            probe.write_text("")
            probe.unlink()
        else:
            what.write(folder)
    except OSError as exc:
        print(f"course-grade: cannot write reports to {folder}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except Exception:  # noqa: BLE001 - a crash of the grader's own is exit 3, never 1 ("below the pass mark")
        traceback.print_exc()
        print("course-grade: internal error; please tell the course staff", file=sys.stderr)
        return EXIT["internal error"]


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.chapter is not None and args.chapter not in registry.CHAPTER_MODULES:
        parser.error(f"chapter {args.chapter} has no graded exercises (--chapter)")
    if not 0 <= args.pass_mark <= 1:
        parser.error("--pass-mark is a fraction between 0 and 1")
    if args.jobs < 1:
        parser.error("--jobs is a number of submissions graded at once, at least 1")
    if args.cell_timeout < 1 or args.timeout < 1:
        parser.error("time limits are positive numbers of seconds")
    try:
        args.due = parse_due(args.due) if args.due is not None else None
        args.late_policy = LatePolicy.parse(args.late_policy)
        if args.canvas_roster is not None:
            read_roster(args.canvas_roster)  # one that is not Canvas's export is said before anything is graded
    except ValueError as exc:  # a RosterError too
        parser.error(str(exc))
    if args.late_policy.kind != "none" and args.due is None:
        parser.error("--late-policy needs --due, the date after which work is late")
    try:
        resolved = isolation.resolve(args.isolation)  # once, for every submission
    except isolation.IsolationError as exc:
        parser.error(str(exc))
    if resolved.warning:
        print(resolved.warning, file=sys.stderr)
    try:
        key = args.key_file.read_bytes().strip() if args.key_file else os.environ.get("COURSE_GRADER_KEY", "").encode()
    except OSError as exc:
        parser.error(f"cannot read --key-file {args.key_file}: {exc.strerror or exc}")
    try:
        root = args.root or course_root()
    except FileNotFoundError as exc:  # the package installed away from the course folder
        parser.error(f"{exc}; give the course folder with --root")
    if not (root / "notebooks").is_dir():
        parser.error(f"--root {root} is not a course folder: it has no notebooks/")
    out = args.out.resolve()
    jobs, skipped = _jobs(parser, args.submissions, out, root)
    for path, reason in skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    if not _writable(out):
        return EXIT["usage error"]

    graded = _grade_all(jobs, out, root, args, resolved, key)
    if graded is None:
        return EXIT["usage error"]
    reports, shown = graded
    if len(reports) > 1 or skipped:
        write_overview(out, reports, skipped, shown)
    if args.canvas_roster:
        unmatched = canvas_import(args.canvas_roster, out, reports)
        if unmatched:
            print(
                f"{CANVAS_FILE}: no roster row for {', '.join(unmatched)}; their scores are not in it", file=sys.stderr
            )

    failing = [slug for slug, r in reports if r.max_score == 0 or r.score < args.pass_mark * r.max_score]
    broken = [slug for slug, r in reports if r.status == "internal error"]
    print(
        f"graded {len(reports)} submission(s): {tally([r for _, r in reports])}; "
        f"{len(reports) - len(failing)} reached the pass mark; reports in {args.out}/"
    )
    if broken:
        print(f"course-grade: the grader failed on {', '.join(broken)}; please tell the course staff", file=sys.stderr)
        return EXIT["internal error"]
    return EXIT["below the pass mark"] if failing and not args.exit_zero else EXIT["graded"]


def _grade_all(jobs, out: Path, root: Path, args, resolved, key: bytes):
    """Grade every job, args.jobs at a time (each in a process and a sandbox of its own), writing each report as it
    comes. Returns ([(report folder, report)] in the order of the jobs, {report folder: path shown}), or None
    when a report folder cannot be written."""
    slugs: list[str] = []
    shown: dict[str, str] = {}  # report folder -> the submission's path as given: two students' files may share a name
    # a submission named summary(.md).ipynb gets a folder of another name
    taken = {"summary", "scores", "gradebook", *OVERVIEW}
    for path, base in jobs:
        slug = _unique(_slug(path, base), taken | set(slugs))
        # Written first, replaced at the end: if the grading process itself is killed, this is what remains.
        killed = "grading did not finish: the grader was killed while it ran this submission"
        placeholder = complete(Report(path.name, problems=[killed], outcome="internal error"), path, base, args.chapter)
        if not _writable(out / slug, placeholder):
            return None
        slugs.append(slug)
        shown[slug] = str(path.relative_to(base)) if base is not None else str(path)
    options = {
        "cell_timeout": args.cell_timeout,
        "timeout": args.timeout,
        "chapter": args.chapter,
        "isolation": resolved,
        "memory_mb": args.memory,
    }
    calls = [(path, root, secret_seed(key, path.read_bytes()) if key else None, options) for path, _ in jobs]
    reports: dict[str, Report] = {}

    def done(slug: str, job: tuple[Path, Path | None], report: Report) -> None:
        path = job[0]
        complete(report, path, job[1], args.chapter)
        if args.due is not None:
            apply_lateness(report, path, args.due, args.late_policy)
        report.write(out / slug)
        reports[slug] = report
        if not args.quiet:
            say(path, out / slug, report)

    if args.jobs <= 1 or len(calls) <= 1:
        for slug, job, call in zip(slugs, jobs, calls):
            done(slug, job, _grade_one(call))
    else:
        # Processes, not threads: the grader computes the references in its own process, with PyTorch's global state.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = {pool.submit(_grade_one, call): (slug, job) for slug, job, call in zip(slugs, jobs, calls)}
            for future in as_completed(futures):
                slug, job = futures[future]
                try:
                    report = future.result()
                except Exception as exc:  # noqa: BLE001 - a grading process that died (memory): that one's report
                    report = Report.failed(job[0], exc)
                done(slug, job, report)
    return [(slug, reports[slug]) for slug in slugs], shown


def _grade_one(call) -> Report:
    path, root, seed, options = call
    try:
        return grade_notebook(path, root, seed=seed, **options)
    except Exception as exc:  # noqa: BLE001 - grade_notebook raises only IsolationError; a bug here is still a report
        return Report.failed(path, exc)


if __name__ == "__main__":
    sys.exit(main())
