"""The grader's and the self-check's comparison (grading.registry.compare): what a mismatch message says."""

import torch

from transformer_course.grading.registry import compare


def test_a_float_mismatch_names_the_tolerance_and_the_dtype():
    expected = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    message = compare(expected, expected + 0.5, 1e-6, 1e-5)
    assert (
        message
        == "the result differs from the reference by up to 0.5 (allowed: 1e-06 + 1e-05 x |reference|, in float64)"
    )
    # Issue 57: 10.4 in float32 was told "differs by up to 1.7e-07" and never why; now the dtype is the reason given.
    message = compare(expected, expected.float(), 1e-10, 0.0, where="the smoothed probabilities")
    assert message is not None and message.startswith("the smoothed probabilities differs from the reference by up to")
    assert message.endswith("(allowed: 1e-10); it returned float32, the task asks for float64")


def test_within_the_tolerance_is_no_message_whatever_the_dtype():
    expected = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert compare(expected, expected.float(), 1e-6, 0.0) is None


def test_the_exercises_page_names_every_exercise_held_to_another_tolerance(course_root):
    import re

    from transformer_course.grading import registry

    text = " ".join((course_root / "book" / "exercises.md").read_text(encoding="utf-8").split())
    tighter = set(re.search(r"Exercises held tighter \(([^)]*)\)", text).group(1).split(", "))
    looser = set(re.findall(r"held looser \((\d+\.\d+)", text))
    compared = [e for c in registry.CHAPTER_MODULES for e in registry.chapter_exercises(c) if e.judge is None]
    assert tighter == {e.id for e in compared if e.atol < 1e-6}
    assert looser == {e.id for e in compared if e.atol > 1e-6}
    assert all((e.atol, e.rtol) == (1e-6, 1e-6) for e in compared if e.id not in tighter | looser)
