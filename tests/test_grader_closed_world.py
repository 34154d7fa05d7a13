"""Issue 32, part 1: the ban on built-ins holds by design, not by a list of names.

The watch that records forbidden built-ins runs in the process that runs the student's code, so a cell that
could reach it (or the answer channel, or a second thread, where PyTorch's modes are not entered) could earn
points it did not. Three layers, each tested here:

1. the closed world (``grading/closed_world.py``): before a cell runs, its syntax tree may reach no module outside
   an allow-list, no dunder or private attribute, no frame, no ``exec``; every route the issue found is one case
   below, and every honest cell of the course (solutions, starters, wrong answers) passes;
2. the sandbox's control groups: once the worker is ready, no thread and no process can start, and the whole
   sandbox (its processes and its memory file systems) is under one memory limit;
3. the watch itself matches a forbidden built-in's family (``_scaled_dot_product_attention_math``).
"""

import ast
import json
from pathlib import Path

import pytest
import torch

from gradertools import cgroups_here, full_points, notebook_name, scores, with_cells, wrong_rounds
from transformer_course.grading import registry
from transformer_course.grading.cells import exercise_id
from transformer_course.grading.closed_world import closed_world_problem, module_aliases
from transformer_course.grading.given import definitions, given_code
from transformer_course.grading.host import isolation, limits, sandbox
from transformer_course.grading.host.grader import grade_notebook
from transformer_course.grading.static_check import clean_source, notebook_definitions, static_problem

needs_bwrap = pytest.mark.skipif(
    not isolation.bwrap_available(), reason="bubblewrap is not available here: install it with `make sandbox` (as root)"
)
needs_pids = pytest.mark.skipif(not cgroups_here().pids, reason="no cgroup v1 pids group can be made here (needs root)")
needs_memory = pytest.mark.skipif(
    not cgroups_here().memory, reason="no cgroup v1 memory group can be made here (needs root)"
)


def _imports(chapter: int, root: Path) -> str:
    """The chapter's imports as the grader reads them: the given cells', and the course package's."""
    given = given_code(json.loads((root / "notebooks" / registry.chapter_notebook(chapter)).read_text()))
    return given["__imports__"] + "\n" + given["__course_imports__"]


def _given_sources(chapter: int, root: Path) -> list[str]:
    given = given_code(json.loads((root / "notebooks" / registry.chapter_notebook(chapter)).read_text()))
    return definitions(given)


def _exercise_cells(path: Path) -> dict[str, str]:
    cells = {}
    for cell in json.loads(path.read_text())["cells"]:
        source = "".join(cell["source"])
        ex = exercise_id({**cell, "source": source})
        if ex:
            cells[ex] = source
    return cells


def _honest_submissions(root: Path) -> list[tuple[str, int, dict[str, str]]]:
    """(label, chapter, its exercise cells) of every submission the course has: solutions, student starters, and
    the solutions with each round of wrong answers in."""
    subs = []
    for chapter in registry.CHAPTER_MODULES:
        for folder in ("solutions", "notebooks"):
            subs.append((folder, chapter, _exercise_cells(root / folder / notebook_name(chapter))))
    for chapter, index, answers in wrong_rounds():
        solutions = _exercise_cells(root / "solutions" / notebook_name(chapter))
        subs.append((f"wrong answers (round {index})", chapter, {**solutions, **answers}))
    return subs


def test_every_honest_cell_of_the_course_is_inside_the_closed_world(course_root):
    """No exercise needs what the closed world refuses: the course's own cells, right and wrong, all pass it, judged
    as the grader judges them (with the names and attributes the notebook and the submission define)."""
    subs = _honest_submissions(course_root)
    assert sum(len(cells) for _, _, cells in subs) > 200
    refused = []
    for label, chapter, cells in subs:
        aliases = module_aliases(_imports(chapter, course_root))
        names, attributes = notebook_definitions(_given_sources(chapter, course_root) + list(cells.values()))
        for ex, source in cells.items():
            code, _ = clean_source(source)
            problem = closed_world_problem(ast.parse(code), aliases, names, attributes)
            if problem and "transformer_course" not in problem:  # a wrong answer that uses the course: refused
                refused.append(f"{label} {ex}: {problem}")
    assert refused == []


