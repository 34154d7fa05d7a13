"""The grader, end to end, on the chapter notebooks: right answers, wrong answers, and hostile ones.

Every graded chapter gets the generic tests (full marks for the solution, zero for the blank student
notebook, each wrong answer of tests/wrong_answers/chNN.py loses its points); the robustness tests
(hostile, malformed, endless, crashing submissions) run on chapter 5. The attacks on the sandbox and the
reports, one per class, are in test_grader_hostile.py.
"""

import ast
import csv
import json
import shutil
import subprocess
import sys

import pytest

from gradertools import full_points, graded_chapters, header, notebook_name, scores, with_cells, wrong_rounds
from transformer_course.grading import registry
from transformer_course.grading.host import grader
from transformer_course.grading.host.grader import grade_notebook
from wrong_answers.ch05 import HOSTILE, INFINITE_LOOP, KILLS_KERNEL, WRONG_ROUNDS

CHAPTER = "05_self_attention.ipynb"
SEED = 12345  # the hidden cases' seed is secret and drawn per run; a test that compares two runs fixes it
POINTS = full_points(5)


def _with_cells(course_root, tmp_path, name, replacements=None, edit=None):
    return with_cells(course_root / "solutions" / CHAPTER, tmp_path, name, replacements, edit)


@pytest.fixture(scope="module")
def solution_report(course_root):
    return grade_notebook(course_root / "solutions" / CHAPTER, course_root, seed=SEED)


@pytest.mark.parametrize("chapter", graded_chapters())
def test_solution_gets_full_marks(course_root, chapter, solution_report):
    report = (
        solution_report
        if chapter == 5
        else grade_notebook(course_root / "solutions" / notebook_name(chapter), course_root)
    )
    assert report.problems == [], report.problems  # no cell of the course notebook failed either
    assert scores(report) == full_points(chapter)
    assert report.score == report.max_score > 0


@pytest.mark.parametrize("chapter", graded_chapters())
def test_untouched_student_notebook_gets_zero(course_root, chapter):
    report = grade_notebook(course_root / "notebooks" / notebook_name(chapter), course_root)
    assert report.max_score == sum(full_points(chapter).values()) and report.score == 0
    assert all("not attempted" in t.output for t in report.tests)
    assert report.problems == [], report.problems  # the fallbacks keep every given cell working


