"""The grading machinery: the exercise registry, self-checks and the grader, which runs submissions in a sandbox and
compares their outputs (the exercises themselves are in ``transformer_course.exercises``, the release tool in
``transformer_course.authoring``).

``from transformer_course.grading import check`` is all a notebook needs.
"""

__all__ = ["check"]


def __getattr__(name: str):
    # Imported on first use: the grader's sandboxed worker needs none of it, and importing it pulls in torch, about 3 s of every submission's grading.
    if name == "check":
        from .selfcheck import check

        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