_SDPA = "def scaled_dot_product_attention(q, k, v, mask=None):\n"
_GETTER = "class P:\n    def get(self, name):\n        return getattr(self, name)\n"

# One case per route: (what it does, the cell, a word the refusal must say). By kind: modules and threads; names
# (a refused built-in aliased, passed as a value, or reached through an exemption by name); attributes (private,
# dunder, the interpreter's, named by a string); syntax the checker does not read; the course's code read back.
ROUTES = [
    (
        "a lower-level operator",
        _SDPA + "    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)\n",
        "`_scaled_dot_product_attention_math` (of `scaled_dot_product_attention`)",
    ),
    (
        "the watch patched through sys.modules['__main__']",
        "import sys\nsys.modules['__main__']._Watch.function = lambda self, f: None\n",
        "`sys`",
    ),
    (
        "the built-in called from a thread",
        "import threading\n" + _SDPA + "    out = []\n"
        "    threading.Thread(target=lambda: out.append(F.softmax(q @ k.mT, -1))).start()\n",
        "`threading`",
    ),
    (
        "PyTorch's guards reached with getattr on a built string",
        _SDPA + "    with getattr(torch, '_' + 'C').DisableTorchFunction():\n        return q\n",
        "computed at run time",
    ),
    ("the answer channel wrapped", "import gc\nfor o in gc.get_objects():\n    pass\n", "`gc`"),
    ("the same, through a generator's frame", "def g():\n    yield\nh = g()\nf = h.gi_frame.f_back\n", "exposes"),
    ("PyTorch's operators by name", "mm = torch.ops.aten.mm\n", "`torch.ops`"),
    ("a private name of the module", "nn_ops = torch._C._nn\n", "private"),
    ("a module as a value", "t = torch\n" + _SDPA + "    return t.nn.functional.softmax(q)\n", "other than through"),
    ("a module reached through an attribute", "x = torch.jit.fork\n", "jit"),
    ("a module reached through F", "m = F.importlib.import_module('sys')\n", "importlib"),
    ("unittest.mock, which chapter 9's notebook imports", "p = mock.patch('sys.modules')\n", "unittest.mock"),
    ("a dunder attribute", _SDPA + "    return attention_scores.__globals__\n", "__globals__"),
    ("exec", "exec('import sys')\n", "`exec`"),
    ("a mode of its own", "class T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass\n", "method"),
    ("pickled code", "x = torch.load('/tmp/x', weights_only=False)\n", "load"),
    ("the course's solution read back", "import inspect\ntext = inspect.getsource(attention_scores)\n", "`inspect`"),
    ("the same, through its code", "code = attention_scores.__code__\n", "__code__"),
    ("processes through PyTorch's data loader", "from torch.utils.data import DataLoader\n", "torch.utils.data"),
    ("a star import", "from torch.nn.functional import *\n", "imports *"),
    ("setattr on a module", "setattr(F, 'softmax', None)\n", "inside a module"),
    ("an assignment into a module", "F.softmax = torch.exp\n", "inside a module"),
    # a refused built-in under another name, or passed as a value
    ("getattr aliased", "g = getattr\nC = g(torch, '_C')\n", "other than by calling it"),
    ("getattr passed to map", "C = list(map(getattr, [display], ['__globals__']))\n", "other than by calling it"),
    ("getattr in a partial", "import functools\nC = functools.partial(getattr, display)('__globals__')\n", "calling"),
    ("a refused built-in aliased", "e = eval\n", "`eval`"),
    ("vars of a helper", "v = vars(display)\n", "`vars`"),
    ("__import__ by its name", "s = __import__('sys')\n", "__import__"),
    # an exemption by name: `self` is a parameter like any other
    ("getattr on self with a computed name", _GETTER + "g = P.get(display, '__glob' + 'als__')\n", "computed"),
    (
        "a private attribute on self",
        "class P:\n    def get(self):\n        return self._C\nc = P.get(torch)\n",
        "private",
    ),
    ("an escape on self", "class P:\n    def get(self, x):\n        return self.load(x)\n", "load"),
    # attributes named by strings, in the standard library's allowed modules
    ("operator.attrgetter", "import operator\ng = operator.attrgetter('__globals__')(display)\n", "attrgetter"),
    ("operator.methodcaller", "import operator\nm = operator.methodcaller('mro')\n", "methodcaller"),
    ("str.format's fields", "s = '{0.__globals__}'.format(display)\n", "reads an attribute"),
    ("str.format on a built string", "f = '{0.' + '__globals__}'\ns = f.format(display)\n", "made at run time"),
    ("str.format_map", "s = '{x}'.format_map({'x': 1})\n", "format_map"),
    (
        "string.Formatter",
        "import string\nv = string.Formatter().get_field('0.__globals__', [display], {})\n",
        "Formatter",
    ),
    (
        "typing.get_type_hints evaluates strings",
        "import typing\nh = typing.get_type_hints(display)\n",
        "get_type_hints",
    ),
    (
        "functools.singledispatch evaluates annotations",
        "import functools\nd = functools.singledispatch(len)\n",
        "singledispatch",
    ),
    ("a class made from strings", "T = type('T', (), {'__getattr__': print})\n", "`type`"),
    ("the metaclass as a value", "T = type(type(1))('T', (), {'__getattr__': print})\n", "`type`"),
    ("getattr rebound to itself", "getattr = getattr\nc = getattr(display, '__glob' + 'als__')\n", "binds the name"),
    ("getattr as a parameter's name", "def f(getattr, n):\n    return getattr(display, n)\n", "binds the name"),
    ("a module through attributes, as a value", "m = torch.nn\nf = m.functional\n", "other than through"),
    ("a dunder method assigned in a class body", "class T:\n    __getattr__ = print\n", "__getattr__"),
    # syntax the checker does not read
    (
        "a class pattern reads attributes by name",
        "match display:\n    case object(__globals__=g):\n        pass\n",
        "match",
    ),
    ("a coroutine's frame", "async def f():\n    pass\n", "async def"),
    ("a metaclass", "class T(metaclass=abs):\n    pass\n", "metaclass"),
    # the course's code and the worker's helpers read back
    ("a code object's constants", "def g():\n    yield\nc = g().gi_code.co_consts\n", "exposes"),
    (
        "a closure's cells",
        "def f():\n    x = 1\n    return lambda: x\nc = f().__closure__[0].cell_contents\n",
        "__closure__",
    ),
    ("an underscore name the notebook does not define", "w = _Watch\n", "`_Watch`"),
    ("an attribute on no list", "d = display.func_globals\n", "not on the list"),
    ("the course package's functions", "y = decoding.length_penalty(3, 0.6)\n", "transformer_course"),
]


