"""No given cell answers an exercise (issue 56): the student notebook, the student edition of the book and the
classroom repository show every code cell that is not an exercise cell, and the course promises no solution on any
page. Two checks: a given function that passes an exercise's public cases (authoring/given_runs.py), and one whose
syntax, names left out, is the solution's or a helper's of it (authoring/given_leaks.py). The release refuses a
chapter that shows one.

The leaks these tests plant are made from the solution notebooks when they run, so that no solution is written here.
"""

import ast
import copy
import shutil

import nbformat
import pytest

from transformer_course.authoring import given_leaks
from transformer_course.authoring.given_runs import run_leaks
from transformer_course.authoring.release import GivenCellLeak, given_cell_leaks, make_student, release
from transformer_course.grading import registry
from transformer_course.grading.cells import exercise_id


@pytest.mark.parametrize("chapter", sorted(registry.CHAPTER_MODULES))
def test_no_given_cell_answers_an_exercise(course_root, chapter):
    leaks = given_cell_leaks(course_root, [chapter])
    assert not leaks, given_leaks.refusal(leaks)


# The checks find what they are for ---------------------------------------------------------------------------------


def _solution_function(solution, ex_id: str) -> ast.FunctionDef:
    """The exercise's function as the solution notebook defines it (markers and all: they are comments)."""
    cell = next(c for c in solution.cells if exercise_id(c) == ex_id)
    return next(n for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef))


class _Renamed(ast.NodeTransformer):
    """Every variable, argument and inner function renamed: what a copy that hides itself would do."""

    def __init__(self, keep: set[str]):
        self.keep = keep

    def _new(self, name: str) -> str:
        return name if name in self.keep else f"renamed_{name}"

    def visit_Name(self, node):
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._new(node.arg)
        return node

    def visit_FunctionDef(self, node):
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node


def _planted(course_root, chapter: int, after: str, source: str) -> dict:
    """{notebook: (solution, student)} of the chapter's exercise notebook, with a given cell of `source` after the
    exercise cell `after`."""
    name = registry.chapter_notebook(chapter)
    solution = nbformat.read(course_root / "solutions" / name, as_version=4)
    solution = copy.deepcopy(solution)
    place = next(i for i, c in enumerate(solution.cells) if exercise_id(c) == after)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "planted"
    solution.cells.insert(place + 1, cell)
    return {name: (solution, make_student(solution, chapter, name, course_root / "book" / "references.bib"))}


def _in_planted(leaks) -> list[tuple[str, str]]:
    """(function, exercise) of the leaks found in the planted cell."""
    return [(leak.name, leak.exercise) for leak in leaks if leak.cell == "planted"]


def _solution_notebook(course_root, chapter: int):
    return nbformat.read(course_root / "solutions" / registry.chapter_notebook(chapter), as_version=4)


@pytest.mark.parametrize("ex_id", ["3.5", "5.3"])
def test_a_copy_of_a_solution_in_a_given_cell_is_found_by_both_checks(course_root, ex_id):
    chapter = int(ex_id.split(".")[0])
    function = _solution_function(_solution_notebook(course_root, chapter), ex_id)
    function.name = "_helper"
    notebooks = _planted(course_root, chapter, ex_id, ast.unparse(function))
    assert _in_planted(given_leaks.ast_leaks(chapter, notebooks)) == [("_helper", ex_id)]
    assert _in_planted(run_leaks(chapter, notebooks)) == [("_helper", ex_id)]


def test_a_copy_with_every_name_changed_is_still_found(course_root):
    function = _solution_function(_solution_notebook(course_root, 3), "3.5")
    keep = {"math", "Counter", "ngrams", "len", "min", "sum", "zip", "range", "abs"}
    function = _Renamed(keep).visit(function)
    notebooks = _planted(course_root, 3, "3.5", ast.unparse(function))
    assert _in_planted(given_leaks.ast_leaks(3, notebooks)) == [("renamed_bleu", "3.5")]


def test_half_a_solution_is_found_its_helper(course_root):
    # 2.5's solution measures what a bias keeps (an inner function) and bisects on it: the measure alone is half of it
    function = _solution_function(_solution_notebook(course_root, 2), "2.5")
    helper = next(n for n in ast.walk(function) if isinstance(n, ast.FunctionDef) and n is not function)
    helper.args.args = [ast.arg(a) for a in ("x", "w_ih", "w_hh", "b_ih", "b_hh", "B", "T", "H")] + helper.args.args
    helper.name = "measured"
    found = given_leaks.ast_leaks(2, _planted(course_root, 2, "2.5", ast.unparse(helper)))
    assert _in_planted(found) == [("measured", "2.5")]
    assert "its helper" in next(leak.detail for leak in found if leak.cell == "planted")


def test_a_given_function_that_calls_the_exercise_is_not_an_answer(course_root):
    # a wrapper of the student's own function (cells after an exercise use it) shows nothing of the solution
    source = "def attend_twice(q, k, v, mask=None):\n    return scaled_dot_product_attention(q, k, v, mask)\n"
    notebooks = _planted(course_root, 5, "5.3", source)
    assert _in_planted(run_leaks(5, notebooks)) == []
    assert _in_planted(given_leaks.ast_leaks(5, notebooks)) == []


def test_the_release_refuses_a_given_cell_that_answers_an_exercise(course_root, tmp_path):
    function = _solution_function(_solution_notebook(course_root, 5), "5.3")
    function.name = "_helper"
    (solution, _) = _planted(course_root, 5, "5.3", ast.unparse(function))[registry.chapter_notebook(5)]
    (tmp_path / "solutions").mkdir()
    (tmp_path / "book").mkdir()
    shutil.copy(course_root / "book" / "references.bib", tmp_path / "book")
    nbformat.write(solution, tmp_path / "solutions" / registry.chapter_notebook(5))
    with pytest.raises(GivenCellLeak) as refused:
        release(tmp_path)
    message = str(refused.value)
    assert "chapter 5" in message and "'planted'" in message and "`_helper`" in message and "exercise 5.3" in message
    assert not (tmp_path / "notebooks").exists()  # nothing written
