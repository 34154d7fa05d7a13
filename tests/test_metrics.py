import pytest
import sacrebleu

from transformer_course.evaluation.metrics import bleu_by_length, corpus_bleu, exact_match, length_buckets


def test_bleu_matches_sacrebleu_with_one_reference():
    hyps = ["el gato está sobre la alfombra", "hoy hace mucho frío aquí"]
    refs = ["el gato está en la alfombra", "hoy hace mucho frío aquí"]
    assert corpus_bleu(hyps, [[r] for r in refs]) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)


def test_bleu_uses_every_reference():
    hyps = ["tengo hambre ahora mismo , amigo"]
    one = corpus_bleu(hyps, [["estoy hambriento ahora mismo , amigo"]])
    two = corpus_bleu(hyps, [["estoy hambriento ahora mismo , amigo", "tengo hambre ahora mismo , amigo"]])
    assert two == pytest.approx(100.0) and one < two
    assert corpus_bleu(["a b c d", "e f g h"], [["a b c d"], ["x", "e f g h"]]) == pytest.approx(100.0)


def test_exact_match():
    assert exact_match(["1979-05-03", "2000-01-01"], ["1979-05-03", "2000-01-02"]) == 0.5
    assert exact_match(["hola"], [["adiós", "hola"]]) == 1.0
    with pytest.raises(ValueError):
        exact_match([], [])


def test_length_buckets_and_bleu_by_length():
    assert length_buckets([1, 5, 9, 12], [0, 5, 10]) == [[0], [1, 2]]
    rows = bleu_by_length(["a b c d", "x y z w"], [["a b c d"], ["x y z w"]], [3, 20], [0, 10, 30, 40])
    assert [(lo, hi, n) for lo, hi, n, _ in rows] == [(0, 10, 1), (10, 30, 1), (30, 40, 0)] and rows[2][3] is None
