"""Issue 55, item 4: an honest answer in an unusual form gets from the grader what the notebook's self-check gives it.

A student's function may return what the task asks for in another honest spelling: a list where a tuple is, a
``Counter`` where a dict is, a 0-d tensor where a number is, a tensor that is a non-contiguous view or an
``nn.Parameter``. The self-check compares in the student's kernel; the grader compares what crossed from its sandbox
through the codec. Both must say the same.

The forms are made mechanically, for every exercise: each form is one clause of a function ``unusual_form`` that
rewrites one kind of value (a tuple, a dict, a float tensor, ...) wherever it occurs in a result. Here the clauses run
on the reference's results for the public cases, and the self-check (its ``evaluate``, and ``check`` itself) says
whether it accepts each form that changes a result. In the grader they run in an exercise cell that renames the
solution and wraps it, in what graded cells may use::

    def rnn_layer_solution(x, h0, ...):           # the solution notebook's cell, renamed
        ...
    def rnn_layer(*args, **kwargs):
        return unusual_form(rnn_layer_solution(*args, **kwargs))

Forms that rewrite different kinds of value are graded together (``KINDS``: one notebook per chapter and kind, each
exercise with those of the kind's forms that change its result and that the self-check accepts), and a form the
self-check refuses is graded alone, where it must lose the points too.
"""

import functools
import json
import re

import pytest
import torch

from gradertools import full_points, graded_chapters, notebook_name, scores, with_cells
from transformer_course.grading import check, registry
from transformer_course.grading.cells import exercise_id
from transformer_course.grading.host.grader import grade_notebook
from transformer_course.grading.kernel.attempt import evaluate
from transformer_course.grading.registry import PUBLIC_SEED, run_case

TENSOR = "isinstance(value, torch.Tensor)"
INT = "isinstance(value, int) and not isinstance(value, bool)"
EACH = "{k: unusual_form(v) for k, v in value.items()}"

# A form: (which values it rewrites, how), one clause of `unusual_form`, in what graded cells may use.
FORMS = {
    "a non-contiguous view": (
        TENSOR,
        "return value.transpose(-1, -2).contiguous().transpose(-1, -2) if value.dim() >= 2 and "
        "min(value.shape[-2:]) > 1 else torch.stack([value, value], -1)[..., 0]",  # transposed, else every other
    ),
    "an nn.Parameter": (f"{TENSOR} and value.is_floating_point()", "return torch.nn.Parameter(value.detach().clone())"),
    "a list for a tuple": ("isinstance(value, tuple)", "return [unusual_form(v) for v in value]"),
    "a named tuple": (
        "isinstance(value, tuple)",
        "return collections.namedtuple('Answer', ['part' + str(i) for i in range(len(value))])"
        "(*[unusual_form(v) for v in value])",
    ),
    "a tuple for a list": ("isinstance(value, list)", "return tuple(unusual_form(v) for v in value)"),
    "a Counter": ("isinstance(value, dict)", f"return collections.Counter({EACH})"),
    "an OrderedDict": ("isinstance(value, dict)", f"return collections.OrderedDict({EACH})"),
    "a defaultdict": ("isinstance(value, dict)", f"return collections.defaultdict(int, {EACH})"),
    "a 0-d tensor for a float": ("isinstance(value, float)", "return torch.tensor(value, dtype=torch.float64)"),
    "a float for an int": (INT, "return float(value)"),
    "a 0-d tensor for an int": (INT, "return torch.tensor(value)"),
    "a float for a 0-d tensor": (f"{TENSOR} and value.dim() == 0 and value.is_floating_point()", "return value.item()"),
}
# Forms graded together: each rewrites its own kind of value, so that in one function they never meet.
KINDS = (
    ("a non-contiguous view", "a list for a tuple", "a Counter", "a 0-d tensor for a float", "a float for an int"),
    ("an nn.Parameter", "a named tuple", "an OrderedDict", "a 0-d tensor for an int", "a tuple for a list"),
    ("a defaultdict", "a float for a 0-d tensor"),
)
assert sorted(f for kind in KINDS for f in kind) == sorted(FORMS)

# Refused by both, as the task's words say: a Python float has no dtype, where a task asks for a 0-d tensor (8.4, 9.5, 10.2).
REFUSED_BY_DESIGN = {"a float for a 0-d tensor"}
# Known disagreements between the self-check and the grader: none (8.6's judge once asked for an exact dict, which the
# grader no longer needs; it takes a model's state_dict() as it is). A pair here would be allowed to differ.
KNOWN: set[tuple[str, str]] = set()


