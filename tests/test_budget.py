"""Budgets in time or in steps (training.budget) and the model cache that holds them to their promise: under test a
model budgeted in minutes trains the steps they buy, and the cache never serves a model short of its budget."""

import json
from importlib.resources import files

import pytest
import torch
from torch import nn

from transformer_course.training import budget, model_cache
from transformer_course.training.configs import CONFIGS, STEPS_IN_BUDGET


@pytest.mark.parametrize("name", sorted(STEPS_IN_BUDGET))
def test_the_steps_in_a_budget_are_those_of_the_stored_five_minute_runs(name):
    steps = {
        json.loads(files("transformer_course.runs").joinpath(f"{name}-5min-seed{s}.json").read_text())["steps"]
        for s in range(3)
    }
    assert steps == {STEPS_IN_BUDGET[name]}
    assert CONFIGS[name]["seconds"] == 300 and not CONFIGS[name].get("steps")  # what a reader's notebook trains


def test_every_cpu_configuration_budgeted_in_minutes_has_its_steps():
    timed = {name for name, c in CONFIGS.items() if name.endswith("-cpu") and c.get("seconds") and not c.get("steps")}
    assert timed == set(STEPS_IN_BUDGET) and len(timed) == 4


def test_a_time_budget_becomes_its_steps_and_a_step_budget_stays():
    fixed = budget.fixed_budget("transformer-cpu", CONFIGS["transformer-cpu"])
    assert (fixed["steps"], fixed["seconds"]) == (STEPS_IN_BUDGET["transformer-cpu"], None)
    assert budget.fixed_budget("transformer-tiny", CONFIGS["transformer-tiny"]) == CONFIGS["transformer-tiny"]
    with pytest.raises(ValueError, match="transformer-ref.*STEPS_IN_BUDGET"):
        budget.fixed_budget("transformer-ref", CONFIGS["transformer-ref"])  # an hour: no step count is known


def test_reproducible_reads_the_environment(monkeypatch):
    monkeypatch.setenv(budget.ENV, "1")
    assert budget.reproducible()
    monkeypatch.setenv(budget.ENV, "0")
    assert not budget.reproducible()
    monkeypatch.delenv(budget.ENV)
    assert not budget.reproducible()


def test_short_of_names_what_is_missing():
    assert budget.short_of({"step": 275, "seconds": 300.2}, 1920, None) == "trained 275 steps of the 1920 asked for"
    assert budget.short_of({"step": 1920, "seconds": 900.0}, 1920, None) is None
    assert budget.short_of({"step": 275, "seconds": 299.0}, None, 300) == "trained 299 s of the 300 s asked for"
    assert budget.short_of({"step": 275, "seconds": 300.4}, None, 300) is None


def _trainer(steps_done: int, calls: list):
    def fit(model: nn.Module) -> dict:
        calls.append(steps_done)
        with torch.no_grad():
            model.weight.fill_(float(steps_done))
        return {"step": steps_done, "seconds": 1.0}

    return fit


def test_the_cache_never_serves_a_model_short_of_its_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRANSFORMER_COURSE_CACHE", str(tmp_path))
    calls: list[int] = []

    def cached(steps_done):
        return model_cache.cached_training(
            "toy", {"steps": 10}, "data", lambda: nn.Linear(2, 2), _trainer(steps_done, calls), (budget,), steps=10
        )

    # A run stopped short (a deadline, an interrupt) is used once but never stored ...
    model, history, loaded = cached(3)
    assert (history["step"], loaded) == (3, False) and not list(tmp_path.glob("toy-*.pt"))
    # ... a full one is stored with its steps and served after
    model, history, loaded = cached(10)
    (entry,) = tmp_path.glob("toy-*.pt")
    assert torch.load(entry, weights_only=False)["steps"] == 10
    model, history, loaded = cached(99)
    assert loaded and history["step"] == 10 and model.weight[0, 0].item() == 10.0 and calls == [3, 10]
    # An entry that got fewer steps (written by an older cache, or a run on a busy machine) is trained again.
    saved = torch.load(entry, weights_only=False)
    saved["history"]["step"] = 7
    torch.save(saved, entry)
    model, history, loaded = cached(10)
    assert not loaded and calls == [3, 10, 10] and model.weight[0, 0].item() == 10.0
    assert "trained 7 steps of the 10 asked for: training it again" in capsys.readouterr().err
