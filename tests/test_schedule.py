"""The order of `make test` (tests/schedule.py): the models train first, then the notebooks that load them."""

from schedule import FIRST, FIRST_WAVE, FREE, LOADERS, LOADS, _models, _queue_key, _runs
from test_trained_models import MODELS


class _Item:  # what _queue_key reads of a pytest item
    def __init__(self, path, trains=False, name=""):
        self.path, self.trains, self.name = path, trains, name

    def get_closest_marker(self, name):
        return self.trains if name == "trains" else None


def test_every_model_a_notebook_uses_trains_first(course_root):
    solutions = sorted(course_root.glob("solutions/*.ipynb"))
    used = set().union(*map(_models, solutions))
    assert used - {"transformer-gpu"} == set(MODELS)  # the GPU configuration trains only on a GPU, in chapter 8
    assert {p.stem for p in solutions if _models(p)} == set(LOADERS) - {"09_evaluation"}
    assert not _models(course_root / "solutions" / "09_evaluation.ipynb")  # queued among them for its length
    trainer = {
        m: _queue_key(_Item(course_root / "tests" / "test_trained_models.py", True, f"test[{m}]")) for m in MODELS
    }
    for p in solutions:  # every model a notebook loads is queued before it: no worker is handed a notebook to wait on
        assert all(trainer[m] < _queue_key(_Item(p)) for m in _models(p)), p.name
    # and the two first units, the two longest trainers, start at once on the two workers
    assert sorted(trainer.values())[:2] == [(FIRST_WAVE, 0), (FIRST_WAVE, 1)]


def test_no_worker_starts_by_waiting_for_the_other(course_root):
    # xdist hands out the first four units alternately, each worker holding one ahead: worker 0 gets FIRST[0] and
    # FIRST[2], worker 1 FIRST[1] and FIRST[3]. So the two first are trainers, the notebook behind worker 0's trainer
    # needs no model but that one, and worker 1 trains the third model after its first.
    trainers = [m for m in FIRST if m in MODELS]
    assert FIRST[0] in trainers and FIRST[1] in trainers and FIRST[3] in trainers
    assert _models(course_root / "solutions" / f"{FIRST[2]}.ipynb") <= {FIRST[0]}


def test_loaders_then_the_rest(course_root):
    key = lambda folder, name: _queue_key(_Item(course_root / folder / f"{name}.ipynb"))
    assert [key("solutions", n) for n in LOADERS] == sorted(key("solutions", n) for n in LOADERS)
    assert all(key("solutions", n)[0] == FIRST_WAVE for n in LOADERS)
    assert key("solutions", "09_evaluation") < key("solutions", "05_self_attention")
    # chapter 8's first notebook reads a configuration for a diagram and trains only toys: it loads no model
    assert key("solutions", "08_transformer") == (FREE, 0)
    # chapter 9's student version runs through its last self-check, which loads no cached model (the reference
    # Transformer is a file of the repository), so it is free to run in any wave
    assert key("solutions", "05_self_attention") == (FREE, 0)
    # chapter 3's student version runs through its last self-check, exercise 3.5's, which comes after the
    # translation model (it scores that model's translations): it loads the model, after the solutions that do
    assert key("notebooks", "03_encoder_decoder") == (LOADS, 0)
    assert key("notebooks", "09_beam_search") == (FREE, 0)
    # a student notebook without exercises is the solution's cells alone: none of them runs a second time
    for name in ("08_transformer_vs_gru", "09_evaluation"):
        assert _runs(course_root / "notebooks" / f"{name}.ipynb") == 0
        assert key("notebooks", name) == (FREE, 0)
    assert _queue_key(_Item(course_root / "tests" / "test_rnn.py")) == (FREE, 0)