@pytest.fixture(autouse=True)
def _one_thread():
    """One thread, as the grader's: two spin-waiting ones on a busy machine made 8.6's training three times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def form_source(forms) -> str:
    """The cell text of ``unusual_form`` with these forms' clauses; containers no form rewrites are walked."""
    clauses = "".join(f"    if {FORMS[f][0]}:\n        {FORMS[f][1]}\n" for f in forms)
    walk = (
        "    if isinstance(value, tuple):\n        return tuple(unusual_form(v) for v in value)\n"
        "    if isinstance(value, list):\n        return [unusual_form(v) for v in value]\n"
        f"    if isinstance(value, dict):\n        return {EACH}\n"
    )
    return f"import collections\nimport torch\n\n\ndef unusual_form(value):\n{clauses}{walk}    return value\n"


@functools.cache
def form_function(forms: tuple[str, ...]):
    scope: dict = {}
    exec(form_source(forms), scope)  # the cell's own text, so that both sides rewrite alike
    return scope["unusual_form"]


@functools.cache
def reference_results(exercise: str) -> tuple[list, list]:
    """(the public cases, what the reference returns on each)."""
    ex = registry.get(exercise)
    cases = ex.cases(PUBLIC_SEED)
    return cases, [run_case(ex, ex.reference, case) for case in cases]


def alike(a, b) -> bool:
    """Whether two results are the same form: types, and tensors' strides, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.stride() == b.stride()
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(alike(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(alike(a[k], b[k]) for k in a)
    return True


def replay(exercise: str, forms: tuple[str, ...]):
    """An answer that returns the reference's results on the public cases, in these forms, one per call: what the
    self-check's `evaluate` calls in place of a wrapped solution, so that a form costs no second training (8.6)."""
    ex, form = registry.get(exercise), form_function(forms)
    answers = iter([form(r) for r in reference_results(exercise)[1]])
    if ex.kind == "module":  # built and loaded as the reference is; its forward replays
        return type(ex.name, (ex.reference,), {"forward": lambda self, *args, **kwargs: next(answers)})
    return lambda *args, **kwargs: next(answers)


@functools.cache
def self_check(exercise: str, forms: tuple[str, ...]) -> bool | None:
    """Whether the self-check (its `evaluate`) passes the reference's results in these forms; None if the forms
    change no result."""
    results = reference_results(exercise)[1]
    if all(alike(r, form_function(forms)(r)) for r in results):
        return None
    return evaluate(registry.get(exercise), replay(exercise, forms), mistake_hint=False)[0] == "passed"


def exercises(chapter: int) -> list[str]:
    return [e.id for e in registry.chapter_exercises(chapter)]


def test_every_exercise_has_forms_and_the_self_check_refuses_only_what_the_task_rules_out():
    applied, refused = {}, set()
    for chapter in graded_chapters():
        for exercise in exercises(chapter):
            verdicts = {f: self_check(exercise, (f,)) for f in FORMS}
            applied[exercise] = [f for f, v in verdicts.items() if v is not None]
            refused |= {(exercise, f) for f, v in verdicts.items() if v is False}
    assert all(applied.values()), [e for e, forms in applied.items() if not forms]
    by_design = {(e, f) for e, forms in applied.items() for f in forms if f in REFUSED_BY_DESIGN}
    assert refused - KNOWN == by_design
    assert {e for e, _ in by_design} == {"8.4", "9.5", "10.2"}  # the tasks that ask for a 0-d tensor


@pytest.mark.parametrize("chapter", graded_chapters())
def test_the_notebooks_check_passes_each_exercise_in_its_forms(chapter, capsys):
    """What a student sees: `check` itself says ✅ to the forms of the first kind that changes the exercise's result."""
    for exercise in exercises(chapter):
        accepted = [f for f in FORMS if self_check(exercise, (f,))]
        forms = next(tuple(f for f in kind if f in accepted) for kind in KINDS if set(kind) & set(accepted))
        check(exercise, replay(exercise, forms))
        assert capsys.readouterr().out.startswith(f"✅ Exercise {exercise} "), (exercise, forms)


