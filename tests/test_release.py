"""The release tool and the sync test: notebooks/ is exactly what the tool makes from solutions/."""

import json

import nbformat
import pytest

from transformer_course.grading.cells import MarkerError, blank_solution, exercise_id
from transformer_course.grading.release import make_student, release, render


def test_notebooks_are_in_sync_with_solutions(course_root):
    stale = release(course_root, check_only=True)
    assert stale == [], f"run `make release`: {stale} differ from what the release tool makes"


def test_every_solution_has_a_student_notebook(course_root):
    solutions = sorted(p.name for p in (course_root / "solutions").glob("[0-9]*.ipynb"))
    assert solutions and solutions == sorted(p.name for p in (course_root / "notebooks").glob("*.ipynb"))


def test_student_notebook_has_no_solutions_or_outputs(course_root):
    for path in (course_root / "solutions").glob("[0-9]*.ipynb"):
        student = json.loads(render(path))
        text = json.dumps(student)
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        for cell in student["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None
            if "exercise" in cell["metadata"]:
                assert "raises-exception" in cell["metadata"]["tags"]
                assert "NotImplementedError" in "".join(cell["source"])


def test_blank_solution_keeps_indentation_and_given_code():
    source = "# EXERCISE 5.9 (1 points): x\ndef f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    assert blank_solution(source, "5.9") == (
        '# EXERCISE 5.9 (1 points): x\ndef f(x):\n    y = 1\n'
        '    raise NotImplementedError("Exercise 5.9: replace this line with your code")\n'
    )


@pytest.mark.parametrize(
    "source, message",
    [
        ("x = 1", "no '### BEGIN SOLUTION'"),
        ("### BEGIN SOLUTION\nx = 1", "never closed"),
        ("x = 1\n### END SOLUTION", "without BEGIN"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "inside another"),
    ],
)
def test_malformed_markers_are_errors(source, message):
    with pytest.raises(MarkerError, match=message):
        blank_solution(source, "5.9")


def test_exercise_cells_are_found_by_metadata_or_header():
    assert exercise_id({"cell_type": "code", "metadata": {"exercise": {"id": "5.3"}}, "source": "x"}) == "5.3"
    assert exercise_id({"cell_type": "code", "metadata": {}, "source": "\n# Exercise 5.2 (2 points): y\nx"}) == "5.2"
    assert exercise_id({"cell_type": "markdown", "metadata": {}, "source": "# EXERCISE 5.2"}) is None
    assert exercise_id({"cell_type": "code", "metadata": {}, "source": "x = 1  # EXERCISE 5.2"}) is None


def _solution(*cells):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T"), *cells])


def test_a_registered_exercise_without_a_cell_is_an_error():
    with pytest.raises(ValueError, match="no exercise cell for registered exercise"):
        make_student(_solution(), 5, "05_x.ipynb")


def test_points_must_match_the_registry():
    cell = nbformat.v4.new_code_cell(
        "# EXERCISE 5.1 (9 points): x\n### BEGIN SOLUTION\n### END SOLUTION", metadata={"exercise": {"id": "5.1", "points": 9}}
    )
    with pytest.raises(ValueError, match="says 9 points, the registry 2"):
        make_student(_solution(cell), 5, "05_x.ipynb")