@pytest.mark.parametrize("chapter, index, wrong", wrong_rounds(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_each_wrong_answer_loses_its_exercise_points(course_root, tmp_path, chapter, index, wrong):
    solution = course_root / "solutions" / notebook_name(chapter)
    report = grade_notebook(with_cells(solution, tmp_path, f"wrong{index}.ipynb", wrong), course_root)
    expected = {ex: 0 if ex in wrong else points for ex, points in full_points(chapter).items()}
    assert scores(report) == expected, report.markdown()


def test_same_submission_same_score(course_root, tmp_path, solution_report):
    again = grade_notebook(course_root / "solutions" / CHAPTER, course_root, seed=SEED)
    strip = lambda r: {k: v for k, v in r.gradescope().items() if k != "execution_time"}
    assert strip(again) == strip(solution_report)


def test_edited_checks_and_given_cells_change_nothing(course_root, tmp_path):
    def edit(nb):
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and source.lstrip().startswith(
                tuple(e.name for e in registry.chapter_exercises(5))
            ):
                cell["source"] = "raise SystemExit('check cell removed')"  # every check cell
            elif cell["cell_type"] == "code" and "import" in source and "exercise" not in cell["metadata"]:
                cell["source"] = source + "\nimport torch\ntorch.Tensor.__matmul__ = lambda a, b: a.sum()\n"

    submission = _with_cells(course_root, tmp_path, "edited.ipynb", edit=edit)
    # a wrong 5.1 as well, with the check cell that would reveal it removed
    nb = json.loads(submission.read_text())
    report = grade_notebook(
        _with_cells(course_root, tmp_path, "edited.ipynb", {"5.1": WRONG_ROUNDS[0]["5.1"]}, edit), course_root
    )
    assert nb["cells"] and scores(report) == {**POINTS, "5.1": 0}


def test_shortcuts_earn_nothing(course_root, tmp_path):
    report = grade_notebook(_with_cells(course_root, tmp_path, "hostile.ipynb", HOSTILE), course_root)
    assert report.score == 0, report.markdown()
    outputs = {t.name[9:12]: t.output for t in report.tests}
    assert "reference package" in outputs["5.1"]
    # the forged probe message and the reach for the self-check's globals are refused before they run (the closed
    # world: tests/test_grader_closed_world.py); behind it, the worker holds no IPython and no course code to reach
    assert outputs["5.2"].startswith("refused:") and "IPython.display" in outputs["5.2"]
    assert "scaled_dot_product_attention" in outputs["5.3"] and "refused" in outputs["5.3"]
    assert outputs["5.4"].startswith("refused:") and "__globals__" in outputs["5.4"]


def test_infinite_loop_is_cut_off_and_reported(course_root, tmp_path):
    submission = _with_cells(course_root, tmp_path, "loop.ipynb", {"5.1": INFINITE_LOOP})
    # 10 s: long enough for every given cell on a loaded 2-core machine, short enough for a test
    report = grade_notebook(submission, course_root, cell_timeout=10, timeout=300)
    assert scores(report) == {**POINTS, "5.1": 0}, report.markdown()
    assert "time limit" in report.tests[0].output


def test_total_time_limit_still_reports(course_root, tmp_path):
    submission = _with_cells(course_root, tmp_path, "loop.ipynb", {"5.1": INFINITE_LOOP})
    report = grade_notebook(submission, course_root, cell_timeout=60, timeout=8)
    assert report.score == 0 and any("total time limit" in p for p in report.problems)
    # a cell that loops as it runs, stopped by the total limit: the report says which limit (it said "the 60 s limit
    # per cell", which the cell never reached)
    submission = _with_cells(course_root, tmp_path, "top_loop.ipynb", {"5.1": "while True:\n    pass\n"})
    text = grade_notebook(submission, course_root, cell_timeout=60, timeout=8).markdown()
    assert "limit per cell" not in text and "what was left of the submission's total time limit of 8 s" in text, text


def test_a_cell_that_kills_the_kernel_is_reported(course_root, tmp_path, monkeypatch):
    # `import os` is refused before it runs; with the static check off, as if it had a hole, the worker's death is
    # what is tested
    monkeypatch.setattr(grader, "static_problem", lambda *args, **kwargs: None)
    report = grade_notebook(_with_cells(course_root, tmp_path, "exit.ipynb", {"5.3": KILLS_KERNEL}), course_root)
    assert scores(report) == {"5.1": 2, "5.2": 3, "5.3": 0, "5.4": 0, "5.5": 0}
    assert any("killed by the submission" in p for p in report.problems), report.problems
    assert "killed by the submission" in report.tests[2].output and "not graded" in report.tests[3].output


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("essay.txt", b"my answers", "is not a notebook"),
        ("trunc.ipynb", b'{"cells": [{"cell_type": "code", "source": "x', "truncated"),
        ("garbage.ipynb", b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file"),
        ("list.ipynb", b"[1, 2, 3]", "not a Jupyter notebook"),
        ("empty.ipynb", b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "has no exercise cells"),
        (
            "weird.ipynb",
            b'{"cells": [1, {"cell_type": "code", "source": 5}, {"source": ["# EXERCISE 9.1"]}]}',
            "no exercise cells",
        ),
    ],
)
def test_malformed_submissions_get_a_report(course_root, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    report = grade_notebook(path, course_root)
    assert report.score == 0 and any(message in p for p in report.problems), report.problems


def test_missing_and_duplicated_cells_are_reported(course_root, tmp_path):
    def edit(nb):
        cells = nb["cells"]
        ex_cells = [c for c in cells if "exercise" in c["metadata"]]
        cells.remove(ex_cells[3])  # 5.4 missing
        copy = dict(ex_cells[0], metadata={})
        copy["source"] = header("5.1") + WRONG_ROUNDS[0]["5.1"]
        cells.append(copy)  # a second 5.1, found by its header: the first one counts

    report = grade_notebook(_with_cells(course_root, tmp_path, "dup.ipynb", edit=edit), course_root)
    assert scores(report) == {**POINTS, "5.4": 0}
    assert any("5.4 is missing" in p for p in report.problems) and any("more than once" in p for p in report.problems)


def test_command_line_on_a_folder(course_root, tmp_path):
    folder = tmp_path / "subs"
    (folder / "alice").mkdir(parents=True)
    shutil.copy(course_root / "solutions" / CHAPTER, folder / "alice" / CHAPTER)
    (folder / "bob.ipynb").write_text("{not json")
    out = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "transformer_course.grade", str(folder), "--out", str(out), "--root", str(course_root)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # bob did not reach the pass mark
    alice = json.loads((out / "alice__05_self_attention" / "results.json").read_text())
    full = sum(full_points(5).values())
    assert alice["score"] == alice["max_score"] == full and len(alice["tests"]) == len(full_points(5))
    assert all({"name", "score", "max_score", "output", "status"} <= set(t) for t in alice["tests"])
    assert "not valid JSON" in (out / "bob" / "summary.md").read_text()
    # File names are escaped for Markdown in the summary: an underscore would otherwise start emphasis.
    summary = (out / "summary.md").read_text()
    assert f"| alice/05\\_self\\_attention.ipynb | alice\\_\\_05\\_self\\_attention/ | {full} | {full} |" in summary
    assert (out / "scores.csv").read_text().count("\n") == 3


def test_command_line_usage_errors(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "transformer_course.grade", str(tmp_path / "nope.ipynb")], capture_output=True, text=True
    )
    assert run.returncode == 2 and "no such file or folder" in run.stderr


def test_reports_of_same_named_submissions_do_not_overwrite_each_other():
    from transformer_course.grading.host.cli import _unique

    assert _unique("05_self_attention", set()) == "05_self_attention"
    assert _unique("05_self_attention", {"05_self_attention", "05_self_attention-2"}) == "05_self_attention-3"


def test_a_notebook_without_exercises_is_skipped_not_failed(course_root, tmp_path):
    # The classroom's workflow grades every notebook of notebooks/: a chapter's second notebook (no exercises) must
    # neither fail the run nor earn anything; a copy with an exercise cell pasted in is graded as usual.
    folder = tmp_path / "subs"
    folder.mkdir()
    shutil.copy(course_root / "notebooks" / "08_transformer_vs_gru.ipynb", folder)
    shutil.copy(course_root / "solutions" / CHAPTER, folder)
    out = tmp_path / "results"
    command = [sys.executable, "-m", "transformer_course.grade", str(folder), "--out", str(out)]
    run = subprocess.run([*command, "--root", str(course_root)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr  # chapter 5 at full marks, the other one skipped
    assert (
        "08_transformer_vs_gru.ipynb: a notebook without exercises (chapter 8's are in 08_transformer.ipynb)"
        in run.stderr
    )
    assert "Not graded" in (out / "summary.md").read_text() and not (out / "08_transformer_vs_gru").exists()

    nb = json.loads((folder / "08_transformer_vs_gru.ipynb").read_text())
    nb["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "# EXERCISE 8.5 (2 points): the warm-up schedule\ndef noam_lr(step, d_model, warmup, factor=1.0):\n    return step",
        }
    )
    (folder / "08_transformer_vs_gru.ipynb").write_text(json.dumps(nb))
    report = grade_notebook(folder / "08_transformer_vs_gru.ipynb", course_root)
    assert report.max_score == sum(full_points(8).values()) and report.score == 0, report.problems


def test_a_submission_without_exercise_cells_is_told_where_they_are(course_root, tmp_path):
    path = tmp_path / "08_mine.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    report = grade_notebook(path, course_root)
    assert report.max_score == 0 and any(
        "chapter 8's exercises are in 08_transformer.ipynb" in p for p in report.problems
    )


def test_timing_magics_and_display_in_correct_cells_cost_nothing_and_are_reported(course_root, tmp_path):
    # Issue 32: `%%time` above a correct exercise refused the whole cell, and display(...) raised NameError in
    # the worker; both are common in real notebooks. A cell magic whose body is Python is graded on its body.
    def edit(nb):
        for cell in nb["cells"]:
            text = "".join(cell["source"])
            if text.startswith("# EXERCISE 5.1"):
                cell["source"] = "%%time\n" + text
            elif text.startswith("# EXERCISE 5.3"):
                cell["source"] = text + "\ndisplay(causal_mask(3))\n"
            elif text.startswith("# EXERCISE 5.2"):
                cell["source"] = "%%bash\necho hello\n"

    report = grade_notebook(_with_cells(course_root, tmp_path, "magics.ipynb", edit=edit), course_root, seed=SEED)
    got = scores(report)
    assert got["5.1"] == POINTS["5.1"] and got["5.3"] == POINTS["5.3"], report.markdown()
    assert got["5.2"] == 0
    assert "cell magic (%%...) whose body is not Python" in report.markdown()
    assert "IPython magic or shell line(s) were not run during grading" in report.markdown()


def test_class_reports_name_the_student_the_chapter_and_the_real_maximum(course_root, tmp_path):
    # Issue 37: summary.md named files only (20 rows of 05_self_attention.ipynb), a broken file scored 0 of 0, and
    # under --chapter 5 a chapter-6 notebook scored 0 of 0 rather than "wrong chapter, 0 of 14". Nothing here runs.
    import csv
    from pathlib import Path

    from transformer_course.grading.host.cli import main
    from transformer_course.grading.host.overview import COLUMNS

    folder = tmp_path / "subs"
    (folder / "carol" / "notebooks").mkdir(parents=True)  # a student's repository, as GitHub Classroom hands it in
    shutil.copy(course_root / "notebooks" / notebook_name(6), folder / "carol" / "notebooks")
    (folder / "bob.ipynb").write_text("{not json")
    (folder / "05_dave.ipynb").write_text('{"cells": [')
    full = str(sum(full_points(5).values()))
    out = tmp_path / "results"
    args = [str(folder), "--out", str(out), "--root", str(course_root), "--quiet"]
    assert main([*args, "--chapter", "5"]) == 1  # below the pass mark, as before
    with open(out / "scores.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ())[: len(COLUMNS)] == COLUMNS
        rows = {r["student"]: r for r in reader}
    columns = ("chapter", "score", "max_score", "percent", "status")
    assert {student: tuple(r[c] for c in columns) for student, r in rows.items()} == {
        "carol": ("5", "0", full, "0.0", "wrong chapter"),
        "bob": ("5", "0", full, "0.0", "unreadable"),
        "05_dave": ("5", "0", full, "0.0", "unreadable"),
    }
    assert (out / rows["carol"]["report"]).is_file() and rows["carol"]["submission"] == str(
        Path("carol", "notebooks", notebook_name(6))
    )
    assert "being graded (--chapter)" in rows["carol"]["problems"]
    summary = (out / "summary.md").read_text()
    assert "3 submission(s) graded: 1 wrong chapter, 2 unreadable." in summary
    assert f"| bob | 5 | bob.ipynb | bob/ | 0 | {full} | unreadable | bob.ipynb is not valid JSON" in summary
    bob = json.loads((out / "bob" / "results.json").read_text())
    assert (bob["score"], bob["max_score"]) == (0, int(full))  # Gradescope reads 0 of 14 too
    assert "Student: bob. Status: unreadable" in (out / "bob" / "summary.md").read_text()

    # Without --chapter, a broken file's chapter comes from its name (05_...); else it cannot be known: no chapter,
    # no maximum, no percentage, rather than a made-up one.
    shutil.rmtree(folder / "carol")
    assert main([*args, "--exit-zero"]) == 0  # every file graded: a low score is no error with --exit-zero
    with open(out / "scores.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert [rows["bob"][c] for c in columns] == ["", "0", "", "", "unreadable"]
    assert [rows["05_dave"][c] for c in columns] == ["5", "0", full, "0.0", "unreadable"]


def test_report_status_is_decided_by_the_grader_s_own_words():
    from pathlib import Path

    from transformer_course.grading.host.report import STATUSES, Report
    from transformer_course.grading.host.report import TestResult as Result

    def report(scores=(), problems=(), **kw):
        tests = [Result(f"Exercise 5.{i}: x", s, 2, "", "") for i, s in enumerate(scores, 1)]
        return Report("a.ipynb", 5, tests=tests, problems=list(problems), **kw)

    cut = "; the exercises from that point on got no points"
    cases = {
        "full marks": report([2, 2]),
        "below full marks": report([2, 0]),
        "timed out": report([2, 0], [f"the submission ran past the total time limit of 600 s{cut}"]),
        "internal error": Report.failed(Path("a.ipynb"), RuntimeError("boom")),
        "wrong chapter": report(
            problems=["a.ipynb holds ... chapter 5 is being graded (--chapter); nothing was graded"]
        ),
        "unreadable": report(problems=["a.ipynb is not valid JSON (JSON error at line 1)"]),
    }
    assert {status: r.status for status, r in cases.items()} == {s: s for s in STATUSES}
    assert cases["unreadable"].max_score == 0 and report(chapter_max=14).max_score == 14
    # A file name or an error message of the student's, quoted in a problem, cannot choose the status.
    forged = "internal grader error (x); please tell the course staff.ipynb is not valid JSON"
    assert report(problems=[forged]).status == "unreadable"
    quoted = f"the course's code `y = f(x)` raised ValueError: the submission ran past the total time limit{cut}"
    assert report([2, 0], [quoted]).status == "below full marks"
    assert report([2, 2], outcome="internal error").status == "internal error"


def test_student_names_come_from_the_folder_or_the_file():
    from pathlib import Path

    from transformer_course.grading.host.overview import student_of

    subs = Path("subs")
    assert student_of(subs / "alice" / "notebooks" / CHAPTER, subs) == "alice"  # per-student folders
    assert student_of(subs / "bob_12345_05.ipynb", subs) == "bob_12345_05"  # one folder, files named by student
    assert student_of(subs / CHAPTER, subs) == CHAPTER[:-6]  # the folder given is the class's, not a student's
    assert student_of(Path("carol") / CHAPTER, None) == "carol"  # given by path, not renamed: its folder
    assert student_of(Path("carol") / "mine.ipynb", None) == "mine" and student_of(Path(CHAPTER), None) == CHAPTER[:-6]


def test_exit_codes_tell_a_grader_failure_from_a_low_score(course_root, tmp_path, monkeypatch, capsys):
    # Exit 1 means "graded, below the pass mark" (reports written; CI jobs fail on it, --exit-zero makes it 0);
    # 2 a usage error; 3 an error of the grader's own, which must never read as a student's low score.
    import csv

    from transformer_course.grading.host import cli

    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "bob.ipynb").write_text("{not json")
    (folder / CHAPTER).write_text("{not json")
    out = tmp_path / "results"
    args = [str(folder), "--out", str(out), "--root", str(course_root), "--quiet"]
    assert cli.main(args) == 1 and cli.main([*args, "--exit-zero"]) == 0
    with pytest.raises(SystemExit) as usage:
        cli.main([*args, "--chapter", "42"])
    assert usage.value.code == 2 and "chapter 42 has no graded exercises" in capsys.readouterr().err

    def crash(*args, **kwargs):
        raise RuntimeError("a bug of the grader's own")

    monkeypatch.setattr(cli, "grade_notebook", crash)
    assert cli.main([*args, "--exit-zero"]) == 3
    assert "the grader failed on" in capsys.readouterr().err
    with open(out / "scores.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    full = str(sum(full_points(5).values()))
    assert [rows[CHAPTER[:-6]][c] for c in ("chapter", "max_score", "status")] == ["5", full, "internal error"]
    assert "a bug of the grader's own" in rows["bob"]["problems"]
    monkeypatch.setattr(cli, "write_overview", crash)  # a crash outside any one submission: 3, not a traceback's 1
    assert cli.main(args) == 3 and "internal error" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_grade_treats_a_low_score_as_an_outcome(course_root):
    run = subprocess.run(
        ["make", "-n", "grade", "SUBMISSION=x.ipynb", "GRADE_ARGS=--chapter 5"],
        cwd=course_root,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and "--exit-zero --chapter 5" in run.stdout, run.stdout + run.stderr


def test_the_worker_starts_without_torch_dynamo_and_its_watch_still_sees_forbidden_calls(tmp_path):
    # PyTorch wraps a dispatch mode's handler in torch._dynamo.disable unless the mode opts out: importing
    # torch._dynamo made up about 2 of the 4.5 s a worker took to start. The worker opts out (graded code cannot
    # reach torch.compile); its watch must still record a forbidden built-in, at both levels, once per name.
    from transformer_course.grading.host.sandbox import WORKER_FILES

    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys\n"
        "sys.argv = ['worker', str(os.open(os.devnull, os.O_WRONLY))]\n"
        f"sys.path[:0] = {sorted({str(path.parent) for path in WORKER_FILES.values()})!r}\n"  # worker.py, codec.py
        "import codec as course_codec\n"
        "sys.modules['course_codec'] = course_codec\n"
        "import worker, torch\n"
        "worker._warm_up()\n"
        "dynamo_at_start = 'torch._dynamo' in sys.modules\n"
        "watch = worker._Watch(['scaled_dot_product_attention', 'softmax'])\n"
        "q = torch.ones(1, 2, 3)\n"
        "with worker._watching(watch):\n"
        "    for _ in range(3):\n"
        "        torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"
        "        torch.softmax(q, -1)\n"
        "print(dynamo_at_start, 'torch._dynamo' in sys.modules, watch.seen, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    at_start, after, seen = done.stderr.strip().split(" ", 2)
    assert at_start == "False" and after == "False", done.stderr
    # softmax at the Python level and as the operator aten._softmax; each name once, however often it is called
    expected = ["scaled_dot_product_attention", "softmax", "torch.ops.aten._softmax"]
    assert sorted(ast.literal_eval(seen)) == expected, seen


def test_an_input_changed_in_place_is_named_by_the_grader_and_the_self_check(course_root, tmp_path):
    # Issue 57: `logits /= temperature` returns the right values and divides the caller's logits. The self-check used
    # to run the reference on the divided logits ("differs from the reference by up to ..."), the grader passed it.
    from transformer_course.grading.kernel.attempt import evaluate
    from wrong_answers.ch10 import WRONG_ROUNDS as CH10

    code = next(r["10.3"] for r in CH10 if "logits /= temperature" in r.get("10.3", ""))
    message = registry.changed_message(["logits"])
    solution = course_root / "solutions" / notebook_name(10)
    report = grade_notebook(with_cells(solution, tmp_path, "in_place.ipynb", {"10.3": code}), course_root)
    graded = next(t for t in report.tests if t.name.startswith("Exercise 10.3"))
    assert graded.score == 0 and message in graded.output, graded.output
    namespace: dict = {}
    exec("import math\nimport torch\n" + code, namespace)
    status, passed, total, text = evaluate(registry.get("10.3"), namespace["filter_logits"])
    assert status == "failed" and text is not None and message in text, text
    assert "differs from the reference" not in text  # what it once said: the reference run on the divided logits


def test_the_gradebook_has_a_row_per_student_and_the_exercises_in_the_chapters_order(tmp_path):
    # scores.csv's exercise columns sorted as text (1.x, 10.x, 2.x ...), and nothing summed a student's chapters
    from transformer_course.grading.host.overview import chapter_max, write_overview
    from transformer_course.grading.host.report import Report
    from transformer_course.grading.host.report import TestResult as Result

    def report(student, chapter, scores):
        tests = [Result(f"Exercise {chapter}.{i + 1}: x", s, 5, "") for i, s in enumerate(scores)]
        return Report(f"{student}-{chapter}.ipynb", chapter, tests, student=student)

    reports = [
        ("a2", report("alice", 2, [1, 2])),
        ("a10", report("alice", 10, [5])),
        ("a10b", report("alice", 10, [3])),  # a second try at chapter 10: the better one counts
        ("b2", report("bob", 2, [0, 1])),
    ]
    write_overview(tmp_path, reports, [], {})
    with open(tmp_path / "scores.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header[-3:] == ["Exercise 2.1: x", "Exercise 2.2: x", "Exercise 10.1: x"]
    with open(tmp_path / "gradebook.csv", newline="") as f:
        rows = list(csv.reader(f))
    m2, m10 = chapter_max(2), chapter_max(10)
    assert rows[0] == ["student", f"chapter 2 (of {m2:g})", f"chapter 10 (of {m10:g})", "total", "max_total"]
    assert rows[1:] == [["alice", "3", "5", "8", f"{m2 + m10:g}"], ["bob", "1", "", "1", f"{m2 + m10:g}"]]
