"""The order of `make test` (tests/schedule.py): which notebooks train the models and which wait for them."""

from schedule import FREE, LOADS, TRAINS, _needs, _waves


def test_models_train_in_their_own_chapter_and_chapter_9_waits_for_all_three(course_root):
    notebooks = sorted(course_root.glob("solutions/*.ipynb")) + sorted(course_root.glob("notebooks/*.ipynb"))
    solution = lambda name: course_root / "solutions" / name  # noqa: E731
    waves = _waves(notebooks)
    trainers = {solution(n) for n in ("03_encoder_decoder.ipynb", "04_bahdanau_attention.ipynb", "08_transformer.ipynb")}
    assert {p for p, wave in waves.items() if wave == TRAINS} == trainers
    assert waves[solution("05_self_attention.ipynb")] == FREE
    needs = _needs(notebooks)
    # chapter 9's closing table loads all three models; the student version stops before it, after the beam
    assert needs[solution("09_beam_search.ipynb")] == trainers
    assert needs[course_root / "notebooks" / "09_beam_search.ipynb"] == {solution("08_transformer.ipynb")}
    assert all(waves[p] == LOADS for p in needs)
