"""The grading package's trust boundary, read from its imports: each folder of ``grading/`` holds the code that runs
in one place (``grading/__init__.py`` draws the map), and what one side may import of another is fixed here.

- ``kernel/`` (a student's Jupyter kernel) imports nothing of ``host/`` or ``kits/``;
- ``inside/`` (the sandbox, with the student's code) imports nothing of ``host/`` or ``kits/``, and nothing of the
  package at all: it runs where the package is not;
- ``host/`` (the instructor's grader) never imports ``kernel/`` or ``inside/`` (it copies the worker as a file);
- ``kits/`` may import ``host/``; nothing but ``kits/`` imports ``kits/``;
- the shared top-level modules import none of the four folders (``__init__`` reaches ``kernel/`` for ``check``).

Imports are read from the source with ``ast``, every ``import`` and ``from ... import`` statement, relative or
absolute, those inside functions included, so a lazy import cannot cross the boundary unseen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GRADING = Path(__file__).resolve().parents[1] / "src" / "transformer_course" / "grading"
PACKAGE = "transformer_course"
SIDES = ("host", "inside", "kernel", "kits")
# What each side must never import (a module of the package, dotted, below transformer_course.grading).
FORBIDDEN = {
    "kernel": ("host", "kits", "inside"),
    "inside": ("host", "kits", "kernel"),
    "host": ("kernel", "kits", "inside"),
    "kits": ("kernel", "inside"),
    "shared": SIDES,
}


def module_of(path: Path) -> str:
    """The dotted name of a file of grading/: transformer_course.grading.host.cli."""
    parts = path.relative_to(GRADING.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module that the file names in an import statement, relative ones resolved to absolute dotted names.
    ``from . import x`` gives both the package and package.x (x may be a module), so neither can hide."""
    name = module_of(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names if a.name != "*"}
    return found


def side_of(path: Path) -> str:
    first = path.relative_to(GRADING).parts[0]
    return first if first in SIDES else "shared"


def files() -> list[Path]:
    return sorted(p for p in GRADING.rglob("*.py") if "__pycache__" not in p.parts)


def reaches(module: str, side: str) -> bool:
    target = f"{PACKAGE}.grading.{side}"
    return module == target or module.startswith(target + ".")


@pytest.fixture(scope="module")
def graph() -> dict[Path, set[str]]:
    return {p: imports(p) for p in files()}


def test_every_side_has_its_folder_and_the_reader_finds_real_imports(graph):
    # A reader that found nothing, or a layout that lost a folder, would pass every test below.
    for side in SIDES:
        assert (GRADING / side / "__init__.py").is_file(), f"grading/{side}/ is missing"
    by_name = {module_of(p): found for p, found in graph.items()}
    g = f"{PACKAGE}.grading"
    assert f"{g}.host.sandbox" in by_name[f"{g}.host.grader"]  # from . import sandbox
    assert f"{g}.registry" in by_name[f"{g}.kernel.selfcheck"]  # from .. import registry
    assert f"{g}.host.isolation" in by_name[f"{g}.kits.gradescope"]  # inside a function: from ..host.isolation import
    assert f"{g}.host.grader" in by_name[f"{g}.kits.gradescope_kit.autograde"]  # inside a function, three dots
    assert f"{g}.kernel.selfcheck" in by_name[g]  # the package's lazy ``check``
    assert "course_codec" in by_name[f"{g}.inside.worker"] and "torch" in by_name[f"{g}.inside.worker"]
    assert f"{PACKAGE}.repository" in by_name[f"{g}.host.cli"]


def test_the_reader_catches_a_crossing(tmp_path, monkeypatch):
    # The rule must be able to fail: a kernel module that imports the host, lazily, is caught.
    fake = tmp_path / PACKAGE / "grading"
    (fake / "kernel").mkdir(parents=True)
    bad = fake / "kernel" / "bad.py"
    bad.write_text("def f():\n    from ..host import grader\n    import transformer_course.grading.kits\n")
    monkeypatch.setattr(f"{__name__}.GRADING", fake)
    found = imports(bad)
    assert f"{PACKAGE}.grading.host.grader" in found and f"{PACKAGE}.grading.kits" in found
    assert [m for m in found if reaches(m, "host")] and [m for m in found if reaches(m, "kits")]
    assert not reaches(f"{PACKAGE}.grading.hostile", "host")  # a prefix of the name is not the folder


@pytest.mark.parametrize("side", [*SIDES, "shared"])
def test_no_side_imports_what_it_must_not(graph, side):
    checked = 0
    for path, found in graph.items():
        if side_of(path) != side or (side == "shared" and path == GRADING / "__init__.py"):
            continue
        checked += 1
        crossing = sorted(m for m in found for other in FORBIDDEN[side] if reaches(m, other))
        assert not crossing, f"grading/{path.relative_to(GRADING)} ({side}) imports {crossing}"
    assert checked >= 2, f"no modules found on the {side} side"


def test_the_package_reaches_the_kernel_only_for_check(graph):
    found = graph[GRADING / "__init__.py"]
    assert {m for m in found if any(reaches(m, s) for s in SIDES)} == {
        f"{PACKAGE}.grading.kernel.selfcheck",
        f"{PACKAGE}.grading.kernel.selfcheck.check",
    }


def test_the_sandbox_side_imports_nothing_of_the_package(graph):
    # The worker runs as a plain script in a sandbox where the package is not on the file system: beside the standard
    # library and PyTorch it may import only the codec that is copied in with it.
    for path, found in graph.items():
        if side_of(path) == "inside":
            course = sorted(m for m in found if m == PACKAGE or m.startswith(PACKAGE + "."))
            assert not course, f"grading/{path.relative_to(GRADING)} imports {course}"


def test_the_codec_that_crosses_imports_only_torch_and_the_standard_library(graph):
    # host/sandbox.py copies codec.py into the sandbox, where nothing else of the package exists.
    from transformer_course.grading.host.sandbox import WORKER_FILES

    assert set(WORKER_FILES) == {"worker.py", "course_codec.py"}
    assert WORKER_FILES["worker.py"].parent.name == "inside"
    for source in WORKER_FILES.values():
        assert source.is_file(), source
    codec = {m.split(".")[0] for m in graph[GRADING / "codec.py"]}
    assert codec <= {"__future__", "math", "typing", "torch"}, codec
