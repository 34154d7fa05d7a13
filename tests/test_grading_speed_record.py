"""Issue 55, item 6: the instructor guide's figures on grading speed (book/instructor/grade.md, "How long it takes")
are the stored benchmark's (src/transformer_course/runs/grading-speed.json, made by tests/benchmarks/grading_speed.py
on an idle 2-core machine).
"""

import json
from importlib.resources import files


def test_the_guide_quotes_the_stored_grading_speed(course_root):
    record = json.loads(files("transformer_course.runs").joinpath("grading-speed.json").read_text())
    assert record["command"].startswith("python tests/benchmarks/grading_speed.py ")
    assert record["cpu_count"] == 2 and record["isolation"] == "bwrap"
    assert set(record["chapters"]) == {str(c) for c in range(1, 12)}
    ratios = sorted(r["ratio"] for r in record["folder"]["rounds"])
    assert round(ratios[len(ratios) // 2], 2) == record["jobs_2_over_jobs_1"]  # the median of the alternated rounds
    guide = " ".join((course_root / "book" / "instructor" / "grade.md").read_text(encoding="utf-8").split())
    chapters = record["chapters"]
    core_seconds = record["core_seconds_per_submission"]
    class_of_300 = round(300 * core_seconds / 16)  # the guide's arithmetic: 300 submissions, 16 cores
    for quoted in (
        f"one chapter 5 solution grades in {chapters['5']['median_seconds']:.2f} s",
        f"chapter 8's in {chapters['8']['median_seconds']:.2f} s",
        f"takes {core_seconds:.2f} core-seconds each",
        f"`--jobs 2` is {record['jobs_2_over_jobs_1']:.2f} times as fast as `--jobs 1`",
        f"a class of 300 takes about {class_of_300} s of chapter 5 on 16 cores",
    ):
        assert quoted in guide, quoted
