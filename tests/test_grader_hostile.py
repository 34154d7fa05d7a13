"""Hostile submissions earn nothing, honest ones lose nothing: the grader's trust boundary, tested.

One test per class of attack (and of honest work that an earlier grader penalised). Several hostile
cells share one submission where they can, so that the whole file costs a handful of gradings; the
submissions are graded once, by module-scoped fixtures. The tests that depend on the sandbox (files
out of reach, every process ended) need bubblewrap and are skipped, with the reason, without it.
"""

import csv
import json
import os
import secrets
import shutil
from pathlib import Path

import pytest

from gradertools import cgroups_here, full_points, scores, with_cells
from transformer_course.grading import registry
from transformer_course.grading.host import grader, isolation, sandbox
from transformer_course.grading.host.cli import main
from transformer_course.grading.host.grader import Report, grade_notebook
from transformer_course.grading.host.grader import TestResult as Result
from transformer_course.grading.host.overview import csv_cell
from transformer_course.grading.static_check import static_problem

CHAPTER = "05_self_attention.ipynb"
POINTS = full_points(5)
# In the command line of every process a hostile cell leaves behind; drawn for each test session, so that a
# session counts only its own processes, not those of another session grading at the same time on the machine.
TOKEN = f"course-hostile-test-{secrets.token_hex(4)}"
needs_bwrap = pytest.mark.skipif(
    not isolation.bwrap_available(), reason="bubblewrap is not available here: install it with `make sandbox` (as root)"
)

_SDPA_BODY = (
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
    "    weights = torch.softmax(scores, dim=-1)\n"
)


# The constructor of exercise 5.4's class, as the notebook gives it: two submissions below define their class with it.
_SELF_ATTENTION_INIT = (
    "class SelfAttention(nn.Module):\n"
    "    def __init__(self, d_model, d_k, d_v=None):\n"
    "        super().__init__()\n"
    "        self.w_q = nn.Linear(d_model, d_k, bias=False)\n"
    "        self.w_k = nn.Linear(d_model, d_k, bias=False)\n"
    "        self.w_v = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)\n"
)


def _memorised_scores() -> str:
    """5.1 that answers from a table of the cases of every seed in the package, computed offline."""
    ex = registry.get("5.1")
    table = {}
    for seed in (registry.PUBLIC_SEED, registry.HIDDEN_SEED):
        for case in ex.cases(seed):
            key = tuple(round(x, 6) for x in case.args[0].reshape(-1)[:4].tolist())
            table[key] = (list(ex.reference(*case.args).shape), ex.reference(*case.args).reshape(-1).tolist())
    return (
        f"TABLE = {table!r}\n"
        "def attention_scores(q, k):\n"
        "    key = tuple(round(x, 6) for x in q.reshape(-1)[:4].tolist())\n"
        "    if key in TABLE:\n"
        "        shape, data = TABLE[key]\n"
        "        return torch.tensor(data, dtype=torch.float64).reshape(shape)\n"
        "    return torch.zeros(q.shape[:-1] + (k.shape[-2],), dtype=q.dtype)\n"
    )


