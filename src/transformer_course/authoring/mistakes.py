"""The instructor's page of known mistakes: for every exercise, each plausible wrong answer the course knows
(the registry's ``Mistake``s, which the self-check also recognises for its hints) and the case that catches it.

    python -m transformer_course.authoring.mistakes              # write book/mistakes.md and book/mistakes/chNN.md
    python -m transformer_course.authoring.mistakes --chapter 12 # only chapter 12's page (a new chapter's)
    python -m transformer_course.authoring.mistakes --check      # exit 1 if a page is out of date

book/mistakes.md says what the pages are; each chapter's known mistakes are a page of their own,
book/mistakes/chNN.md, which the table of contents finds by a pattern: a new chapter adds a page, and no
existing one changes.

"Catches" means: on every one of the seeds tried, that case of the exercise fails the mistake (its output is
not the reference's, its measurement fails, or it raises). The grader draws a fresh seed per run, so a mistake
caught only by a lucky draw would lose its points on some runs only: a case that catches it on every seed is
one of the exercise's fixed edge cases, in the self-check and the grader alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..grading import registry
from ..repository import course_root

PAGE = Path("book") / "mistakes.md"
CHAPTER_PAGES = Path("book") / "mistakes"  # chNN.md, one per chapter with exercises
SEEDS = range(20)  # the public seed (0) and 19 others; tests/test_selfcheck.py asserts every mistake is caught
JUDGED_SEEDS = range(5)  # a judge trains or searches: slower
TRAINING_SEEDS = range(2)  # 8.6's judge trains a model per case


NOT_CAUGHT = "**no fixed case**"


def seeds_for(ex: registry.Exercise) -> range:
    if ex.judge is None:
        return SEEDS
    return TRAINING_SEEDS if ex.id == "8.6" else JUDGED_SEEDS


def _fails(ex: registry.Exercise, implementation, case: registry.Case) -> bool:
    try:
        return registry.verdict(ex, case, registry.run_case(ex, implementation, case)) is not None
    except Exception:  # noqa: BLE001 - an error is a failed case, for the grader too
        return True


def catching_cases(ex: registry.Exercise, implementation) -> list[int]:
    """Indices of the exercise's cases that fail ``implementation`` on every seed of seeds_for(ex)."""
    draws = [ex.cases(seed) for seed in seeds_for(ex)]
    return [i for i in range(len(draws[0])) if all(_fails(ex, implementation, cases[i]) for cases in draws)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")


def intro() -> str:
    """book/mistakes.md: what the chapters' pages of known mistakes hold and how they are checked."""
    lines = [
        "# Known mistakes, and the cases that catch them",
        "",
        "Every exercise knows the wrong answers that students most often write: the wrong axis, a missing",
        "transpose or scale, a mask applied the wrong way, an off-by-one at a boundary, a dtype not converted.",
        "Each one is in the exercise's module (`src/transformer_course/exercises/chNN.py`) as a `Mistake`,",
        "with the hint the self-check gives when a student's output matches it. The pages of this section, one",
        "per chapter, list them with the case that catches each: a case that fails the mistake on every seed tried (20 for an exercise",
        "compared with the reference, 5 for an experiment, 2 for exercise 8.6, which trains a model per",
        "case). The grader draws its hidden cases from a fresh seed on every run, so only such a fixed case",
        "guarantees that the mistake loses its points on every run; the self-check has the same case, drawn",
        "from the public seed. The case is named by its place among the exercise's cases and by its label",
        "in the self-check (the grader's label has the same kind, with its own sizes).",
        "",
        "`tests/test_selfcheck.py` fails if a mistake has no such case, or if a page is not what",
        "`make release` writes from the registry. The wrong answers written as students",
        "write them, in `tests/wrong_answers/`, are graded in `tests/test_grader.py` and tried on 20 seeds",
        "in `tests/test_wrong_answers.py`.",
        "",
    ]
    return "\n".join(lines)


def chapter_page(chapter: int) -> str:
    """book/mistakes/chNN.md: the chapter's exercises, each with its known mistakes and the case that catches each."""
    from . import manifest

    lines = [f"# Known mistakes: chapter {chapter}, {manifest.load().chapter(chapter).title}", ""]
    for ex in registry.chapter_exercises(chapter):
        lines += section(ex, {id(m): catching_cases(ex, m.implementation) for m in ex.mistakes})
    return "\n".join(lines)


def render(chapters: list[int] | None = None) -> dict[Path, str]:
    """The pages, by path from the course root: the introduction and each chapter's (all chapters by default)."""
    chosen = sorted(registry.CHAPTER_MODULES) if chapters is None else chapters
    pages = {PAGE: intro()} if chapters is None else {}
    pages.update({CHAPTER_PAGES / f"ch{c:02d}.md": chapter_page(c) for c in chosen})
    return pages


def section(ex: registry.Exercise, caught: dict[int, list[int]]) -> list[str]:
    """One exercise's table; caught: id(mistake) -> catching_cases(ex, mistake.implementation)."""
    public = ex.cases(registry.PUBLIC_SEED)
    lines = [f"## Exercise {ex.id}: {ex.title}", "", "| The mistake (the self-check's hint) | Caught by |", "|---|---|"]
    for mistake in ex.mistakes:
        found = caught[id(mistake)]
        where = f"case {found[0] + 1} of {len(public)}: {_cell(public[found[0]].label)}" if found else NOT_CAUGHT
        lines.append(f"| {_cell(' '.join(mistake.hint.split()))} | {where} |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is out of date")
    parser.add_argument("--chapter", type=int, action="append", help="only this chapter's page (repeatable)")
    args = parser.parse_args(argv)
    root = course_root()
    pages = render(args.chapter)
    if args.check:
        stale = [p for p, text in pages.items() if not (root / p).exists() or (root / p).read_text("utf-8") != text]
        if args.chapter is None:  # a page of a chapter that has no exercises any more
            stale += [
                p.relative_to(root)
                for p in sorted((root / CHAPTER_PAGES).glob("ch*.md"))
                if p.relative_to(root) not in pages
            ]
        for path in stale:
            print(f"{path} is out of date: run `make release`", file=sys.stderr)
        return 1 if stale else 0
    (root / CHAPTER_PAGES).mkdir(parents=True, exist_ok=True)
    for path, text in pages.items():
        (root / path).write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
