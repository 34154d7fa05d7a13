"""The order of `make test` (tests/schedule.py): which notebooks train the models, and which load them."""

from schedule import FREE, LOADS, TRAINS, _waves


def test_models_train_in_their_own_chapter_and_chapter_9_loads_them(course_root):
    notebooks = sorted(course_root.glob("solutions/*.ipynb")) + sorted(course_root.glob("notebooks/*.ipynb"))
    solution = lambda name: course_root / "solutions" / name  # noqa: E731
    waves = _waves(notebooks)
    trainers = {solution(n) for n in ("03_encoder_decoder.ipynb", "04_bahdanau_attention.ipynb", "08_transformer.ipynb")}
    assert {p for p, wave in waves.items() if wave == TRAINS} == trainers
    assert waves[solution("09_beam_search.ipynb")] == waves[course_root / "notebooks" / "09_beam_search.ipynb"] == LOADS
    assert waves[solution("05_self_attention.ipynb")] == waves[course_root / "notebooks" / "03_encoder_decoder.ipynb"] == FREE