# Wrongly earned points, one class per exercise: none of these may earn anything.
EARNS_NOTHING = {
    "5.1": _memorised_scores(),
    # reads the solutions and the reference package from disk and runs their code
    "5.2": (
        "import glob, json, os, sys\n"
        "if 'HOSTILE_TEST_SECRET' in os.environ:\n"
        "    raise RuntimeError('the grader leaked its environment')\n"
        "repo = os.path.dirname(sys.prefix)  # the virtual environment sits in the course folder\n"
        "found = glob.glob(repo + '/solutions/05_self_attention.ipynb')\n"
        "found += glob.glob(repo + '/**/transformer_course/models/attention.py', recursive=True)\n"
        "found += glob.glob(sys.prefix + '/lib/*/site-packages/transformer_course/models/attention.py')\n"
        "def decoder_mask(lengths, t):\n"
        "    keys = torch.arange(t)\n"
        "    return (keys[None, None, :] < lengths[:, None, None]) & (keys[None, :] >= keys[:, None])\n"
        "for path in found:\n"
        "    if path.endswith('.py'):\n"
        "        exec(open(path).read().replace('from __future__ import annotations', ''), globals())\n"
        "    else:\n"
        "        for cell in json.load(open(path))['cells']:\n"
        "            if 'def causal_mask' in ''.join(cell['source']):\n"
        "                exec(''.join(cell['source']), globals())\n"
    ),
    # PyTorch's built-in through a string, and the reference package through importlib without its name
    "5.3": (
        "import importlib\n"
        "try:\n"
        "    reference = importlib.import_module('transformer_' + 'course.attention')\n"
        "except ImportError:\n"
        "    reference = None\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    if reference is not None:\n"
        "        return getattr(reference, 'scaled_dot_product_attention')(q, k, v, mask)\n"
        + _SDPA_BODY
        + "    out = getattr(F, 'scaled_dot_' + 'product_attention')(q, k, v, attn_mask=mask)\n"
        "    return out, weights\n"
    ),
    # patches the grading machinery in its own process, forges answers on every descriptor, and leaves a
    # detached process behind that would rewrite the results afterwards
    "5.4": (
        "import os, subprocess, sys\n"
        f"subprocess.Popen(['sh', '-c', 'while true; do sleep 1; done; echo {TOKEN}'], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "codec = sys.modules.get('course_codec')\n"
        "if codec is not None:\n"
        "    codec.encode = lambda value, *a, **k: {'__tensor__': 'float64', 'shape': [0], 'data': []}\n"
        "for fd in range(3, 30):\n"
        "    try:\n"
        "        os.write(fd, b'{\"results\": [], \"forbidden\": []}\\n')\n"
        "    except OSError:\n"
        "        pass\n" + _SELF_ATTENTION_INIT + "    def forward(self, x, mask=None):\n"
        "        return x, x\n"
    ),
    # an input on which even the right attention has no answer (a query that sees no key), so that every bug
    # "differs" through its NaN (after 5.4's forgeries the worker's answer is unreadable anyway; the judge's
    # own words for it are tested in tests/wrong_answers/ch05.py's last round)
    "5.5": (
        "def catch_every_bug(t, d_k):\n"
        "    q, k, v = torch.randn(t, d_k), torch.randn(t, d_k), torch.randn(t, d_k + 1)\n"
        "    mask = torch.ones(t, t, dtype=torch.bool).tril()\n"
        "    mask[0] = False\n"
        "    return 1000 * q, k, v, mask\n"
    ),
}

