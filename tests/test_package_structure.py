"""The package's shape: layers as folders that import only downwards, no import cycles, no chapter module that
reaches a later chapter's code, a root that holds only the package's face and its command lines, and modules
small enough to read in one sitting. The imports are read from the source (every ``import`` statement,
those inside functions included), so a lazy import cannot hide a cycle."""

import ast
from pathlib import Path

import pytest

from transformer_course.authoring import manifest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_course"

# The chapter each chapter module belongs to, from the chapter manifest (src/transformer_course/chapters.toml); the
# other modules are shared (data, training, evaluation, the cache, the grader's machinery). exercises/chNN.py (or the
# package exercises/chNN/) belongs to chapter NN.
CHAPTERS = manifest.load().module_chapters()
# Shared modules a grading table may use besides its chapter's own (the training losses and schedules, and
# the test sentences that exercise 3.5 scores).
SHARED = {"training.loop", "data.tatoeba"}
MAX_LINES = 300

# The layers, lowest first: a module imports only from its own layer and the layers below it (the grading
# machinery stands apart: anything may use it, and it uses nothing of the course). The root's own modules are
# the argument checks and where the course's files are (below everything) and the command lines (above).
LAYERS = [
    {"_checks", "repository", "runs"},
    {"data"},  # tokenizers, datasets, batching
    {"models"},  # the networks, one module per idea
    {"decoding"},  # greedy, beam, sampling
    {"evaluation"},  # BLEU, held-out translations, attention maps, figures
    {"training"},  # one loop, configurations, checkpoints, the cache, the trainers' command lines
    {"measurement", "experiments", "reference", "diagrams"},  # what the chapters run and draw
    {"explorer", "gpu"},  # chapter 9's explorer, the GPU run
    {"exercises"},  # each chapter's exercise table (course content)
    {"authoring"},  # release, student book, claims, scaffolding
    {"", "train", "lm_train", "mlm_train", "grade"},  # the package's face and its command lines
]
ROOT_MODULES_AT_MOST = 12


def exercise_tables() -> set[str]:
    """exercises/chNN.py: declarative exercise tables (cases, mistakes, hints), long because each exercise is."""
    return {name for name in modules() if name.startswith("exercises.") and chapter_of(name) is not None}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def chapter_of(name: str) -> int | None:
    if name in CHAPTERS:
        return CHAPTERS[name]
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == "exercises" and parts[1].startswith("ch") and parts[1][2:].isdigit():
        return int(parts[1][2:])
    return None


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports: ``from .x import y`` names x, or x.y when y is a module."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [
                a.name.removeprefix("transformer_course.")
                for a in node.names
                if a.name == "transformer_course" or a.name.startswith("transformer_course.")
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "transformer_course" or node.module.startswith("transformer_course.")):
                module = node.module.removeprefix("transformer_course").removeprefix(".")
            else:
                continue
            targets = [
                f"{module}.{a.name}".lstrip(".") if f"{module}.{a.name}".lstrip(".") in known else module
                for a in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_the_graph_is_read_from_real_imports(graph):
    # A reader that found nothing would pass every test below.
    assert {"models.seq2seq", "data.batching"} <= graph["models.bahdanau"]
    assert "models.incremental" in graph["models.transformer"] and "models.incremental" in graph["decoding.search"]
    assert "models.seq2seq" in graph["exercises.ch03"] and "grading.registry" in graph["exercises.ch03"]


def layer_of(name: str) -> int | None:
    top = name.split(".")[0]
    for rank, layer in enumerate(LAYERS):
        if top in layer:
            return rank
    return None


def test_every_module_is_in_a_layer(graph):
    unplaced = sorted(n for n in graph if layer_of(n) is None and n.split(".")[0] != "grading")
    assert not unplaced, f"modules outside every layer (add their folder to LAYERS): {unplaced}"


def test_imports_run_downwards_only(graph):
    assert layer_of("models.rnn") < layer_of("training.loop") < layer_of("exercises.ch01")
    upwards = [
        f"{name} -> {target}"
        for name in graph
        for target in graph[name]
        if not target.startswith("grading")
        and layer_of(name) is not None
        and layer_of(target) is not None
        and layer_of(target) > layer_of(name)
    ]
    assert not upwards, "imports from a lower layer up to a higher one: " + ", ".join(sorted(upwards))


def test_the_root_holds_only_the_face_and_the_command_lines():
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert "__init__" in root and len(root) <= ROOT_MODULES_AT_MOST, root
    folders = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert {"models", "data", "training", "decoding", "evaluation", "grading"} <= set(folders), folders


def test_no_import_cycles(graph):
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_chapter_module_reaches_a_later_chapter(graph):
    for name, chapter in ((n, chapter_of(n)) for n in graph):
        if chapter is None:
            continue
        seen, todo = set(), [name]
        while todo:  # everything the module imports, directly or through shared modules
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        later = sorted(m for m in seen if (chapter_of(m) or 0) > chapter)
        assert not later, f"{name} (chapter {chapter}) reaches later chapters' modules: {later}"


def test_every_chapter_module_exists():
    found = modules()
    assert set(CHAPTERS) <= set(found), sorted(set(CHAPTERS) - set(found))


def test_every_graded_chapter_names_its_module_here(graph):
    # A new chapter's exercise module imports the chapter's reference module: that module must be listed in
    # CHAPTERS under the same number, or the checks above would not hold it to the chapter order.
    tables = exercise_tables()
    assert len(tables) >= 9
    for table in sorted(tables):
        number = chapter_of(table)
        own = {m for m in graph[table] if not m.startswith(("grading", "exercises")) and m not in SHARED}
        assert own, f"{table} imports no chapter module"
        wrong = {m: CHAPTERS.get(m) for m in own if CHAPTERS.get(m) is None or CHAPTERS[m] > number}
        assert not wrong, f"{table}: add these modules to CHAPTERS (chapter {number} or earlier): {wrong}"


def test_modules_are_short():
    long = {
        name: n
        for name, path in modules().items()
        if name not in exercise_tables() and (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by what they hold): {long}"


def test_the_grading_machinery_imports_none_of_the_course(graph):
    # The trust boundary: grading/ runs and compares submissions; what the exercises are, and the models they are
    # checked against, live in exercises/ and the chapters' modules, which the registry finds by name when it needs
    # them. A security reviewer reads grading/ alone.
    machinery = [name for name in graph if name == "grading" or name.startswith("grading.")]
    assert len(machinery) >= 10
    for name in machinery:
        outside = {m for m in graph[name] if not (m == "grading" or m.startswith("grading.")) and m != "repository"}
        assert not outside, f"{name} imports course code outside the grading machinery: {sorted(outside)}"
