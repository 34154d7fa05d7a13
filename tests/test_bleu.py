"""BLEU from its parts (transformer_course.evaluation.bleu, the reference of exercise 3.5) against sacrebleu."""

import math
import random

import pytest
import sacrebleu

from transformer_course.data.tatoeba import multi_reference, tatoeba_split
from transformer_course.evaluation.bleu import bleu, bleu_statistics, closest_reference_length, ngrams, tokenize_13a
from transformer_course.evaluation.metrics import corpus_bleu


@pytest.fixture(scope="module")
def test_set() -> list[list[str]]:
    return [refs for _, refs in multi_reference(tatoeba_split().test)]


def edited(text: str, rng: random.Random) -> str:
    """A plausible hypothesis: a reference with a word repeated, a word dropped, or its ending cut."""
    words = text.split()
    i = rng.randrange(len(words))
    kind = rng.choice(["repeat", "drop", "cut", "same"])
    if kind == "repeat":
        words.insert(i, words[i])
    elif kind == "drop" and len(words) > 1:
        del words[i]
    elif kind == "cut":
        words = words[: max(1, i)]
    return " ".join(words)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_sacrebleu_on_the_test_set(test_set, seed):
    rng = random.Random(seed)
    chosen = rng.sample(test_set, 600)
    # a hypothesis from another sentence's reference now and then, so that the score is far from 100
    hypotheses = [edited(refs[0] if rng.random() < 0.7 else rng.choice(test_set)[0], rng) for refs in chosen]
    # the course's sacrebleu scoring: 13a tokenisation, default ('exp') smoothing, unused as no order is empty
    expected = corpus_bleu(hypotheses, chosen)
    ours = bleu([tokenize_13a(h) for h in hypotheses], [[tokenize_13a(r) for r in refs] for refs in chosen])
    assert 5 < expected < 95
    assert ours == pytest.approx(expected, abs=1e-6)


def test_an_order_without_a_match_gives_zero_as_sacrebleu_without_smoothing():
    hypothesis, references = "el perro come", ["el perro come mucho", "un perro come"]
    assert bleu([hypothesis.split()], [[r.split() for r in references]]) == 0.0
    assert sacrebleu.corpus_bleu([hypothesis], [[r] for r in references], smooth_method="none").score == 0.0


def test_clipping_counts_a_word_at_most_as_often_as_one_reference_holds_it():
    matches, totals, _, _ = bleu_statistics([["the"] * 7], [[["the", "cat", "the"], ["the", "mat"]]])
    assert (matches[0], totals[0]) == (2, 7)  # the first reference holds "the" twice
    unclipped, _, _, _ = bleu_statistics([["the"] * 7], [[["the", "cat", "the"]]], clip=False)
    assert unclipped[0] == 7


def test_brevity_penalty_uses_the_closest_reference_and_the_shorter_on_a_tie():
    assert closest_reference_length(5, [3, 8, 6]) == 6
    assert closest_reference_length(5, [4, 6]) == 4
    hypothesis = "a b c d e".split()
    short, long = "a b c d e f g".split(), "a b c d e f g h i j".split()
    assert bleu([hypothesis], [[long, short]]) == pytest.approx(100 * math.exp(1 - 7 / 5))


def test_ngrams_counts_runs_of_consecutive_tokens():
    assert ngrams("a b a b".split(), 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert ngrams(["a"], 2) == {}


@pytest.mark.parametrize(
    "hypotheses, references, message",
    [
        ([], [], "empty corpus"),
        ([["a"]], [], "1 hypotheses but 0"),
        (["a b"], [[["a", "b"]]], "token lists, not strings"),
        ([["a"]], [[]], "no reference"),
    ],
)
def test_bad_input_is_a_clear_error(hypotheses, references, message):
    with pytest.raises(ValueError, match=message):
        bleu(hypotheses, references)
