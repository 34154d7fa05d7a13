"""The package's shape: no import cycles, no chapter module that reaches a later chapter's code, and modules
small enough to read in one sitting. The imports are read from the source (every ``import`` statement,
those inside functions included), so a lazy import cannot hide a cycle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer_course"

# The chapter each chapter module belongs to; the other modules are shared (data, training, evaluation,
# the cache, the grader's machinery). exercises/chNN.py (or the package exercises/chNN/) belongs to chapter NN.
CHAPTERS = {
    "rnn": 1,
    "lstm": 2,
    "gru": 2,
    "seq2seq": 3,
    "bleu": 3,
    "word_embeddings": 3,
    "bahdanau": 4,
    "captioning": 4,
    "attention": 5,
    "complexity": 5,
    "multihead": 6,
    "positional": 7,
    "packed_attention": 8,
    "transformer_layers": 8,
    "transformer": 8,
    "transformer_torch": 8,
    "patch_captioner": 8,
    "incremental": 8,
    "decoding": 9,
    "bpe": 10,
    "bpe_step": 10,
    "lm_loss": 10,
    "lm_baselines": 10,
    "language_model": 10,
    "sampling": 10,
    "lm_data": 10,
    "lm_train": 10,
    "lm_samples": 10,
    "masked_lm": 10,
    "mlm_train": 10,
}
# Shared modules a grading table may use besides its chapter's own (the training losses and schedules, and
# the test sentences that exercise 3.5 scores).
SHARED = {"training", "data.tatoeba"}
MAX_LINES = 300


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
    assert {"seq2seq", "data.batching"} <= graph["bahdanau"]
    assert "incremental" in graph["transformer"] and "incremental" in graph["decoding"]
    assert "seq2seq" in graph["exercises.ch03"] and "grading.registry" in graph["exercises.ch03"]


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
