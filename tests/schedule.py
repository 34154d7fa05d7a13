"""One pytest session for the whole suite (`make test`), ordered so that both CI cores stay busy.

Loaded with `-p tests.schedule`. Under `--nbval`, it does four things:

- The solutions run strictly (every stored output must reproduce). The student notebooks of notebooks/
  run lax (only an error fails a cell; their outputs are not stored) up to and including their last
  self-check cell, and their later cells are skipped. Why that is enough: each later cell is the
  solution's cell, character for character (tests/test_release.py), run strictly in the solution;
  after a self-check the student's name is bound to a function that passed it or to the reference
  (`beam_step = check("9.2", beam_step)`); every name that a solution's exercise cell defines, its
  blanked version or self-check defines too (test_release.py); and the grader's tests run every later
  cell of the untouched student notebook that is not a demonstration (`skip-in-grading`). A student
  notebook without exercises (a chapter's second notebook, which only reads measurements) is the
  solution's cells alone, so none of its cells runs twice. What the skips save is chapter 9's
  beam-search experiments a second time (about 9 minutes on one core).
- Each notebook runs whole on one worker, in one kernel (and so do the tests of ONE_UNIT, which share a costly
  fixture); other unit tests are spread one by one (a scheduler
  of its own: xdist's `--dist loadgroup` does not group anything under pytest 9, whose node ids no
  longer come from the attribute that xdist 3.8 rewrites).
- Order: the three translation models train as tests of their own (tests/test_trained_models.py, marker
  `trains`: the same call as the chapters', so the same cache entry), interleaved with the notebooks that load
  them (FIRST), then the other notebooks that load a model, then everything else (unit tests and the notebooks
  that need no model). The rule: the longest jobs start first, two at once, and no worker is handed a notebook
  whose model the other worker is still training. xdist hands a worker its next unit when its current one has
  at most two tests left, so a one-test unit brings its successor along at once: the queue alternates between
  the two workers. With FIRST's order, one worker trains seq2seq (the longest, about 500 s on one core), then
  runs chapter 3 (which needs only seq2seq), chapter 4 (seq2seq and Bahdanau) and chapter 9's evaluation (no
  trained model: the longest notebook, too long to run alone at the end); the other trains Bahdanau, then the
  Transformer, then runs chapter 8's Tatoeba notebook (Bahdanau and the Transformer). In CI's run with the
  loaders after all three trainers, chapter 3 waited 122 s for seq2seq on a worker with nothing else to do.
  Run with `--dist loadscope --no-loadscope-reorder`, so that xdist keeps this order.
- With NOTEBOOK_THREADS set, each notebook's kernel gets that many BLAS/OpenMP threads, and the trainers'
  decoding too (their training has its own: training.budget). The Makefile sets 1, as the unit tests have: with
  a worker per core, a second thread only waits for a core (see the Makefile for the measurement).
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path

import pytest

FIRST_WAVE, LOADS, FREE = 0, 1, 2  # the three waves, in order

# The first wave, in the order it is queued (see above): trainers by configuration, solution notebooks by name.
# Chapter 9's evaluation loads no cached model (the reference Transformer is a file of the repository), but it is
# the longest notebook, and queued in the last wave it would run alone at the end.
FIRST = (
    "seq2seq-cpu",
    "bahdanau-cpu",
    "03_encoder_decoder",
    "transformer-cpu",
    "08_transformer_vs_gru",
    "04_bahdanau_attention",
    "09_evaluation",
)
LOADERS = tuple(name for name in FIRST if not name.endswith("-cpu"))  # the solution notebooks among them


# Test modules whose tests share one costly fixture (of the module or the session), and the unit each belongs to: tests/test_gpu.py (the GPU
# run's pack and dry run, half a minute), and the book's tests (tests/test_book.py and tests/test_browser.py share
# conftest's book_build, 25 s, made once per worker). One unit each, so that the second worker neither waits on the
# fixture the first is making nor makes it again.
ONE_UNIT = {
    "tests/test_gpu.py": "gpu",
    "tests/test_gradescope.py": "gradescope",  # one fixture grades nine submissions through the kit
    "tests/test_grader_hostile.py": "hostile",  # one fixture grades every attack in the sandbox (25 s)
    "tests/test_scaffold.py": "scaffold",  # one fixture copies the course and scaffolds a chapter in it (10 s)
    "tests/test_book.py": "book",
    "tests/test_browser.py": "book",
    "tests/test_browser_explorer.py": "book",  # the built book (book_build), once per worker
    "tests/test_lab_explorer.py": "book",  # the same browser
    "tests/test_student_book.py": "book",  # compared with the public book (book_build)
}

CHECK = re.compile(r'\bcheck\("\d+\.\d+"')  # a self-check cell: `beam_step = check("9.2", beam_step)`


@cache
def _code(path: Path) -> tuple[str, ...]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return tuple("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _runs(path: Path) -> int:
    """How many code cells of the notebook run: all for a solution, through the last self-check for a student's."""
    code = _code(path)
    if path.parent.name != "notebooks":
        return len(code)
    return 1 + max((i for i, source in enumerate(code) if CHECK.search(source)), default=-1)