@pytest.mark.parametrize("what, cell, word", ROUTES, ids=[r[0] for r in ROUTES])
def test_each_route_around_the_watch_is_refused_before_it_runs(course_root, what, cell, word):
    chapter = 9 if "mock" in cell or "decoding" in cell else 5
    ex = registry.get("9.1" if chapter == 9 else "5.3")
    names = {e.name for e in registry.chapter_exercises(chapter)}
    problem = static_problem(cell, ex, names, _imports(chapter, course_root))
    assert problem is not None and word in problem, f"{what}: {problem}"


def test_routes_earn_nothing_and_honest_exercises_keep_their_points(course_root, tmp_path):
    """Graded for real: two routes of the issue in 5.3 and 5.4 get 0 with the reason; the rest keeps its points."""
    ops = ROUTES[0][1].replace("    return torch.ops", "    out = torch.ops")
    ops += (
        "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)\n    return out, weights\n"
    )
    cells = {"5.3": ops, "5.4": ROUTES[1][1]}
    path = with_cells(course_root / "solutions" / notebook_name(5), tmp_path, "routes.ipynb", cells)
    report = grade_notebook(path, course_root, isolation="process")
    expected = {**full_points(5), "5.3": 0, "5.4": 0}
    assert scores(report) == expected, report.markdown()
    outputs = {t.name[9:12]: t.output for t in report.tests}
    assert outputs["5.3"].startswith("refused:") and "_math" in outputs["5.3"]
    assert outputs["5.4"].startswith("refused:") and "`sys`" in outputs["5.4"]
    assert report.problems == []  # both cells were read as 5.3 and 5.4 (none missing or extra), and nothing else


