"""What the notebook gives an exercise cell in the student's kernel, read as the grader reads it: the chapter's
imports (the course package's among them, which a graded cell may not use) and the names and attributes that the
given cells define, from the pristine student notebook (``given.given_code``). The self-check judges a cell against
these (``static_check.static_problem``), so that it refuses what the grader refuses.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .. import registry
from ..given import definitions, given_code
from ..static_check import DEFAULT_IMPORTS

__all__ = ["given_imports", "given_sources"]


@functools.cache
def _pristine_given(chapter: int) -> dict | None:
    """given_code of the pristine student notebook: ``.course/notebooks/`` in a classroom repository (what its grader
    reads), else ``notebooks/`` of the course folder (``grade``'s default root); None where the package is installed
    without the course's folder, or the notebook cannot be read."""
    try:
        name = registry.chapter_notebook(chapter)
        for parent in Path(__file__).resolve().parents:
            if (parent / "pyproject.toml").is_file():  # the folder the package came with: the course's or a copy
                for folder in (parent / ".course" / "notebooks", parent / "notebooks"):
                    if (folder / name).is_file():
                        return given_code(json.loads((folder / name).read_text(encoding="utf-8")))
                break
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable: the notebooks' usual imports
        pass
    return None


def given_imports(chapter: int, course: bool = False) -> str:
    """The imports of the chapter's given cells (with course=True, also those of the course package). The cell then
    sees the names the grader says it sees (chapter 9's given ``mock`` is a module, outside the closed world);
    DEFAULT_IMPORTS where the pristine notebook cannot be read."""
    given = _pristine_given(chapter)
    if given is None:
        return DEFAULT_IMPORTS
    return given["__imports__"] + ("\n" + given.get("__course_imports__", "") if course else "")


def given_sources(chapter: int) -> list[str]:
    """The definitions the chapter's given cells make, as source: what a graded cell may use as the notebook's."""
    given = _pristine_given(chapter)
    if given is None:
        return [DEFAULT_IMPORTS]
    return definitions(given)
