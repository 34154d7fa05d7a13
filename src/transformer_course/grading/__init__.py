"""Exercises, self-checks, the release tool and the grader.

``from transformer_course.grading import check`` is all a notebook needs.
"""

from .selfcheck import check

__all__ = ["check"]
