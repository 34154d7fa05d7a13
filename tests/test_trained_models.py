"""The translation models of chapters 3, 4 and 8, trained on Tatoeba English-Spanish within their budgets.

Each test trains its model once (the steps five minutes buy on two idle cores: under test a budget is in steps,
training.budget), or loads it from the model cache when the same
configuration, data and code trained it before, exactly as the chapters' notebooks do: the same call, so the
same cache entry. `make test` runs these first (tests/schedule.py): the three models then train at the very
start, two at a time, instead of inside the notebooks after their other experiments, and every notebook
loads them. `make test-fast` leaves them out (marker `trains`).
"""

import json
import os
import statistics
from importlib.resources import files

import pytest
import torch

from transformer_course.data.batching import length_batches
from transformer_course.evaluation.translate import TEST_BATCH, greedy_translations
from transformer_course.experiments.translation import translation_experiment
from transformer_course.training.budget import reproducible
from transformer_course.training.configs import CONFIGS, STEPS_IN_BUDGET

# The CPU configurations the chapters train (chapter 8 takes transformer-gpu instead on a CUDA machine).
MODELS = ["seq2seq-cpu", "bahdanau-cpu", "transformer-cpu"]


@pytest.fixture
def course_threads():
    """The threads a notebook's kernel gets under test (NOTEBOOK_THREADS; a student's notebook: two), for decoding."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(int(os.environ.get("NOTEBOOK_THREADS", "2")), os.cpu_count() or 1)))
    yield
    torch.set_num_threads(before)


@pytest.mark.trains
@pytest.mark.parametrize("name", MODELS)
def test_a_translation_model_learns_within_its_budget(name, course_threads):
    run = translation_experiment(name, progress=False)
    history, data, model = run.history, run.data, run.model
    if reproducible():  # tests/conftest.py sets it: the steps five minutes buy, however busy the machine
        assert history["step"] == STEPS_IN_BUDGET[name]
        # The same steps as the stored five-minute runs, so about their test BLEU (three seeds; a machine with other
        # vector instructions rounds differently, and seeds differ by up to a point).
        stored = [
            json.loads(files("transformer_course.runs").joinpath(f"{name}-5min-seed{s}.json").read_text())
            for s in range(3)
        ]
        mean = statistics.mean(r["test_score"] for r in stored)
        assert abs(run.bleu - mean) < 2.0, f"{name}: test BLEU {run.bleu:.1f}, the stored runs' mean {mean:.1f}"
    else:
        assert history["seconds"] <= CONFIGS[name]["seconds"] + 10  # the budget holds (the last step may run over)
    loss = history["loss"]
    assert sum(loss[-25:]) / 25 < 0.75 * loss[0], f"{name}: the loss should have fallen by a quarter at least"
    # Scored on both held-out sets: validation (what tuning reads) and test (what is reported). They are drawn from the
    # same distribution, so a model that scores far apart on them points at a mistake in one of the two.
    assert 0 < run.valid_bleu and abs(run.valid_bleu - run.bleu) < max(3.0, 0.25 * run.bleu)
    hypotheses = run.hypotheses
    assert len(hypotheses) == len(data.test_sources) and sum(map(bool, hypotheses)) > 0.9 * len(hypotheses)
    # The test translations stored with the model are the ones it writes (a check of the cache, when it loaded):
    # three of the evaluation's batches again, the same sentences together.
    groups = length_batches([len(ids) for ids in data.test_ids], TEST_BATCH, shuffle=False)
    for group in (groups[0], groups[len(groups) // 2], groups[-1]):
        again = greedy_translations(model, data, [data.test_ids[i] for i in group])
        differ = sum(a != hypotheses[i] for a, i in zip(again, group))
        assert differ == 0, f"{name}: {differ} of {len(group)} stored test translations differ from the model's"