def test_the_watch_sees_a_forbidden_builtin_by_its_family():
    """Defence behind the closed world: a variant of the forbidden function, called, is reported."""
    worker = sandbox.Worker("process", memory_mb=2048, cpu_seconds=120)
    try:
        assert worker.wait_ready(120)
        source = "def f(q):\n    return torch._scaled_dot_product_attention_math(q, q, q)[0]\n"
        assert worker.request({"op": "exec", "source": "import torch\n" + source, "timeout": 30}, 30) == {"ok": True}
        q = {"__tensor__": "float64", "shape": [1, 2, 2], "data": [0.1, 0.2, 0.3, 0.4]}
        case = {"args": {"__seq__": "tuple", "items": [q]}, "kwargs": {"__dict__": {}}, "init": None, "state": None}
        command = {"op": "call", "exercise": "5.3", "name": "f", "kind": "function", "cases": [case], "timeout": 30}
        answer = worker.request({**command, "forbidden": ["scaled_dot_product_attention"]}, 30)
    finally:
        worker.close()
    assert answer is not None and "value" in answer["results"][0], answer
    assert answer["forbidden"] == ["_scaled_dot_product_attention_math"]


@needs_bwrap
def test_the_report_says_when_the_sandbox_has_no_control_groups(course_root, monkeypatch, tmp_path):
    """Where no group can be made, the solution still gets full marks, and the report's isolation line says which
    group was missing and is shown; where both were made, the line is the mode's alone and is not shown."""
    notebook = course_root / "solutions" / notebook_name(5)
    if cgroups_here().pids and cgroups_here().memory:
        report = grade_notebook(notebook, course_root, isolation="bwrap")
        assert report.score == report.max_score and report.isolation == "graded in the bwrap sandbox"
        assert not report.isolation_is_weak
    monkeypatch.setattr(limits, "_V1", tmp_path / "no-cgroup-here")  # every group's mkdir fails
    report = grade_notebook(notebook, course_root, isolation="bwrap")
    assert report.score == report.max_score > 0, report.markdown()
    assert "a weaker sandbox: no pids group" in report.isolation and "no memory group" in report.isolation
    assert report.isolation_is_weak and report.isolation in report.markdown().replace("\\", "")
    assert report.isolation in report.gradescope()["output"]


@needs_pids
def test_no_thread_or_process_starts_once_the_worker_is_ready(monkeypatch):
    """The pids group is frozen at the worker's own tasks: threading and fork fail, PyTorch's work does not, and
    the grader's environment is not the worker's."""
    monkeypatch.setenv("HOSTILE_TEST_SECRET", "1")
    worker = sandbox.Worker("process", memory_mb=2048, cpu_seconds=120)
    try:
        assert worker.wait_ready(120) and worker.tasks_frozen

        def run(source: str) -> dict | None:
            return worker.request({"op": "exec", "source": source, "timeout": 30}, 30)

        assert "can't start new thread" in run("import threading\nthreading.Thread(target=print).start()")["error"]
        assert "Resource temporarily unavailable" in run("import os\nos.fork()")["error"]
        honest = "import torch\nx = torch.randn(200, 200, requires_grad=True)\n(x @ x).softmax(-1).sum().backward()"
        assert run(honest) == {"ok": True}
        assert run("import os\nassert 'HOSTILE_TEST_SECRET' not in os.environ") == {"ok": True}
    finally:
        worker.close()


