"""Every wrong answer of tests/wrong_answers/ loses its points whatever the seed of the hidden cases.

tests/test_grader.py grades each round of wrong answers once, through the sandboxed grader, on one seed. The
grader draws a fresh seed on every run, so a wrong answer that a rare draw lets through would lose its points on
some runs only (exercise 9.2's off-by-one did, 6 times in 15). Here each wrong answer runs in-process, in the
namespace the grader gives it (the student notebook's given definitions, the course's code of the exercises
before it), on the cases of many seeds: each seed must catch it, or the grader's static check must refuse it.
"""

import json

import pytest
import torch

from gradertools import wrong_rounds
from transformer_course.grading import registry
from transformer_course.grading.given import given_code
from transformer_course.grading.host.fallback import fallback_source
from transformer_course.grading.static_check import static_problem

COMPARED_SEEDS = range(20)
JUDGED_SEEDS = range(5)  # a judge measures (trains, searches): slower, and its cases vary less
TRAINING_SEEDS = range(1)  # 8.6's answers train a model per case (about 3 s each); its seed only names the data


def _answer(course_root, chapter: int, ex: registry.Exercise, code: str):
    """The wrong answer's object, defined as the grader defines it: given code, earlier exercises, the cell."""
    pristine = json.loads((course_root / "notebooks" / registry.chapter_notebook(chapter)).read_text())
    given = given_code(pristine)
    namespace: dict = {}
    previous = torch.get_default_dtype()
    try:
        exec(given["__imports__"], namespace)
        for earlier in registry.chapter_exercises(chapter):
            for block in given.get(earlier.id, []):
                exec(block, namespace)
            if earlier.id == ex.id:
                exec(compile(code, f"<wrong answer {ex.id}>", "exec"), namespace)
                return namespace[ex.name], torch.get_default_dtype()
            exec(fallback_source(earlier, course_root), namespace)
    finally:
        torch.set_default_dtype(previous)
    raise AssertionError(f"exercise {ex.id} is not in chapter {chapter}")


def _caught(ex, answer, cases) -> bool:
    for case in cases:
        try:
            actual, changed = registry.attempt(ex, answer, case)  # as the self-check and the grader run it
            if changed or registry.verdict(ex, case, actual) is not None:
                return True
        except Exception:  # noqa: BLE001 - an error is a failed case, for the grader too
            return True
    return False


WRONG = [(chapter, index, ex_id, code) for chapter, index, answers in wrong_rounds() for ex_id, code in answers.items()]


@pytest.mark.parametrize("chapter, index, ex_id, code", WRONG, ids=[f"{w[2]}-round{w[1]}" for w in WRONG])
def test_every_wrong_answer_loses_its_points_whatever_the_seed(course_root, chapter, index, ex_id, code):
    ex = registry.get(ex_id)
    if static_problem(code, ex, {e.name for e in registry.chapter_exercises(chapter)}):
        return  # refused before it runs, on every seed (the grader tests check the words)
    answer, dtype = _answer(course_root, chapter, ex, code)
    seeds = COMPARED_SEEDS if ex.judge is None else TRAINING_SEEDS if ex.id == "8.6" else JUDGED_SEEDS
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # as in the notebook (chapter 5 computes in float64)
    try:
        missed = [seed for seed in seeds if not _caught(ex, answer, ex.cases(seed))]
    finally:
        torch.set_default_dtype(previous)
    assert not missed, f"wrong answer {ex_id} of round {index} passes on seeds {missed}"


def test_the_wrong_answers_include_each_bug_the_issue_named():
    codes = {ex_id: [] for _, _, ex_id, _ in WRONG}
    for _, _, ex_id, code in WRONG:
        codes[ex_id].append(code)
    assert any("rank <= beam_size" in c for c in codes["9.2"])
    assert any("((5 + length) / 6) ** alpha\n" in c and ".to(" not in c for c in codes["9.1"])


# Honest answers written another way than the course's: each must keep its points on every seed.
TEXTBOOK_BLEU = """def bleu(hypotheses, references):
    matches, totals = [0] * 4, [0] * 4
    c = r = 0
    for hyp, refs in zip(hypotheses, references):
        c += len(hyp)
        r += min((len(x) for x in refs), key=lambda n: (abs(n - len(hyp)), n))
        for n in range(1, 5):
            counts, most = ngrams(hyp, n), Counter()
            for x in refs:
                most |= ngrams(x, n)
            matches[n - 1] += sum(min(k, most[g]) for g, k in counts.items())
            totals[n - 1] += sum(counts.values())
    if min(matches) == 0:
        return 0.0
    p1, p2, p3, p4 = (m / t for m, t in zip(matches, totals))
    brevity = 1.0 if c >= r else math.exp(1 - r / c)
    return 100 * brevity * (p1 * p2 * p3 * p4) ** 0.25
"""


def test_an_honest_bleu_written_with_the_textbook_formula_keeps_its_points_on_every_seed(course_root):
    # (p1 p2 p3 p4) ** 0.25 differs from exp(mean(log p)) in the 14th digit: the grader compared the Python float
    # exactly, and this answer got 13/16 or 16/16 by the draw. Now every number is compared within the tolerance.
    ex = registry.get("3.5")
    answer, _ = _answer(course_root, 3, ex, TEXTBOOK_BLEU)
    differs = False
    for seed in COMPARED_SEEDS:
        for case in ex.cases(seed):
            expected, got = registry.run_case(ex, ex.reference, case), registry.run_case(ex, answer, case)
            differs |= expected != got
            assert registry.verdict(ex, case, got) is None, (seed, case.label, expected, got)
    assert differs, "the two formulas agree exactly on every case: this test no longer tests the tolerance"
