"""What Gradescope runs for every submission (``run_autograder``): grade the chapter's notebook, and always leave
results/results.json. ``transformer_course.grading.kits.gradescope`` builds the kit and says what it holds.

    python -s -P -m transformer_course.grading.kits.gradescope_kit.autograde --kit /autograder/source/kit.json

1. Picks the notebook: the one named as the chapter's notebook (say ``05_self_attention.ipynb``) anywhere in
   submission/, the others listed as not graded; else the only notebook submitted, whatever its name; else (no
   notebook, several with none of them so named, or two so named) no grading, and a report that says why.
2. Decides the isolation (kit.json's, or ``$COURSE_ISOLATION``): bubblewrap where it can create its namespaces;
   else, under "auto", a plain process run as an unprivileged user (``course-grader``, which setup.sh creates, or
   ``nobody``) when the autograder runs as root; under "bwrap", no grading and a report that says the sandbox is
   unavailable. The report's first line says which isolation graded it.
3. Copies the notebook into a fresh folder and grades it in a process of its own (``grade-one``, which makes itself
   undumpable, so that the student's code, even as the same user, cannot read its memory or its descriptors).
   That process writes no file: its report comes back on a pipe, with a nonce that only it knew.
4. Ends every process that the grading left behind (this process is their subreaper), then writes results.json
   into a fresh folder of its own and copies it to results/results.json, replacing whatever was there. Every
   failure (no notebook, two candidates, the sandbox unavailable, a grader that crashed or ran out of time) still
   ends in a valid results.json, with every exercise at 0 and the reason.

``$AUTOGRADER_ROOT`` (default /autograder) holds source/, submission/ and results/; ``$COURSE_ISOLATION``,
``$COURSE_TIMEOUT``, ``$COURSE_GRADING_USER`` (empty: no other user) and ``$COURSE_GRADER_KEY`` override the kit.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import processes
from .choice import CannotGrade, choose_notebook, failure_results
from .processes import STARTUP, end_leftovers, grading_user, prctl, probe_user, run_as

DEFAULT_TIMEOUT = 420  # seconds of grading, under Gradescope's default limit of 10 minutes with room to start


def _grader_command() -> list[str]:
    return [sys.executable, "-s", "-P", "-m", "transformer_course.grading.kits.gradescope_kit.autograde", "grade-one"]


def grade_submission(kit: dict, autograder: Path) -> tuple[dict, str]:
    """Grade the submission in ``autograder``/submission: (Gradescope's results, the Markdown summary for the log).
    Raises CannotGrade when it cannot grade."""
    from ...host.isolation import IsolationError
    from ...host.isolation import resolve as resolve_isolation

    course = autograder / "source" / "course"
    expected = kit["notebook"]
    chosen, notes = choose_notebook(autograder / "submission", expected)
    mode = os.environ.get("COURSE_ISOLATION") or kit.get("isolation", "auto")
    try:
        resolved = resolve_isolation(mode)
    except IsolationError:
        raise CannotGrade(
            "the grader's sandbox (bubblewrap) is unavailable in this container: it cannot create its "
            "namespaces, and this autograder is set to grade only inside it (isolation: bwrap). "
            "The course staff must change the autograder's isolation or its container"
        ) from None
    timeout = int(os.environ.get("COURSE_TIMEOUT") or kit.get("timeout", DEFAULT_TIMEOUT))

    fresh = Path(tempfile.mkdtemp(prefix="course-gradescope-"))
    try:
        fresh.chmod(0o755)  # the grading user reads its copy of the submission; nobody but root writes here
        (fresh / "submission").mkdir(mode=0o755)
        copy = fresh / "submission" / chosen.name
        shutil.copyfile(chosen, copy)
        copy.chmod(0o644)
        home = fresh / "home"
        home.mkdir(mode=0o700)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "1",
            "TQDM_DISABLE": "1",
        }
        for name in ("TMPDIR", "PYTHONPATH"):  # PYTHONPATH: a test runs the kit's own copy of the package
            if os.environ.get(name):
                env[name] = os.environ[name]

        user = grading_user(kit) if resolved.mode == "process" else None
        how = "in the bubblewrap sandbox" if resolved.mode == "bwrap" else "WITHOUT a sandbox, as a plain process"
        if user is not None:
            os.chown(home, user[0], user[1])
            why_not = probe_user(user, env, [course / "notebooks" / expected, copy], fresh)
            if why_not is not None:
                print(f"autograde: the grading user {user[2]} cannot run the grader ({why_not}); grading as root")
                user = None
        if resolved.mode == "process":
            who = (
                f"as the unprivileged user {user[2]}, which cannot write the grader's results"
                if user
                else "as the autograder's own user"
            )
            how += f" ({'bubblewrap is not available here' if mode == 'auto' else 'isolation: process'}), {who}"
        package = Path(__file__).resolve().parents[3]  # gradescope_kit, kits, grading, the package
        print(f"autograde: grading {chosen.relative_to(autograder / 'submission')} (chapter {kit['chapter']}) {how}")
        print(f"autograde: with the course package in {package}")
        sys.stdout.flush()

        nonce = secrets.token_hex(16)
        job = {
            "nonce": nonce,
            "path": str(copy),
            "root": str(course),
            "chapter": kit["chapter"],
            "isolation": resolved.mode,
            "warning": resolved.warning,
            "timeout": timeout,
            "cell_timeout": int(kit.get("cell_timeout", 60)),
            "memory_mb": int(kit.get("memory_mb", 4096)),
            "key": os.environ.get("COURSE_GRADER_KEY", ""),
        }
        grader = subprocess.Popen(
            _grader_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=fresh,
            start_new_session=True,
            **run_as(user),
        )
        try:
            answer, _ = grader.communicate(json.dumps(job).encode(), timeout=timeout + STARTUP)
        except subprocess.TimeoutExpired:
            grader.kill()
            grader.communicate()
            raise CannotGrade(
                f"the grading did not finish within {timeout + STARTUP} s; the grading was stopped"
            ) from None
        finally:
            end_leftovers()
        report = _read_answer(answer, nonce)
        if report is None:
            raise CannotGrade(
                f"the grading process stopped before it reported (exit status {grader.returncode}); "
                "a submission can cause this by killing its grader"
            )
        results, summary = report["results"], report["summary"]
        if not results["tests"]:  # the notebook could not be read (not JSON, another chapter's): its exercises at 0
            results.update({k: v for k, v in failure_results(kit, "see the report above").items() if k != "output"})
        lead = f"Graded {chosen.name} (chapter {kit['chapter']}) {how}."
        results["output"] = "\n".join([lead] + [f"- {n}" for n in notes] + [results.get("output", "")]).strip()
        return results, summary
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _read_answer(answer: bytes, nonce: str) -> dict | None:
    """The grading process's report, when it is one and carries the nonce; else None."""
    for line in reversed(answer.decode("utf-8", errors="replace").splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(data, dict)
            and data.get("nonce") == nonce
            and isinstance(data.get("results"), dict)
            and isinstance(data["results"].get("tests"), list)
            and isinstance(data.get("summary"), str)
        ):
            return data
    return None


def write_results(results: dict, folder: Path) -> Path:
    """Write results.json into a fresh folder of this process's own, then copy it to ``folder``, replacing whatever
    is there (a file, or a link that the submission planted)."""
    private = Path(tempfile.mkdtemp(prefix="course-gradescope-results-"))
    try:
        mine = private / "results.json"
        mine.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".results.json.{secrets.token_hex(8)}"
        shutil.copyfile(mine, staged)
        staged.chmod(0o644)
        os.replace(staged, folder / "results.json")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return folder / "results.json"


def with_visibility(results: dict, kit: dict) -> dict:
    """Gradescope's visibility, as kit.json sets it: each exercise's test, and the overall output. A kit without the
    setting (built before it existed) shows the tests after the due date, the output at once."""
    policy = kit.get("visibility") or {}
    for test in results.get("tests", []):
        test["visibility"] = policy.get("tests", "after_due_date")
    results["stdout_visibility"] = policy.get("output", "visible")
    return results


def autograde(kit_path: Path) -> int:
    """What run_autograder runs: grade, and always write results/results.json. Exit status 0 once it is written."""
    autograder = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    prctl(processes.PR_SET_CHILD_SUBREAPER, 1)  # processes that the grading detaches become ours, to be ended
    kit: dict = {}
    summary = ""
    try:
        kit = json.loads(kit_path.read_text(encoding="utf-8"))
        results, summary = grade_submission(kit, autograder)
    except CannotGrade as exc:
        results = failure_results(kit, str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug or a broken install: still a results.json, with the reason
        results = failure_results(
            kit, f"the autograder failed ({type(exc).__name__}: {exc}); please tell the course staff"
        )
    end_leftovers()
    with_visibility(results, kit)
    written = write_results(results, autograder / "results")
    print(summary or results["output"])
    print(f"autograde: {results['score']:g} / {results.get('max_score', 0):g} written to {written}")
    return 0


def grade_one() -> int:
    """The grading process that ``autograde`` starts: reads its job on stdin, grades, answers on stdout, once."""
    prctl(processes.PR_SET_DUMPABLE, 0)  # no other process of this user reads its memory, environment or descriptors
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed goes to the log, never into the answer
    job = json.loads(sys.stdin.buffer.read())
    from ...host.grader import grade_notebook, secret_seed
    from ...host.isolation import Isolation

    path = Path(job["path"])
    key = job.get("key", "").encode()
    report = grade_notebook(
        path,
        Path(job["root"]),
        cell_timeout=job["cell_timeout"],
        timeout=job["timeout"],
        chapter=job["chapter"],
        isolation=Isolation(job["isolation"], job["warning"]),
        seed=secret_seed(key, path.read_bytes()) if key else None,
        memory_mb=job["memory_mb"],
    )
    message = {"nonce": job["nonce"], "results": report.gradescope(), "summary": report.markdown()}
    answer.write(json.dumps(message).encode() + b"\n")
    answer.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["grade-one"]:
        return grade_one()
    parser = argparse.ArgumentParser(description="Grade the submission in $AUTOGRADER_ROOT (Gradescope's layout).")
    parser.add_argument("--kit", type=Path, required=True, help="the kit's kit.json")
    return autograde(parser.parse_args(argv).kit)


if __name__ == "__main__":
    sys.exit(main())
