"""The stored reference models (src/transformer_course/reference/): complete, loadable only as written, and their
stored translations reproduce from their weights, to the token."""

import hashlib
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
    stored = run.get("stored_weights")  # weights stored in another form than trained, and that form's scores
    if name in GPU_NAMES:
        # trained against the clock: validation every 30 seconds of training, then once more at the deadline;
        # the weights came back from the GPU machine (16 MiB a file) in the compact form
        seconds = [p["seconds"] for p in run["curve"]]
        assert all(29 < b - a < 31 for a, b in zip([0] + seconds[:-2], seconds[:-1])), seconds
        assert seconds[-1] - seconds[-2] <= 31 and run["device"] == "cuda" and run["autocast"] == "bfloat16"
        assert (reference.HERE / f"{name}.pt").stat().st_size < 16 * 2**20
        assert stored["form"] in ("int8", "float16")
    else:
        # validation every 5 minutes of the hour: 12 points, evenly spaced in steps
        assert len(steps) == 12 and len({b - a for a, b in zip([0] + steps, steps)}) == 1
        # trained in float32; stored so (transformer-ref: in float16, chapter 9's choice of length penalty, a
        # near tie, flips), or in float16 by `reference compact` (bahdanau-ref), half the bytes, scored in that form
        assert (stored is not None) == (name == "bahdanau-ref")
        if stored is not None:
            assert stored["form"] == "float16" and stored["trained_weights_sha256"] != run["weights_sha256"]
            assert stored["bytes"] == (reference.HERE / f"{name}.pt").stat().st_size < 12 * 2**20
    if stored is not None:  # rounding the weights may cost BLEU: the stored form's is recorded, and costs little
        assert abs(stored["valid_score"] - run["score"]) < 0.3 and abs(stored["test_score"] - run["test_score"]) < 0.3


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


def test_compact_halves_a_float32_file_once_and_records_what_the_stored_form_scores(tmp_path, monkeypatch):
    from transformer_course.evaluation import translate
    from transformer_course.reference.__main__ import main
    from transformer_course.training.compact_weights import load_state

    # a float32 file as the trainer writes one: the stored weights, widened (float16 values survive the round trip)
    state = load_state(reference.HERE / "bahdanau-ref.pt")
    torch.save(state, tmp_path / "bahdanau-ref.pt")
    run = reference_run("bahdanau-ref")
    run["weights_sha256"] = hashlib.sha256((tmp_path / "bahdanau-ref.pt").read_bytes()).hexdigest()
    del run["stored_weights"]  # as the trainer wrote it
    (tmp_path / "bahdanau-ref.json").write_text(json.dumps(run))
    plain_bytes = (tmp_path / "bahdanau-ref.pt").stat().st_size
    monkeypatch.setattr(reference, "HERE", tmp_path)
    scored = []
    monkeypatch.setattr(translate, "evaluate_bleu", lambda m, d, split: scored.append(split) or len(scored) + 40.0)
    assert main(["compact", "bahdanau-ref", "--threads", str(torch.get_num_threads())]) == 0
    after = reference_run("bahdanau-ref")
    stored = after["stored_weights"]
    assert scored == ["valid", "test"] and (stored["valid_score"], stored["test_score"]) == (41.0, 42.0)
    assert stored["form"] == "float16" and stored["trained_weights_sha256"] == run["weights_sha256"]
    assert stored["bytes"] == (tmp_path / "bahdanau-ref.pt").stat().st_size < 0.51 * plain_bytes
    assert (after["score"], after["test_score"]) == (run["score"], run["test_score"])  # the trained model's, kept
    model, _, _ = load_reference("bahdanau-ref")  # the new digest is the file's
    assert all(torch.equal(p, state[k]) for k, p in model.state_dict().items())
    with pytest.raises(SystemExit, match="stored compactly already"):
        main(["compact", "bahdanau-ref", "--threads", str(torch.get_num_threads())])


def test_the_float16_gru_decodes_the_test_bleu_its_run_records():
    # `reference compact` scored the stored form on the whole test set (5,967 sentences, a few seconds for this
    # model): decoded here again, on whatever processor, it gives that BLEU (a rounding tie may move a token)
    from transformer_course.experiments.translation import evaluate_bleu

    model, data, run = load_reference("bahdanau-ref")
    with torch.no_grad():
        bleu = evaluate_bleu(model, data, "test")
    assert abs(bleu - run["stored_weights"]["test_score"]) < 0.05, (bleu, run["stored_weights"]["test_score"])
