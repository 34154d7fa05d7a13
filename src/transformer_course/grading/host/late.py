"""Late work: a due date, the time each submission was handed in (its file's time), and what lateness costs.

``--due 2026-12-01T23:59`` gives the due date (ISO 8601; without a zone, the grading machine's local time), and
``--late-policy`` what a late submission loses: ``none`` (the default: it is only marked late), ``zero`` (no points)
or ``penalty:P`` (P percent of its points per day or part of a day late, never below 0). A submission is as late as
its file's modification time is past the due date, counted in started days: one minute late is one day. The score
that the report, scores.csv and gradebook.csv give is the points after the policy; the points before it stay in the
report and in scores.csv's ``raw_score``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .report import Report

__all__ = ["LatePolicy", "apply_lateness", "late_days", "parse_due"]

DAY = 86400.0


@dataclass(frozen=True)
class LatePolicy:
    kind: str = "none"  # "none", "zero" or "penalty"
    percent_per_day: float = 0.0

    @classmethod
    def parse(cls, text: str) -> LatePolicy:
        """``none``, ``zero`` or ``penalty:P`` (P a percentage per day, more than 0 and at most 100); else ValueError
        with what was wrong."""
        kind, _, value = text.strip().partition(":")
        if kind in ("none", "zero") and not value:
            return cls(kind)
        if kind == "penalty":
            try:
                percent = float(value)
            except ValueError:
                raise ValueError(f"penalty:P takes a percentage per day, got {value!r}") from None
            if not 0 < percent <= 100:
                raise ValueError(f"penalty:P takes a percentage per day above 0 and at most 100, got {value}")
            return cls(kind, percent)
        raise ValueError(f"a late policy is none, zero or penalty:P (P percent per day), got {text!r}")

    def factor(self, days: int) -> float:
        """The fraction of its points that a submission this many days late keeps."""
        if days <= 0 or self.kind == "none":
            return 1.0
        if self.kind == "zero":
            return 0.0
        return max(0.0, 1.0 - self.percent_per_day * days / 100)

    def describe(self, days: int) -> str:
        if self.kind == "zero":
            return "late work gets no points"
        if self.kind == "penalty":
            return f"{self.percent_per_day:g} % off per day late: {100 * (1 - self.factor(days)):g} % off"
        return "no points taken off for lateness"


def parse_due(text: str) -> datetime:
    """The due date, aware of its zone: ISO 8601, local time where it names no zone; else ValueError that says so."""
    try:
        due = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--due takes a date and time such as 2026-12-01T23:59, got {text!r}") from None
    return due if due.tzinfo is not None else due.astimezone()


def late_days(submitted: datetime, due: datetime) -> int:
    """Started days past the due date: 0 on time (at the due time itself too), 1 for a minute late."""
    seconds = (submitted - due).total_seconds()
    return math.ceil(seconds / DAY) if seconds > 0 else 0


def apply_lateness(report: Report, path: Path, due: datetime, policy: LatePolicy) -> Report:
    """Mark the report with when its file was handed in and how late, and the fraction of its points it keeps."""
    submitted = datetime.fromtimestamp(path.stat().st_mtime).astimezone()
    days = late_days(submitted, due)
    report.submitted = submitted.isoformat(timespec="minutes")
    report.due = due.isoformat(timespec="minutes")
    report.late_days = days
    report.late_factor = policy.factor(days)
    report.late_policy = policy.describe(days) if days else ""
    return report
