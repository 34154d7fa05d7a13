"""Exercises, self-checks and the grader (the release tool is in ``transformer_course.authoring``).

``from transformer_course.grading import check`` is all a notebook needs.
"""

__all__ = ["check"]


def __getattr__(name: str):
    # Imported on first use: the grader's sandboxed worker needs none of it, and importing it pulls in torch, about 3 s of every submission's grading.
    if name == "check":
        from .selfcheck import check

        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
