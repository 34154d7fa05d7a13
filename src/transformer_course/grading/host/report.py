"""The grader's report: a result per exercise, and the Markdown and JSON they are written as.

Everything a submission wrote (its output, its error messages) is escaped before it reaches Markdown, so a
hostile notebook cannot forge lines of the report.

A report's status, one of STATUSES, sums it up for a gradebook (see ``Report.status``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .limits import WEAK_SANDBOX

__all__ = ["STATUSES", "Report", "TestResult", "capped", "fenced", "md_escape", "visible"]

# What a submission can make the report say is capped: its error messages and notes come back as problems, and
# its output as a test's output. Past these limits the rest is cut, and the report says how much.
PROBLEM_CHARS = 500  # one problem, on one line
MAX_PROBLEMS = 20
OUTPUT_CHARS = 6000  # one exercise's output

# A submission's status, in the order of the checks that decide it (Report.status):
STATUSES = (
    "internal error",  # the grader failed (a bug, a worker that did not start, a killed grading process): regrade
    "wrong chapter",  # --chapter N, and the notebook holds another chapter's exercises: 0 of chapter N's points
    "unreadable",  # nothing to grade: not a notebook, broken JSON, too large, or no exercise cells
    "full marks",  # every exercise passed
    "timed out",  # a time limit cut the grading short: the exercises from that point on got no points
    "below full marks",  # graded, and some points were lost (a blank notebook too: 0 of the maximum)
)
# How the grader words what decides a status (grader.py, sandbox.py, submission.py): matched at the start or the end
# of a problem, where the text is the grader's own, never in the middle, where a file name or an error message may be.
_INTERNAL = ("internal grader error (", "; please tell the course staff")
_WRONG_CHAPTER_END = "is being graded (--chapter); nothing was graded"
_CUT_SHORT_END = "; the exercises from that point on got no points"
_TIME_LIMITS = (
    "the submission ran past the total time limit",
    "a cell ran past its time limit and did not stop",
    "the grading process ran out of CPU time",
)


# Characters a terminal or an editor acts on rather than shows: the C0 and C1 controls but newline and tab, and the
# bidirectional overrides that reorder what a line seems to say. A submission's text shows them as escapes.
_INVISIBLE = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) not in "\n\t"}
_INVISIBLE |= {c: f"\\u{c:04x}" for c in [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}


def visible(text: str) -> str:
    """The text with every control character (but newline and tab) and bidirectional override written as an
    escape, ``\\x1b`` or ``\\u202e``, so that a report shows what a submission printed and cannot be redrawn by it."""
    return str(text).replace("\r\n", "\n").translate(_INVISIBLE)


def capped(text: str, limit: int) -> str:
    text = visible(text)
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit:,} more characters not shown]"


def _capped_problems(problems: list[str]) -> list[str]:
    kept = [capped(" ".join(str(p).split()), PROBLEM_CHARS) for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        kept.append(f"[... {len(problems) - MAX_PROBLEMS:,} more problems not shown]")
    return kept


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    output: str
    state: str = ""  # "passed", "failed" or "not attempted"

    @property
    def status(self) -> str:
        """Gradescope's status: passed or failed."""
        return "passed" if self.score == self.max_score else "failed"

    @property
    def verdict(self) -> str:
        return self.state or self.status