@needs_bwrap
@needs_memory
def test_the_whole_sandbox_is_under_one_memory_limit():
    """/tmp holds 64 MiB; what the processes hold together, /dev/shm included, stays under the memory limit: past
    it the kernel ends the worker, and the report says why."""
    worker = sandbox.Worker("bwrap", memory_mb=1024, cpu_seconds=120)
    try:
        assert worker.wait_ready(120)
        write = "b = b'x' * 2**20\nfor n in range({n}):\n    with open(f'{where}/a{{n}}', 'wb') as f:\n"
        write += "        for i in range(50):\n            f.write(b)\n"
        tmp = worker.request({"op": "exec", "source": write.format(n=3, where="/tmp"), "timeout": 30}, 30)
        assert tmp is not None and "No space left on device" in tmp["error"]
        shm = worker.request({"op": "exec", "source": write.format(n=30, where="/dev/shm"), "timeout": 60}, 60)
        assert shm is None and "memory limit of 1024 MB" in str(worker.dead)
    finally:
        worker.close()
    assert torch.ones(1).item() == 1.0  # the grader's own process is untouched


def test_a_name_bound_by_another_cell_is_no_way_to_a_builtin(course_root):
    """Another cell's `getattr = getattr` (refused, so never run) does not make `getattr` this cell's own; an
    attribute set with a constant setattr is the cell's own, as one assigned is."""
    ex = registry.get("5.3")
    cell = "c = getattr(display, '__glob' + 'als__')\n"
    notebook = notebook_definitions(["getattr = getattr\n", cell])
    assert "computed at run time" in static_problem(cell, ex, set(), _imports(5, course_root), notebook)
    own = "class P:\n    def __init__(self):\n        setattr(self, 'w_extra', 1)\n    def f(self):\n        return self.w_extra\n"
    assert static_problem(own, ex, set(), _imports(5, course_root)) is None


def test_the_workers_helpers_carry_nothing_of_the_worker():
    """What the worker puts in the student's namespace (``display``) reaches nothing of the worker: its globals hold
    print and repr only, never the worker's modules, its answer channel or ``open``. Run past the static check, as
    code that had found a way round it would."""
    worker = sandbox.Worker("process", memory_mb=2048, cpu_seconds=120)
    try:
        assert worker.wait_ready(120)
        source = (
            "seen = sorted(display.__globals__)\n"
            "assert seen == ['__builtins__', 'display'], seen\n"
            "assert sorted(display.__globals__['__builtins__']) == ['print', 'repr']\n"
            "assert display('shown') is None\n"
        )
        answer = worker.request({"op": "exec", "source": source, "timeout": 30}, 30)
    finally:
        worker.close()
    assert answer == {"ok": True}, answer


def test_reading_the_lists_draws_no_random_number():
    """The self-check reads the allow-list in a student's kernel: making the layers whose attributes it lists must not
    move PyTorch's random generator, or the notebook's stored outputs after a self-check would change."""
    from transformer_course.grading import allowed

    for cached in (allowed._layers, allowed.library_attributes, allowed.library_private_attributes):
        cached.cache_clear()
    state = torch.random.get_rng_state()
    assert "weight_ih_l0" in allowed.library_attributes() and "_parameters" in allowed.library_private_attributes()
    assert torch.equal(torch.random.get_rng_state(), state)
