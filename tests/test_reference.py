"""The stored reference models (src/transformer_course/reference/): complete, loadable only as written, and their
stored translations reproduce from their weights, to the token."""

import json
import shutil

import pytest
import torch

from transformer_course import reference
from transformer_course.reference import (
    GPU_NAMES,
    NAMES,
    load_reference,
    reference_run,
    sample_sources,
    sample_translations,
)


@pytest.mark.parametrize("name", NAMES)
def test_files_are_there_and_small_enough(name):
    for suffix in (".json", ".pt", "-sample.json"):
        assert (reference.HERE / f"{name}{suffix}").is_file(), suffix
    assert (reference.HERE / f"{name}.pt").stat().st_size < 25 * 2**20  # the limit per file
    run = reference_run(name)
    assert run["config"] == name and run["curve_on"] == "valid" and run["test_score"] is not None
    steps = [p["step"] for p in run["curve"]]
    assert steps[-1] == run["steps"] and steps == sorted(set(steps))  # the last point is the final model
    if name in GPU_NAMES:
        # trained against the clock: validation every 30 seconds of training, then once more at the deadline;
        # the weights came back from the GPU machine (16 MiB a file) in the compact form
        seconds = [p["seconds"] for p in run["curve"]]
        assert all(29 < b - a < 31 for a, b in zip([0] + seconds[:-2], seconds[:-1])), seconds
        assert seconds[-1] - seconds[-2] <= 31 and run["device"] == "cuda" and run["autocast"] == "bfloat16"
        assert (reference.HERE / f"{name}.pt").stat().st_size < 16 * 2**20
        assert run["stored_weights"]["form"] in ("int8", "float16")
    else:
        # validation every 5 minutes of the hour: 12 points, evenly spaced in steps
        assert len(steps) == 12 and len({b - a for a, b in zip([0] + steps, steps)}) == 1


@pytest.mark.parametrize("name", NAMES)
def test_stored_translations_reproduce_from_the_stored_weights(name):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # as `python -m transformer_course.reference sample` decoded them
    try:
        model, data, run = load_reference(name)
        translations = sample_translations(model, data)
    finally:
        torch.set_num_threads(threads)
    assert sum(p.numel() for p in model.parameters()) == run["parameters"]
    stored = json.loads((reference.HERE / f"{name}-sample.json").read_text())
    assert stored["weights_sha256"] == run["weights_sha256"]
    assert stored["sources"] == sample_sources(data) and len(stored["sources"]) == 40
    assert translations == stored["translations"]


def test_a_damaged_or_unknown_model_is_refused_clearly(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown reference model 'transformer-big'"):
        reference_run("transformer-big")
    for suffix in (".json", ".pt"):
        shutil.copy(reference.HERE / f"transformer-ref{suffix}", tmp_path / f"transformer-ref{suffix}")
    blob = bytearray((tmp_path / "transformer-ref.pt").read_bytes())
    blob[len(blob) // 2] ^= 1  # one bit, in the middle of the weights
    (tmp_path / "transformer-ref.pt").write_bytes(bytes(blob))
    monkeypatch.setattr(reference, "HERE", tmp_path)
    with pytest.raises(ValueError, match="not the file the trainer wrote"):
        load_reference("transformer-ref")
    (tmp_path / "transformer-ref.pt").unlink()
    with pytest.raises(FileNotFoundError, match="reference weights are part of the repository"):
        load_reference("transformer-ref")
