"""Exercise 3.6, two ways to fool a broken BLEU: the judge's measurements and its words for bad answers."""

import pytest

from transformer_course.exercises import ch03
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict

EX = registry.get("3.6")


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED])
def test_the_reference_fools_each_broken_bleu_and_not_bleu(seed):
    for case in EX.cases(seed):
        (references,) = case.args
        assert min(len(r) for r in references) >= 8
        repeated, prefix = run_case(EX, EX.reference, case)
        assert verdict(EX, case, (repeated, prefix)) is None
        assert ch03._bleu_unclipped([repeated], [references]) >= 2 * ch03.bleu_ref.bleu([repeated], [references])
        assert ch03._bleu_no_brevity([prefix], [references]) == pytest.approx(100.0)


@pytest.mark.parametrize(
    "answer, words",
    [
        ("two words", "a pair of hypotheses"),
        ((["a"], ["b"], ["c"]), "a pair of hypotheses"),
        ((["a", 3], ["b"]), "hypothesis 1 should be a list of tokens"),
        (([], ["b"]), "between 1 and 200 tokens"),
        ((["x"] * 201, ["b"]), "between 1 and 200 tokens"),
        ((["nada"] * 5, ["nada"] * 5), "without the clip gives"),
    ],
)
def test_a_malformed_or_wrong_answer_gets_a_sentence(answer, words):
    problem = verdict(EX, EX.cases(PUBLIC_SEED)[0], answer)
    assert problem is not None and words in problem, problem


def test_the_second_hypothesis_is_judged_by_the_bleu_without_brevity():
    case = EX.cases(PUBLIC_SEED)[0]
    repeated, _ = ch03.fool_bleu(*case.args)
    shortest = min(case.args[0], key=len)
    problem = verdict(EX, case, (repeated, list(shortest)))
    assert "without the brevity penalty" in problem
