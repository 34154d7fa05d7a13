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


def test_a_python_float_mismatch_names_the_tolerance_and_the_dtype():
    # Issue 55, item 5: 10.5's perplexities and 3.5's BLEU are Python floats; their message said only the difference
    message = compare(0.25, 0.26, 1e-9, 1e-9, where="the perplexity")
    assert message == (
        "the perplexity should be 0.25, got 0.26 (a difference of 0.01; allowed: 1e-09 + 1e-09 x |reference|, "
        "in float64)"
    )
    assert compare(0.25, 0.25 + 1e-12, 1e-9, 1e-9) is None
    # in a dict too (a value of 8.6's weights, a count of 10.1's stay exact and are shown as they are)
    message = compare({"p": 0.5, "n": 3}, {"p": 0.7, "n": 4}, 1e-6, 0.0)
    assert "'p' should be 0.5, got 0.7 (a difference of 0.2; allowed: 1e-06, in float64)" in message
    assert "'n' is 4, expected 3" in message


def test_a_0d_tensor_where_a_number_is_asked_for_is_its_number():
    # BLEU computed with torch: exp(mean(log p)) as a 0-d tensor is the number, within the tolerance, as a float is
    assert compare(0.4, torch.tensor(0.4 + 1e-12, dtype=torch.float64), 1e-6, 1e-6) is None
    assert compare(3, torch.tensor(3), 0.0, 0.0) is None  # a token id or a count, exactly
    message = compare(0.4, torch.tensor(0.5), 1e-6, 0.0)
    assert message == "the result should be 0.4, got 0.5 (a difference of 0.1; allowed: 1e-06, in float32)"
    # more than one number is named, where it used to stop the self-check with "Boolean value of Tensor ... ambiguous"
    message = compare(0.4, torch.tensor([0.4, 0.5]), 1e-6, 0.0)
    assert message == "the result should be a number (0.4), got a float32 tensor of shape (2,)"
    # a Python float where the task asks for a 0-d tensor (8.4, 9.5, 10.2) is still refused: it has no dtype
    assert compare(torch.tensor(0.4, dtype=torch.float64), 0.4, 1e-6, 0.0) is not None


def test_lists_are_tuples_at_any_depth_in_token_ids():
    # 9.2's hypotheses built as lists of token ids: the self-check refused ([6, 8],) for ((6, 8),), and so did the grader
    expected = (((6, 8), (3, 5)), ((2,),))
    assert compare(expected, [[[6, 8], [3, 5]], [[2]]], 0.0, 0.0) is None
    assert (
        compare(expected[0], [[6, 8], [3, 6]], 0.0, 0.0)
        == "the result: expected ((6, 8), (3, 5)), got ([6, 8], [3, 6])"
    )


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
    # the instructor guide's account of the comparison ("How the grader works", step 6) says the same (issue 55, item 5)
    guide = " ".join((course_root / "book" / "instructor" / "sandbox.md").read_text(encoding="utf-8").split())
    listed = re.search(r"tighter for ([\d., and]+), which ask for float64 precision; looser for ([\d.]+), at", guide)
    assert set(re.findall(r"\d+\.\d+", listed.group(1))) == tighter and {listed.group(2)} == looser
