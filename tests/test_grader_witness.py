"""Issue 55, item 2: the verdict on forbidden built-ins does not rest on the student's process alone.

The witness (``grading/host/witness.py``) runs each exercise that forbids built-ins again, in a fresh worker, under the
watch from the cell's first line, with none of the student's other cells' statements. To test it, a cell is let past
the closed world as a route nobody has found yet would be: it switches the first run's watch off, and a later cell
calls the forbidden built-in through a helper. The first run alone is fooled; with the witness, the exercise gets no
points. Honest work keeps every point, and the witness runs none of another cell's code.
"""

import json

import pytest

from gradertools import full_points, notebook_name, scores, with_cells
from transformer_course.grading import registry
from transformer_course.grading.cells import exercise_id
from transformer_course.grading.host import grader
from transformer_course.grading.host.grader import grade_notebook
from transformer_course.grading.host.witness import inert_definitions

# A route round the closed world, as the test lets it through: the first run's watch switched off in 5.2's cell, and
# a helper that calls PyTorch's attention, which 5.3 forbids and 5.2 does not.
_BREACH = (
    "\n# breach\n"
    "import sys\n"
    "sys.modules['__main__']._Watch.function = lambda self, func: None\n"
    "sys.modules['__main__']._Watch.op = lambda self, func: None\n"
    "def fast_attention(q, k, v, mask=None):\n"
    "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
)
_CHEAT = (
    "# EXERCISE 5.3 (3 points): scaled dot-product attention with a mask\n"
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    scores = attention_scores(q, k)\n"
    "    if mask is not None:\n"
    "        scores = scores.masked_fill(~mask, float('-inf'))\n"
    "    return fast_attention(q, k, v, mask), torch.softmax(scores, dim=-1)\n"
)


def _solution_cell(course_root, ex_id: str) -> str:
    for cell in json.loads((course_root / "solutions" / notebook_name(5)).read_text())["cells"]:
        source = "".join(cell["source"])
        if exercise_id({**cell, "source": source}) == ex_id:
            return source
    raise AssertionError(ex_id)


@pytest.fixture
def breach_let_through(monkeypatch):
    """The static check lets the marked cell through, as an unknown route round the closed world would."""
    real = grader.static_problem

    def static_problem(source, *args, **kwargs):
        return None if "# breach" in source else real(source, *args, **kwargs)

    monkeypatch.setattr(grader, "static_problem", static_problem)


def _breached_notebook(course_root, tmp_path):
    cells = {"5.2": _solution_cell(course_root, "5.2") + _BREACH, "5.3": _CHEAT}
    return with_cells(course_root / "solutions" / notebook_name(5), tmp_path, "breach.ipynb", cells)


def test_a_watch_switched_off_in_another_cell_is_caught_by_the_witness(course_root, tmp_path, breach_let_through):
    report = grade_notebook(_breached_notebook(course_root, tmp_path), course_root, isolation="process")
    got = scores(report)
    assert got == {**full_points(5), "5.3": 0}, report.markdown()
    output = {t.name[9:12]: t.output for t in report.tests}["5.3"]
    assert "a second run of your cell alone" in output and "scaled_dot_product_attention" in output
    assert report.problems == []


def test_without_the_witness_the_first_run_alone_is_fooled(course_root, tmp_path, breach_let_through, monkeypatch):
    """What the witness adds: the same submission, the witness off, earns 5.3's points (so the test above tests it)."""
    monkeypatch.setattr(grader, "witness", lambda *args: ({}, None))
    report = grade_notebook(_breached_notebook(course_root, tmp_path), course_root, isolation="process")
    assert scores(report) == full_points(5), report.markdown()


def test_the_witness_keeps_every_point_of_honest_work(course_root):
    """The solutions of every chapter whose exercises forbid built-ins: full marks, and the witness said nothing."""
    chapters = sorted(
        {ex.chapter for ch in registry.CHAPTER_MODULES for ex in registry.chapter_exercises(ch) if ex.forbidden}
    )
    assert len(chapters) >= 5
    for chapter in chapters:
        if chapter == 8:
            continue  # 8.6 trains a model twice over: graded with the witness in tests/test_grader.py
        report = grade_notebook(course_root / "solutions" / notebook_name(chapter), course_root, isolation="process")
        assert scores(report) == full_points(chapter), report.markdown()
        assert report.problems == [] and "second run" not in report.markdown()


def test_inert_definitions_run_none_of_the_cells_code():
    """What the witness takes of the student's other cells: functions and classes whose definition runs nothing of
    theirs; never a statement, a decorator of their own, a computed default or a class body that computes."""
    cell = (
        "import math\n"
        "SCALE = 2.0\n"
        "switch_off()\n"
        "def helper(x, n=3):\n    return x * n\n"
        "@my_decorator\ndef decorated(x):\n    return x\n"
        "def default(x, n=switch_off()):\n    return x\n"
        "def annotated(x: switch_off()):\n    return x\n"
        "class Layer(nn.Module):\n    '''doc'''\n    size = 4\n    @staticmethod\n    def f(x):\n        return x\n"
        "class Busy:\n    switch_off()\n"
        "def decoder_mask(lengths, t):\n    return None\n"
        "w = switch_off()\n"
    )
    kept = inert_definitions(cell, {"decoder_mask"})
    assert "switch_off" not in kept
    for name in ("import math", "SCALE = 2.0", "def helper", "class Layer", "@staticmethod"):
        assert name in kept, kept
    assert "def decorated" not in kept and "decoder_mask" not in kept and "Busy" not in kept
    assert inert_definitions("def broken(:\n", set()) == "" and inert_definitions(None, set()) == ""