# Honest work that must lose nothing: comments and strings naming forbidden things, a method named like
# a built-in, a flood of output, IPython magics, and no use of the grader's environment.
HONEST = {
    "5.1": (
        "# Like transformer_course.models.attention.attention_scores, but mine; not F.scaled_dot_product_attention.\n"
        "NOTE = 'import transformer_course; import sys'\n"
        "print('x' * 30_000_000, end='')  # a very large output\n"
        "def attention_scores(q, k):\n"
        "    print('debugging ' * 1000)\n"
        "    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    ),
    "5.2": "%time x = 1\ndef decoder_mask(lengths, t):\n    return padding_mask_from_lengths(lengths, t) & causal_mask(t)\n",
    "5.3": (
        "import math, collections\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n" + _SDPA_BODY + "    return weights @ v, weights\n"
    ),
    "5.4": (
        _SELF_ATTENTION_INIT
        + "    def scaled_dot_product_attention(self, q, k, v, mask):  # my own method, named like the built-in\n"
        "        return scaled_dot_product_attention(q, k, v, mask)\n"
        "    def forward(self, x, mask=None):\n"
        "        return self.scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)\n"
    ),
}

# Crashes and hangs: a detached child that holds the grader's pipe open, then a cell that ignores its
# time limit, so that the grading process must be ended from outside.
CRASHES = {
    "5.2": (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sh', ['sh', '-c', 'sleep 600; echo {TOKEN}'])\n"
        "    os._exit(0)\n"
        "def decoder_mask(lengths, t):\n    return padding_mask_from_lengths(lengths, t) & causal_mask(t)\n"
    ),
    "5.3": (
        "import signal\n"
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "while True:\n    pass\n"
    ),
}


def _left_behind(token: str = TOKEN) -> list[str]:
    """Processes with the token (by default the session's) in their command line."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                pass
    return found


def _work_folders() -> set[str]:
    """The sandbox job folders this process made that still exist."""
    return {str(p) for p in sandbox.Worker.created if p.exists()}


@pytest.fixture(scope="module")
def graded(course_root, tmp_path_factory):
    """Each submission above, graded once in the bwrap sandbox; and what was left behind after each.

    The hostile ones are graded with the static check switched off, as if the closed world
    (tests/test_grader_closed_world.py) had a hole: what they test is the defence behind it, the sandbox and the
    watch. The honest one is graded as every submission is, static check included."""
    if not isolation.bwrap_available():
        pytest.skip("bubblewrap is not available here: install it with `make sandbox` (as root)")
    tmp = tmp_path_factory.mktemp("hostile")
    solution = course_root / "solutions" / CHAPTER
    before = _work_folders()
    os.environ["HOSTILE_TEST_SECRET"] = "1"
    try:
        out = {}
        for name, cells, kwargs in (
            ("earns", EARNS_NOTHING, {}),
            ("honest", HONEST, {}),
            ("crashes", CRASHES, {"cell_timeout": 15, "timeout": 300}),
        ):
            with pytest.MonkeyPatch.context() as patch:
                if name != "honest":
                    patch.setattr(grader, "static_problem", lambda *args, **kwargs: None)
                report = grade_notebook(
                    with_cells(solution, tmp, f"{name}.ipynb", cells), course_root, isolation="bwrap", **kwargs
                )
            out[name] = (report, _left_behind())
    finally:
        del os.environ["HOSTILE_TEST_SECRET"]
    out["folders"] = _work_folders() - before
    return out


def _outputs(report) -> dict[str, str]:
    return {t.name[9:12]: t.output for t in report.tests}


@needs_bwrap
def test_memorised_cases_earn_nothing(graded):
    report, _ = graded["earns"]
    assert scores(report)["5.1"] == 0, report.markdown()
    assert "differs from the reference" in _outputs(report)["5.1"]


@needs_bwrap
def test_solutions_and_reference_on_disk_are_out_of_reach(graded):
    report, _ = graded["earns"]
    assert scores(report)["5.2"] == 0 and "entries wrong" in _outputs(report)["5.2"], report.markdown()


@needs_bwrap
def test_builtin_through_a_string_is_caught_while_it_runs(graded):
    report, _ = graded["earns"]
    output = _outputs(report)["5.3"]
    assert scores(report)["5.3"] == 0, report.markdown()
    assert "called PyTorch's built-in `scaled_dot_product_attention`" in output


@needs_bwrap
def test_patched_machinery_forged_answers_and_detached_processes_earn_nothing(graded):
    report, left = graded["earns"]
    assert scores(report) == {"5.1": 0, "5.2": 0, "5.3": 0, "5.4": 0, "5.5": 0}, report.markdown()
    assert left == []  # the detached loop died with the sandbox, before the report was returned


@needs_bwrap
def test_honest_work_loses_nothing(graded):
    report, _ = graded["honest"]
    assert scores(report) == POINTS, report.markdown()
    assert "magic" in _outputs(report)["5.2"]  # said, and free


@needs_bwrap
def test_detached_pipe_holder_and_ignored_time_limit_end_in_bounded_time(graded):
    """Where the sandbox has a pids group, the fork itself fails (no process starts once the worker is ready) and
    5.2 loses its points; elsewhere the detached child is made, and 5.2 keeps them."""
    report, left = graded["crashes"]
    fork_fails = cgroups_here().pids
    expected = {"5.1": 2, "5.2": 0 if fork_fails else 3, "5.3": 0, "5.4": 0, "5.5": 0}
    assert scores(report) == expected, report.markdown()
    if fork_fails:
        assert "Resource temporarily unavailable" in _outputs(report)["5.2"]
    assert "did not stop" in _outputs(report)["5.3"] and "not graded" in _outputs(report)["5.4"]
    assert report.seconds < 120 and left == []


@needs_bwrap
def test_nothing_is_left_behind(graded):
    assert graded["folders"] == set()


def test_a_notebook_of_another_chapter_is_not_graded_as_this_one(course_root, tmp_path):
    path = tmp_path / CHAPTER
    path.write_bytes((course_root / "solutions" / "06_multihead_attention.ipynb").read_bytes())
    report = grade_notebook(path, course_root, chapter=5)
    assert report.score == 0 and report.tests == [] and "chapter 6" in report.problems[0]


def test_malformed_metadata_and_stray_ids_are_reported_not_crashes(course_root, tmp_path):
    cells = [
        {"cell_type": "code", "metadata": [], "source": "x"},
        {"cell_type": "code", "metadata": {"exercise": {"id": "5.x"}}, "source": "# EXERCISE 5.x\n"},
        {"cell_type": "code", "metadata": {"exercise": "5.1"}, "source": "y = 1"},
        {"cell_type": "code", "metadata": {"exercise": {"id": "99.1"}}, "source": "z = 1"},
    ]
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {"transformer_course": {"chapter": "five"}}}))
    report = grade_notebook(path, course_root)
    assert report.score == 0 and not any("internal" in p for p in report.problems), report.problems


@pytest.mark.parametrize(
    "source, refused",
    [
        ("# transformer_course.models.attention would do it\ndef attention_scores(q, k):\n    return q", None),
        ("s = 'F.scaled_dot_product_attention'\ndef f(q):\n    return q", None),
        (
            "class A:\n    def scaled_dot_product_attention(self, q):\n        return q\n"
            "    def forward(self, q):\n        return self.scaled_dot_product_attention(q)",
            None,
        ),
        ("def f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)", "scaled_dot_product_attention"),
        (
            "class A:\n    def scaled_dot_product_attention(self, q):\n        return F.scaled_dot_product_attention(q, q, q)",
            "scaled_dot_product_attention",
        ),
        ("from torch.nn.functional import *\ndef f(q):\n    return scaled_dot_product_attention(q, q, q)", "imports *"),
        ("from torch.nn.functional import scaled_dot_product_attention as s", "scaled_dot_product_attention"),
        ("import transformer_course.models.attention as a", "reference package"),
        ("%time from transformer_course import attention", None),
        ("from torch.overrides import _pop_mode", "imports from `torch.overrides`"),
        ("import sys\nsys.stdout.write('x')", "imports `sys`"),
    ],
)
def test_static_check_reads_code_not_text(source, refused):
    problem = static_problem(source, registry.get("5.3"), {"scaled_dot_product_attention"})
    assert (problem is None) if refused is None else (refused in problem), problem


def test_reports_escape_what_they_quote():
    report = Report("<img src=x onerror=alert(1)>.ipynb", 5, problems=["a | b <script>alert(1)</script> **bold**"])
    report.tests.append(Result("Exercise 5.1: x", 0, 2, "```\n# not a heading\n```", "failed"))
    text = report.markdown()
    assert "<script>" not in text and "<img" not in text and "\\|" in text and "\\*\\*bold" in text
    assert "````text" in text  # a fence longer than any run of backticks inside
    assert csv_cell("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")" and csv_cell("alice") == "alice"


def test_reports_show_control_characters_as_escapes(tmp_path):
    # a terminal's colour codes, a carriage return that redraws a line, a NUL, a right-to-left override
    printed = "\x1b[2J\x1b[32mall tests passed\x1b[0m\rscore 10/10\x00 \u202eevil\r\nnext line\ttab"
    report = Report("s.ipynb", 5, problems=[f"error: {printed}"])
    report.tests.append(Result("Exercise 5.1: x", 0, 2, printed, "failed"))
    report.write(tmp_path)
    for text in ((tmp_path / "summary.md").read_text(), (tmp_path / "results.json").read_text()):
        assert not any(ch in text for ch in "\x1b\x00\r\u202e")
        assert "x1b[32mall tests passed" in text and "u202eevil" in text and "x0dscore" in text
    output = json.loads((tmp_path / "results.json").read_text())["tests"][0]["output"]
    assert output.endswith("\nnext line\ttab")  # a Windows line end is a line end; a tab stays a tab


def test_not_attempted_is_not_failed(course_root):
    report = grade_notebook(course_root / "notebooks" / CHAPTER, course_root)
    assert {t.verdict for t in report.tests} == {"not attempted"} and "| not attempted |" in report.markdown()


def test_command_line_on_a_hostile_folder(course_root, tmp_path, capsys):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "=cmd()|calc.ipynb").write_text("{not json")
    (folder / "summary.ipynb").write_text("{not json")
    (folder / "notes.txt").write_text("not a notebook")
    out = folder / "results"  # inside the submissions folder: never graded on a second run
    for _ in range(2):
        assert main([str(folder), "--out", str(out), "--root", str(course_root), "--chapter", "5"]) == 1
        err = capsys.readouterr().err
        assert "notes.txt" in err and "results" not in err  # the second run did not look at the first one's reports
    rows = list(csv.reader((out / "scores.csv").open()))
    assert len(rows) == 3 and rows[1][0].startswith("'=")  # two notebooks; the formula is text
    assert "notes.txt" in (out / "summary.md").read_text()
    assert (out / "summary-2" / "summary.md").exists()  # the submission named summary did not clobber the overview
    assert main([str(folder), "--out", "/proc/no/such"]) == 2
    assert "cannot write reports" in capsys.readouterr().err


def test_a_folder_run_survives_files_named_like_its_overview_and_lists_what_it_did_not_grade(course_root, tmp_path):
    # Issue 32: summary.md.ipynb and scores.csv.ipynb took the overview's names (IsADirectoryError after grading
    # everything); links and special files were dropped silently; two students' alice.ipynb looked identical.
    import os

    folder = tmp_path / "subs"
    (folder / "bob").mkdir(parents=True)
    blank = (course_root / "notebooks" / CHAPTER).read_text()
    for name in ("summary.md.ipynb", "scores.csv.ipynb", "alice.ipynb", "bob/alice.ipynb"):
        (folder / name).write_text(blank)
    (folder / "link.ipynb").symlink_to(course_root / "solutions" / CHAPTER)  # would earn full marks if followed
    os.mkfifo(folder / "pipe.ipynb")
    out = tmp_path / "out"
    assert main([str(folder), "--out", str(out), "--root", str(course_root), "--quiet"]) == 1
    summary = (out / "summary.md").read_text()
    rows = list(csv.reader((out / "scores.csv").open()))
    assert sorted(r[0] for r in rows[1:]) == ["alice.ipynb", "bob/alice.ipynb", "scores.csv.ipynb", "summary.md.ipynb"]
    assert all(r[2] == "0" for r in rows[1:])  # the link to the solution was not graded
    assert "| bob/alice.ipynb |" in summary and "| alice.ipynb |" in summary
    assert "link.ipynb: a symbolic link, which grading does not follow" in summary
    assert "pipe.ipynb: not a regular file" in summary
    assert (out / "summary.md-2" / "summary.md").exists() and (out / "scores.csv-2" / "results.json").exists()


def test_missing_sandbox_is_a_clear_warning_or_error(course_root, monkeypatch):
    monkeypatch.setattr(isolation, "_bwrap_works", False)
    with pytest.raises(isolation.IsolationError, match="bubblewrap"):
        isolation.resolve("bwrap")
    mode, warning = isolation.resolve("auto")
    assert mode == "process" and "WARNING" in warning and "bubblewrap is not available" in warning
    monkeypatch.setattr(isolation, "_bwrap_works", True)  # installed, and the process mode chosen all the same
    mode, warning = isolation.resolve("process")
    assert mode == "process" and "--isolation process was chosen" in warning and "not available" not in warning
    monkeypatch.setattr(isolation, "_bwrap_works", False)
    report = grade_notebook(course_root / "notebooks" / CHAPTER, course_root, isolation="auto")
    assert "WARNING" in report.markdown() and report.score == 0


@needs_bwrap
def test_killing_the_grader_ends_its_sandbox(tmp_path):
    # The grader itself killed (an instructor's Ctrl-C escalated, an out-of-memory kill, a CI job cancelled): the
    # sandbox and every process the submission started in it die with it (--die-with-parent and the PID namespace).
    import signal
    import subprocess
    import sys
    import time

    token = TOKEN + "-orphan"
    script = (
        "import sys\n"
        "from transformer_course.grading.host import sandbox\n"
        "w = sandbox.Worker('bwrap')\n"
        "assert w.wait_ready(60)\n"
        "source = ('import subprocess\\n'\n"
        f"          \"subprocess.Popen(['sh', '-c', 'sleep 600; echo {token}'], start_new_session=True)\\n\")\n"
        "w.request({'op': 'exec', 'source': source, 'label': 'detach', 'timeout': 20}, 20)\n"
        "print('started', flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    grader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert grader.stdout.readline().strip() == "started"
        assert _left_behind(token), "the submission's detached process did not start"
        grader.send_signal(signal.SIGKILL)
        grader.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _left_behind(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _left_behind(token) == []
    finally:
        grader.kill()
        grader.wait()


def test_what_a_submission_writes_into_a_report_is_capped_and_cannot_forge_a_line():
    # Issue 32: an error message from a hooked compile reached the report uncapped (a forged "Score: 14 / 14" line,
    # a 20 MB results.json); 10,000 stray exercise ids gave 10,000 note lines.
    import json as json_module

    from transformer_course.grading.host.report import MAX_PROBLEMS, Report, TestResult

    forged = "oops\n**Score: 14 / 14**\n" + "x" * 20_000_000
    report = Report(
        submission="s.ipynb",
        problems=[forged] + [f"note: stray exercise id {i}" for i in range(10_000)],
        tests=[TestResult("Exercise 5.1: attention scores", 0, 2, "y" * 5_000_000)],
    )
    text = report.markdown()
    assert len(text) < 30_000 and text.count("\n- ") <= MAX_PROBLEMS + 1
    assert "9,981 more problems not shown" in text and "more characters not shown" in text
    assert text.count("**Score:") == 1  # only the grader's own; the submission's is escaped, inside its item
    data = report.gradescope()
    assert len(json_module.dumps(data)) < 30_000
    assert all(line.startswith("- ") for line in data["output"].splitlines())


@pytest.mark.parametrize("case", ["no metadata, a scratch cell of chapter 4", "metadata claims chapter 6"])
def test_the_chapter_is_decided_by_the_evidence_of_the_whole_file(course_root, tmp_path, case):
    # Issue 32: a chapter-5 notebook whose editor dropped the metadata, with one pasted `# EXERCISE 4.2` cell at the
    # end, was graded as chapter 4 (0 points); metadata claiming chapter 6 gave 0/0.
    nb = json.loads((course_root / "solutions" / CHAPTER).read_text())
    if case.startswith("no metadata"):
        nb["metadata"].pop("transformer_course", None)
        nb["cells"].append({"cell_type": "code", "metadata": {}, "source": "# EXERCISE 4.2\nx = 1", "outputs": []})
    else:
        nb["metadata"]["transformer_course"] = {"chapter": 6}
    path = tmp_path / "my_homework.ipynb"
    path.write_text(json.dumps(nb))
    report = grade_notebook(path, course_root)
    assert report.chapter == 5 and report.score == report.max_score == sum(full_points(5).values()), report.markdown()
    if case.startswith("no metadata"):
        assert any("exercise cell 4.2 is not an exercise of chapter 5; ignored" in p for p in report.problems)
    # With --chapter, the cells of that chapter are graded and the others listed as ignored.
    report = grade_notebook(path, course_root, chapter=5)
    assert report.score == report.max_score > 0


def test_jobs_grade_several_submissions_at_once_with_the_same_reports(course_root, tmp_path):
    # Issue 32: a class folder was graded one submission after another. --jobs N grades N at once, each in a process
    # and a sandbox of its own; with a key (the seed hashes each file), the reports are those of one at a time.
    folder = tmp_path / "subs"
    folder.mkdir()
    solved, blank = (course_root / d / CHAPTER for d in ("solutions", "notebooks"))
    for i in range(2):
        shutil.copy(solved if i % 2 == 0 else blank, folder / f"student{i}.ipynb")
    key = tmp_path / "key"
    key.write_text("a secret")
    outputs = {}
    for jobs in (1, 2):
        out = tmp_path / f"out{jobs}"
        args = [str(folder), "--out", str(out), "--root", str(course_root), "--key-file", str(key), "--quiet"]
        assert main(args + ["--jobs", str(jobs)]) == 1
        outputs[jobs] = {
            p.parent.name: {k: v for k, v in json.loads(p.read_text()).items() if k != "execution_time"}
            for p in out.glob("*/results.json")
        }
        assert (out / "scores.csv").read_text().count("\n") == 3
    assert outputs[1] == outputs[2] and len(outputs[1]) == 2
    assert [outputs[2][f"student{i}"]["score"] for i in range(2)] == [14, 0]
    with pytest.raises(SystemExit):
        main([str(folder), "--jobs", "0"])