def rounds(chapter: int) -> list[dict[str, tuple[tuple[str, ...], bool]]]:
    """The chapter's notebooks to grade: {exercise: (its forms, whether the self-check accepts them)} each. One per
    kind, with the kind's forms that the self-check accepts; a form it refuses alone, in the first notebook where its
    exercise has none (each notebook costs a grading: chapter 8's trains a model)."""
    plans: list[dict] = []
    for kind in KINDS:
        plan = {}
        for exercise in exercises(chapter):
            forms = tuple(f for f in kind if self_check(exercise, (f,)))
            if forms:
                assert self_check(exercise, forms), f"{exercise}: the self-check refuses {forms} together"
                plan[exercise] = (forms, True)
        plans.append(plan)
    for exercise in exercises(chapter):
        refused = [f for f in FORMS if self_check(exercise, (f,)) is False]
        known = [f for f in refused if (exercise, f) in KNOWN]  # of the known disagreements, one shows it
        for form in [f for f in refused if f not in known] + known[:1]:
            plan = next((p for p in plans if exercise not in p), None)
            if plan is None:
                plans.append(plan := {})
            plan[exercise] = ((form,), False)
    return [plan for plan in plans if plan]


def chapter_cells(chapter: int, root) -> dict[str, str]:
    """Each exercise cell of the solution notebook, without its header line."""
    cells = {}
    for cell in json.loads((root / "solutions" / notebook_name(chapter)).read_text())["cells"]:
        source = "".join(cell["source"])
        exercise = exercise_id({**cell, "source": source})
        if exercise:
            cells[exercise] = source.split("\n", 1)[1]
    return cells


def wrapped(exercise: str, solution: str, names: list[str], forms: tuple[str, ...]) -> str:
    """The solution cell with every exercise name of the chapter renamed NAME_solution, then the exercise's name bound
    to the solution in these forms. It first binds the earlier exercises' names back to their plain solutions, for
    the given code that uses them (chapter 8's model builds its layers from EncoderLayer and DecoderLayer): a later
    exercise is graded on its own form only."""
    ex = registry.get(exercise)
    earlier = "".join(f"{n} = {n}_solution\n" for n in names[: names.index(ex.name)])
    body = re.sub(rf"(?<![.\w])({'|'.join(map(re.escape, names))})\b", r"\1_solution", solution).rstrip()
    body = f"{earlier}{body}"
    if not forms:
        return f"{body}\n\n{ex.name} = {ex.name}_solution\n"
    if ex.kind == "module":
        wrapper = (
            f"class {ex.name}({ex.name}_solution):\n    def forward(self, *args, **kwargs):\n"
            "        return unusual_form(super().forward(*args, **kwargs))\n"
        )
    else:
        wrapper = f"def {ex.name}(*args, **kwargs):\n    return unusual_form({ex.name}_solution(*args, **kwargs))\n"
    return f"{body}\n\n\n{form_source(forms)}\n\n{wrapper}"


@pytest.mark.parametrize("chapter", graded_chapters())
def test_the_grader_gives_each_form_what_the_self_check_gives_it(chapter, course_root, tmp_path):
    names = [registry.get(e).name for e in exercises(chapter)]
    solutions = chapter_cells(chapter, course_root)
    points, disagreements = full_points(chapter), []
    for index, plan in enumerate(rounds(chapter)):
        cells = {e: wrapped(e, solutions[e], names, plan.get(e, ((), True))[0]) for e in exercises(chapter)}
        path = with_cells(course_root / "solutions" / notebook_name(chapter), tmp_path, f"forms{index}.ipynb", cells)
        report = grade_notebook(path, course_root, isolation="process")
        got, outputs = scores(report), {t.name.split(":")[0][9:]: t.output for t in report.tests}
        for e in exercises(chapter):
            forms, accepted = plan.get(e, ((), True))
            # a cell outside what graded cells may use is refused before it runs (the self-check refuses it too):
            # the wrappers are plain Python, so that what is graded is the form
            if got[e] != (points[e] if accepted else 0) or outputs[e].startswith("refused:"):
                disagreements.append((e, forms, accepted, outputs[e]))
    unknown = [
        f"{e} in {', '.join(forms) or 'its solution'}: the self-check {'accepts' if accepted else 'refuses'} it; the "
        f"grader says:\n{output}"
        for e, forms, accepted, output in disagreements
        if not forms or not {(e, f) for f in forms} <= KNOWN
    ]
    assert not unknown, "\n".join(unknown)
