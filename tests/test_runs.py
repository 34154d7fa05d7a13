"""The recorded training runs that chapter 8 draws (src/transformer_course/runs/*.json) are complete and
consistent: each says how it was made, and its curve is a curve of that run."""

import json
from importlib.resources import files

import pytest

from transformer_course.configs import CONFIGS
from transformer_course.train import _parser

RUNS = sorted(p.name for p in files("transformer_course.runs").iterdir() if p.name.endswith(".json"))


def test_the_chapter_8_runs_are_there():
    assert {"bahdanau-cpu-15min.json", "transformer-cpu-15min.json"} <= set(RUNS)


@pytest.mark.parametrize("name", RUNS)
def test_run_records_its_command_and_a_consistent_curve(name):
    run = json.loads(files("transformer_course.runs").joinpath(name).read_text())
    assert run["command"].startswith("python -m transformer_course.train ")
    args = _parser().parse_args(run["command"].split()[3:])  # the command parses, and names this run's config
    assert args.config == run["config"] and run["config"] in CONFIGS
    for key, value in CONFIGS[run["config"]].items():  # the configuration has not drifted since (the budget aside)
        if key not in ("steps", "seconds"):
            assert run["settings"].get(key) == value, key
    curve = run["curve"]
    assert len(curve) >= 2
    assert [p["step"] for p in curve] == sorted(p["step"] for p in curve)
    assert [p["seconds"] for p in curve] == sorted(p["seconds"] for p in curve)
    assert curve[-1]["step"] == run["steps"] and curve[-1]["score"] == run["score"]
    if args.minutes:
        assert curve[-1]["seconds"] >= 60 * args.minutes - 5  # it trained for the minutes it claims
    assert all(0 <= p["score"] <= 100 for p in curve)
