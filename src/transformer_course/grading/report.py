"""The grader's report: a result per exercise, and the Markdown and JSON they are written as.

Everything a submission wrote (its output, its error messages) is escaped before it reaches Markdown, so a
hostile notebook cannot forge lines of the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Report", "TestResult", "capped", "fenced", "md_escape"]

# What a submission can make the report say is capped: its error messages and notes come back as problems, and
# its output as a test's output. Past these limits the rest is cut, and the report says how much.
PROBLEM_CHARS = 500  # one problem, on one line
MAX_PROBLEMS = 20
OUTPUT_CHARS = 6000  # one exercise's output


def capped(text: str, limit: int) -> str:
    text = str(text)
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

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tests)

    def gradescope(self) -> dict:
        return {
            "score": self.score,
            "max_score": self.max_score,
            "execution_time": round(self.seconds, 1),
            "output": "\n".join(
                [f"- {p}" for p in _capped_problems(self.problems)]  # each on a line of its own, marked as an item
                + ([self.isolation] if "WARNING" in self.isolation else [])
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
        if "WARNING" in self.isolation:
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
    return " ".join(str(text).split()).translate(_MD_SPECIAL)


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
