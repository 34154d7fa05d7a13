"""Which notebook of a Gradescope submission is graded, and the report of a submission that is not graded."""

from __future__ import annotations

import os
from pathlib import Path


class CannotGrade(Exception):
    """No grading happens: the message, for the student and the staff, says why."""


def choose_notebook(folder: Path, expected: str) -> tuple[Path, list[str]]:
    """The notebook of a submission to grade, and notes for the report; CannotGrade when there is none to choose.

    The one named ``expected`` (anywhere in the folder); else the only notebook submitted, whatever its name.
    Hidden files, checkpoints, macOS's resource folders and symbolic links are never candidates."""
    if not folder.is_dir():
        raise CannotGrade(f"nothing was submitted (no submission folder): submit {expected}")
    notebooks: list[Path] = []
    others: list[str] = []
    for here, dirs, files in os.walk(folder):  # followlinks=False: a link to a folder is not entered
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__MACOSX")
        for name in sorted(files):
            path = Path(here) / name
            if name.startswith("."):
                continue
            if name.endswith(".ipynb") and path.is_file() and not path.is_symlink():
                notebooks.append(path)
            else:
                others.append(str(path.relative_to(folder)))

    def shown(paths: list[Path]) -> str:
        return ", ".join(str(p.relative_to(folder)) for p in paths[:10]) + (" ..." if len(paths) > 10 else "")

    exact = [p for p in notebooks if p.name == expected]
    if len(exact) > 1:
        raise CannotGrade(f"{len(exact)} notebooks are named {expected} ({shown(exact)}): submit one of them only")
    if exact:
        rest = [p for p in notebooks if p != exact[0]]
        notes = [f"graded {shown(exact)}; not graded: {shown(rest)}"] if rest else []
        return exact[0], notes
    if len(notebooks) == 1:
        return notebooks[0], [
            f"graded {shown(notebooks)}, the only notebook submitted (the chapter's notebook is {expected})"
        ]
    if not notebooks:
        found = f" (the submission holds: {', '.join(others[:10])})" if others else " (the submission is empty)"
        raise CannotGrade(f"no notebook (.ipynb) was submitted{found}: submit {expected}")
    raise CannotGrade(
        f"{len(notebooks)} notebooks were submitted and none is named {expected} ({shown(notebooks)}): "
        f"the autograder cannot tell which to grade. Submit {expected} alone, or name the one to grade {expected}"
    )


def failure_results(kit: dict, why: str) -> dict:
    """Gradescope's results for a submission that was not graded: every exercise at 0, and the reason."""
    return {
        "score": 0,
        "max_score": sum(e["points"] for e in kit.get("exercises", [])),
        "output": f"Not graded: {why}",
        "tests": [
            {
                "name": f"Exercise {e['id']}: {e['title']}",
                "number": e["id"],
                "score": 0,
                "max_score": e["points"],
                "status": "failed",
                "output": f"not graded: {why}",
            }
            for e in kit.get("exercises", [])
        ],
    }
