"""The student edition of the book (`make book-student`): the same pages from notebooks/, with no solution on any
page. It is checked against the public book, which does show them: the check can fail."""

from __future__ import annotations

import pytest

from transformer_course.authoring.student_book import TITLE_SUFFIX, build, leaks, solution_lines
from transformer_course.grading import registry


@pytest.fixture(scope="module")
def student_build(course_root, tmp_path_factory):
    return build(course_root, tmp_path_factory.mktemp("student-book"))


def test_the_student_edition_builds_without_warnings_and_has_every_chapter(student_build, course_root):
    run, html = student_build
    assert run.returncode == 0, run.stderr[-3000:]
    assert "WARNING" not in run.stderr, run.stderr[-3000:]
    chapters = sorted(p.stem for p in (course_root / "notebooks").glob("*.ipynb"))
    assert chapters and all((html / "notebooks" / f"{name}.html").is_file() for name in chapters)
    assert not (html / "solutions").exists()
    assert TITLE_SUFFIX.strip() in (html / "book" / "preface.html").read_text()


def test_no_page_of_the_student_edition_shows_a_solution(student_build, book_build, course_root):
    lines = solution_lines(course_root)
    # every chapter with exercises has solution lines to look for, and the public book shows them
    assert {registry.chapter_notebook(ch) for ch in registry.CHAPTER_MODULES} <= set(lines)
    public = {page for page, _ in leaks(book_build[1], lines)}
    assert {f"solutions/{name.removesuffix('.ipynb')}.html" for name in lines} <= public
    assert leaks(student_build[1], lines) == []