@cache
def _models(path: Path) -> frozenset[str]:
    """The translation configurations named in the cells that run and call `translation_experiment` (which
    trains them or loads them from the model cache); the reference models are neither (their weights are files
    of the repository), nor are stored runs or a configuration read for a diagram."""
    from transformer_course.reference import NAMES as STORED
    from transformer_course.training.configs import CONFIGS

    code = "\n".join(c for c in _code(path)[: _runs(path)] if "translation_experiment(" in c)
    return frozenset(name for name in CONFIGS if f'"{name}"' in code and name not in STORED)


def _notebook(item: pytest.Item) -> Path | None:
    return item.path if item.path.suffix == ".ipynb" else None


def _queue_key(item: pytest.Item) -> tuple[int, int]:
    """(wave, rank): the trainers and the notebooks that load their models (FIRST, in its order), then the other
    notebooks that load a model, then the rest."""
    if item.get_closest_marker("trains"):
        model = item.name.rsplit("[", 1)[-1].rstrip("]")  # test_a_translation_model_learns_within_its_budget[NAME]
        return FIRST_WAVE, FIRST.index(model)
    path = _notebook(item)
    if path is not None and path.parent.name == "solutions" and path.stem in FIRST:
        return FIRST_WAVE, FIRST.index(path.stem)
    if path is None or not _models(path):
        return FREE, 0
    return LOADS, 0


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """A notebook is one unit of work (its cells share a kernel); any other test is a unit of its own."""
    if not (config.getoption("nbval", False) or config.getoption("nbval_lax", False)):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") else ONE_UNIT.get(path, nodeid)

    return NotebookScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not (config.getoption("nbval", False) or config.getoption("nbval_lax", False)):
        return
    from nbval.plugin import find_comment_markers, find_metadata_tags

    for item in items:
        path = _notebook(item)
        if path is None:
            continue
        if path.parent.name == "notebooks" and item.cell_num >= _runs(path):
            item.add_marker(pytest.mark.skip(reason="the solution's cell, run strictly there (see tests/schedule.py)"))
        elif path.parent.name == "notebooks":
            explicit = {**dict(find_metadata_tags(item.cell.metadata)), **dict(find_comment_markers(item.cell.source))}
            if "check" not in explicit:
                item.options["check"] = False  # lax: the student version's outputs are not stored
    # A stable sort: otherwise collection order (chapter order, each notebook's cells in order).
    items.sort(key=_queue_key)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """A notebook's kernel starts while its first cell is set up: give it NOTEBOOK_THREADS threads."""
    threads = os.environ.get("NOTEBOOK_THREADS")
    if not threads or _notebook(item) is None:
        return (yield)
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = threads  # read by the kernel process when it starts
    try:
        return (yield)
    finally:
        if before is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = before