@dataclass
class Report:
    submission: str
    chapter: int | None = None
    tests: list[TestResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # about the submission as a whole
    seconds: float = 0.0
    isolation: str = ""  # the sandbox mode used, and its warning if it is the weak one
    # Set by the command line (``overview.complete``): who submitted it, the chapter's full maximum (so
    # that a file with nothing graded scores 0 of 14, not 0 of 0), and a status known outright (a grader that died).
    student: str = ""
    chapter_max: float | None = None
    outcome: str = ""
    # Set by the command line with --due (``late.apply_lateness``): when the file was handed in, how many started days
    # late, the fraction of its points it keeps, and the policy's words.
    submitted: str = ""
    due: str = ""
    late_days: int = 0
    late_factor: float = 1.0
    late_policy: str = ""

    @property
    def raw_score(self) -> float:
        """The points the exercises earned, before any late policy."""
        return sum(t.score for t in self.tests)

    @property
    def score(self) -> float:
        """The points after the late policy (the raw points when on time, or without --due)."""
        return round(self.raw_score * self.late_factor, 4)

    @property
    def lateness(self) -> str:
        """The report's words on lateness: empty when on time or without a due date."""
        if not self.late_days:
            return ""
        days = f"{self.late_days} day{'s' if self.late_days > 1 else ''}"
        return f"Handed in {self.submitted}, {days} late (due {self.due}): {self.late_policy}."

    @property
    def max_score(self) -> float:
        return max(sum(t.max_score for t in self.tests), self.chapter_max or 0)

    @classmethod
    def failed(cls, path: Path, exc: BaseException) -> Report:
        """The report of a submission whose grading failed for a reason of the grader's own."""
        why = f"{_INTERNAL[0]}{type(exc).__name__}: {exc}){_INTERNAL[1]}"
        return cls(submission=path.name, problems=[why], outcome="internal error")

    def write(self, folder: Path) -> None:
        """results.json (Gradescope's format) and summary.md, into the submission's report folder."""
        text = json.dumps(self.gradescope(), indent=2, ensure_ascii=False) + "\n"
        (folder / "results.json").write_text(text, encoding="utf-8")
        (folder / "summary.md").write_text(self.markdown(), encoding="utf-8")

    @property
    def status(self) -> str:
        """One of STATUSES: the outcome when it was set, else what the tests and the grader's problems say."""
        if self.outcome:
            return self.outcome
        if any(p.startswith(_INTERNAL[0]) and p.endswith(_INTERNAL[1]) for p in self.problems):
            return "internal error"
        if not self.tests:
            return "wrong chapter" if any(p.endswith(_WRONG_CHAPTER_END) for p in self.problems) else "unreadable"
        if self.raw_score == self.max_score:  # the work's status: lateness is said apart (lateness, late_days)
            return "full marks"
        if any(p.startswith(_TIME_LIMITS) and p.endswith(_CUT_SHORT_END) for p in self.problems):
            return "timed out"
        return "below full marks"

    @property
    def isolation_is_weak(self) -> bool:
        """Whether the report shows its isolation line: the process mode's warning, or the sandbox's missing control
        groups (limits.missing_groups)."""
        return "WARNING" in self.isolation or WEAK_SANDBOX in self.isolation

    def gradescope(self) -> dict:
        return {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.seconds, 1),
            "output": "\n".join(
                ([f"- {self.lateness}"] if self.lateness else [])
                + [f"- {p}" for p in _capped_problems(self.problems)]  # each on a line of its own, marked as an item
                + ([self.isolation] if self.isolation_is_weak else [])
            )
            or "Graded every exercise.",
            "stdout_visibility": "visible",
            "tests": [
                {
                    "name": t.name,
                    "number": t.name.split(":")[0].replace("Exercise ", ""),
                    "score": t.score,
                    "max_score": t.max_score,
                    "status": t.status,
                    "output": capped(t.output, OUTPUT_CHARS),
                }
                for t in self.tests
            ],
        }

    def markdown(self) -> str:
        head = f"# Grading report: {md_escape(self.submission)}\n\n"
        head += f"**Score: {self.score:g} / {self.max_score:g}**"
        head += f" (chapter {self.chapter})" if self.chapter is not None else ""
        head += f", graded in {self.seconds:.1f} s\n\n"
        head += f"Student: {md_escape(self.student)}. " if self.student else ""
        head += f"Status: {self.status}\n\n"
        head += f"{md_escape(self.lateness)} Points before: {self.raw_score:g}.\n\n" if self.lateness else ""
        if self.isolation_is_weak:
            head += f"> {md_escape(self.isolation)}\n\n"
        if self.problems:
            head += "".join(f"- {md_escape(p)}\n" for p in _capped_problems(self.problems)) + "\n"
        if self.tests:
            head += "| exercise | score | status |\n|---|---|---|\n"
            head += "".join(
                f"| {md_escape(t.name)} | {t.score:g} / {t.max_score:g} | {t.verdict} |\n" for t in self.tests
            )
            for t in self.tests:
                head += f"\n## {md_escape(t.name)}\n\n{fenced(capped(t.output, OUTPUT_CHARS))}\n"
        return head


_MD_SPECIAL = str.maketrans({**{c: "\\" + c for c in "\\`*_[]|"}, "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def md_escape(text: str) -> str:
    """Text that Markdown (and the HTML inside it) shows as written, on one line."""
    return " ".join(visible(text).split()).translate(_MD_SPECIAL)


def fenced(text: str) -> str:
    """A code block that no run of backticks inside the text can close."""
    longest = max((len(run) for run in str(text).split("\n") for run in _backtick_runs(run)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _backtick_runs(line: str) -> list[str]:
    runs, current = [], ""
    for ch in line:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    return runs + ([current] if current else [])
