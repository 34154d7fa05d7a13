"""The release tool and the sync test: notebooks/ is exactly what the tool makes from solutions/."""

import json

import nbformat
import pytest

from transformer_course.authoring.release import make_student, release, render
from transformer_course.grading.cells import MarkerError, blank_solution, exercise_id

# The characters a line of a code cell holds in the book at 1280 px (measured by test_browser): a longer line wraps
# and its rest starts at column 0, mid-expression.
CODE_COLUMN = 100


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_every_notebook_is_a_valid_notebook(course_root, folder):
    # nbformat 4.5's schema (cell ids of letters, digits, '-' and '_'): Jupyter refuses to open or save one that fails
    # it, and `jupyter nbconvert --execute` stops on it
    paths = sorted((course_root / folder).glob("*.ipynb"))
    assert paths
    for path in paths:
        nbformat.validate(nbformat.read(path, as_version=4))


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
        make_student(_solution(), 5, "05_self_attention.ipynb")


def test_points_must_match_the_registry():
    cell = nbformat.v4.new_code_cell(
        "# EXERCISE 5.1 (9 points): x\n### BEGIN SOLUTION\n### END SOLUTION",
        metadata={"exercise": {"id": "5.1", "points": 9}},
    )
    with pytest.raises(ValueError, match="says 9 points, the registry 2"):
        make_student(_solution(cell), 5, "05_self_attention.ipynb")


def _top_level_names(source: str) -> set[str]:
    import ast

    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_student_exercise_cells_define_what_the_solutions_define(course_root):
    # Later cells use what an exercise cell defined: with the solution blanked, the stub and the self-check after it
    # (`f = check("5.1", f)`) must still define every top-level name, or a later cell fails in the student's notebook.
    # tests/schedule.py relies on this to run a student notebook only through its last self-check.
    for path in sorted((course_root / "solutions").glob("[0-9]*.ipynb")):
        solution = json.loads(path.read_text())["cells"]
        student = json.loads((course_root / "notebooks" / path.name).read_text())["cells"]
        ids = lambda cells: {exercise_id({**c, "source": "".join(c["source"])}): i for i, c in enumerate(cells)}
        in_student = ids(student)
        for ex, i in ids(solution).items():
            if ex is None:
                continue
            j = in_student[ex]
            after = next(c for c in student[j + 1 :] if c["cell_type"] == "code")
            defined = _top_level_names("".join(student[j]["source"])) | _top_level_names("".join(after["source"]))
            missing = _top_level_names("".join(solution[i]["source"])) - defined
            assert not missing, f"{path.name}, exercise {ex}: the student's version never defines {missing}"


def test_citation_roles_become_author_year_text(course_root):
    cell = nbformat.v4.new_markdown_cell(
        "As {cite:t}`vaswani2017attention` show, attention suffices {cite:p}`bahdanau2015neural,hochreiter1997long`."
    )
    student = make_student(
        _solution(cell, *_exercise_cells(5)), 5, "05_self_attention.ipynb", course_root / "book" / "references.bib"
    )
    assert student.cells[2].source == (
        "As Vaswani et al. (2017) show, attention suffices (Bahdanau et al., 2015; Hochreiter and Schmidhuber, 1997)."
    )


def test_an_unknown_citation_key_is_an_error(course_root):
    cell = nbformat.v4.new_markdown_cell("see {cite:p}`nobody2099`")
    with pytest.raises(ValueError, match="nobody2099 not in the bibliography"):
        make_student(
            _solution(cell, *_exercise_cells(5)), 5, "05_self_attention.ipynb", course_root / "book" / "references.bib"
        )


def test_no_student_notebook_shows_a_raw_role(course_root):
    for path in sorted((course_root / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                assert "{cite:" not in "".join(cell["source"]), path.name


def _exercise_cells(chapter):
    from transformer_course.grading import registry

    return [
        nbformat.v4.new_code_cell(
            f"# EXERCISE {e.id} ({e.points} points): x\n### BEGIN SOLUTION\n### END SOLUTION",
            metadata={"exercise": {"id": e.id, "points": e.points}},
        )
        for e in registry.chapter_exercises(chapter)
    ]


def test_a_notebook_without_exercises_says_where_they_are():
    # A chapter's second notebook (e.g. 08_transformer_vs_gru.ipynb) only reads measurements: its student version
    # needs no registered exercise and tells the student which notebook holds the chapter's exercises.
    student = make_student(_solution(nbformat.v4.new_code_cell("x = 1")), 5, "05_reading.ipynb")
    assert "no exercises" in student.cells[1].source and "05_self_attention.ipynb" in student.cells[1].source
    assert "Fill in the cells" not in student.cells[1].source


def test_an_exercise_cell_outside_the_chapters_exercise_notebook_is_an_error():
    with pytest.raises(ValueError, match="in a notebook without exercises"):
        make_student(_solution(*_exercise_cells(5)), 5, "05_reading.ipynb")


def test_every_chapter_keeps_its_exercises_in_one_notebook_that_exists(course_root):
    from transformer_course.grading import registry

    for chapter in registry.CHAPTER_MODULES:
        name = registry.chapter_notebook(chapter)
        assert (course_root / "solutions" / name).exists(), f"chapter {chapter}'s exercises: no solutions/{name}"
        others = sorted(p.name for p in (course_root / "solutions").glob(f"{chapter:02d}_*.ipynb") if p.name != name)
        for other in others:
            cells = json.loads((course_root / "solutions" / other).read_text())["cells"]
            found = [exercise_id({**c, "source": "".join(c["source"])}) for c in cells]
            assert not any(found), f"{other} holds exercise cells; chapter {chapter}'s belong in {name}"


def test_every_line_of_code_fits_the_books_column(course_root):
    long = []
    for path in sorted((course_root / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                long += [f"{path.name} {cell.get('id')}: {line[:60]!r}" for line in lines if len(line) > CODE_COLUMN]
    assert not long, f"{len(long)} code lines longer than {CODE_COLUMN} characters: " + "; ".join(long[:10])


def test_execute_cells_runs_the_cells_named_and_stores_only_theirs(tmp_path):
    from transformer_course.authoring.execute import execute_cells

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("a = 20", id="setup"),
        nbformat.v4.new_code_cell("print(a + 1)", id="target"),
        nbformat.v4.new_code_cell("print('untouched')", id="other"),
    ]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="as stored\n")]
    nb.cells[2].execution_count = 7
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    execute_cells(path, ["target"], ["setup"])
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].outputs == [] and cells[2].outputs[0]["text"] == "as stored\n"
    assert cells[1].outputs[0]["text"] == "21\n" and cells[1].execution_count is not None
    with pytest.raises(ValueError, match="no cell with the id 'nope'"):
        execute_cells(path, ["nope"], [])
