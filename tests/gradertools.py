"""Helpers for the grader tests: build submissions from a chapter's solution notebook."""

import functools
import importlib
import json
import pkgutil
from pathlib import Path
from typing import NamedTuple

import wrong_answers
from transformer_course.grading import registry
from transformer_course.grading.cells import exercise_id
from transformer_course.grading.host.limits import Cgroups


def header(ex_id: str) -> str:
    ex = registry.get(ex_id)
    return f"# EXERCISE {ex.id} ({ex.points} points): {ex.title}\n"


def scores(report) -> dict[str, float]:
    return {t.name.split(":")[0].replace("Exercise ", ""): t.score for t in report.tests}


def full_points(chapter: int) -> dict[str, int]:
    return {e.id: e.points for e in registry.chapter_exercises(chapter)}


def notebook_name(chapter: int) -> str:
    return registry.chapter_notebook(chapter)


def with_cells(solution: Path, tmp_path: Path, name: str, replacements=None, edit=None) -> Path:
    """The solution notebook with some exercise cells replaced (a correct header kept) and other edits."""
    nb = json.loads(solution.read_text())
    for cell in nb["cells"]:
        ex = exercise_id({**cell, "source": "".join(cell["source"])})
        if ex and replacements and ex in replacements:
            cell["source"] = header(ex) + replacements[ex]
    if edit:
        edit(nb)
    path = tmp_path / name
    path.write_text(json.dumps(nb))
    return path


def wrong_rounds() -> list[tuple[int, int, dict]]:
    """(chapter, round index, {exercise id: code}) for every chapter module in tests/wrong_answers/."""
    rounds = []
    for module in pkgutil.iter_modules(wrong_answers.__path__):
        if module.name.startswith("ch") and module.name[2:].isdigit():
            mod = importlib.import_module(f"wrong_answers.{module.name}")
            rounds += [(int(module.name[2:]), i, r) for i, r in enumerate(mod.WRONG_ROUNDS)]
    return rounds


def graded_chapters() -> list[int]:
    return sorted(registry.CHAPTER_MODULES)


class CgroupsHere(NamedTuple):
    pids: bool
    memory: bool


@functools.cache
def cgroups_here() -> CgroupsHere:
    """Which of the sandbox's cgroup v1 groups (``limits.Cgroups``) this machine lets the grader make (as root, on
    most Linux machines): a probe makes them, as a worker would, and removes them at once. Probed once a session,
    for the tests whose expectations depend on it (a thread or fork fails only where the pids group is)."""
    probe = Cgroups(256)
    try:
        return CgroupsHere(pids=probe.pids is not None, memory=probe.memory is not None)
    finally:
        probe.remove()
