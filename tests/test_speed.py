"""The speed measurements (transformer_course.measurement.speed) that the benchmarks and the GPU run share: what they time and
report, checked on tiny models (the figures themselves come from the benchmarks and the GPU run, not from here)."""

import pytest
import torch

from transformer_course.measurement.speed import (
    length_batch,
    random_batches,
    sequential_steps,
    step_time_by_length,
    throughput,
)
from transformer_course.models.transformer_torch import to_torch
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model


def test_batches_have_the_lengths_asked_for():
    for b in random_batches(3, 5, 50, 4, 9, seed=0):
        lengths = b.src_mask.sum(1)
        assert len(b) == 5 and lengths.min() >= 4 and lengths.max() <= 9 and b.src.max() < 50
    b = length_batch(100, 8, 50, seed=0)
    assert b.src.shape == (12, 8) and b.src_mask.all() and b.tgt_mask.sum(1).eq(8).all()  # 7 words + <eos>


def test_sequential_steps_count_layers_for_the_transformer_and_positions_for_the_gru():
    assert sequential_steps(CONFIGS["transformer-gpu"], 256) == 6
    assert sequential_steps(CONFIGS["bahdanau-gpu"], 256) == 512


def test_throughput_alternates_the_models_and_reports_tokens_per_second():
    ours = build_model(CONFIGS["transformer-tiny"], 60)
    theirs = to_torch(ours)
    before = [p.clone() for p in ours.parameters()]
    batches = random_batches(2, 4, 60, 3, 6, seed=0)
    result = throughput({"ours": ours, "torch": theirs}, batches, rounds=2, steps=2, warmup=1)
    real = sum(int(b.tgt_mask.sum()) for b in batches)  # 2 steps a round: each batch once
    assert len(result["rounds"]) == 2 and set(result["rounds"][0]) == {"ours", "torch"}
    for name in ("ours", "torch"):
        assert result["tokens_per_second"][name] == pytest.approx(2 * real / result["seconds"][name])
        assert result["tokens_per_cpu_second"][name] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, ours.parameters()))  # it trained: Adam stepped


def test_step_time_by_length_gives_a_row_per_model_and_length():
    models = {
        "GRU": ("bahdanau-tiny", CONFIGS["bahdanau-tiny"], build_model(CONFIGS["bahdanau-tiny"], 60)),
        "Transformer": ("transformer-tiny", CONFIGS["transformer-tiny"], build_model(CONFIGS["transformer-tiny"], 60)),
    }
    rows = step_time_by_length(models, [4, 8], tokens=32, vocab=60, rounds=3)
    assert [(r["model"], r["length"], r["sentences"]) for r in rows] == [
        ("GRU", 4, 8),
        ("GRU", 8, 4),
        ("Transformer", 4, 8),
        ("Transformer", 8, 4),
    ]
    for r in rows:
        assert r["spread"][0] <= r["seconds"] <= r["spread"][1]
        assert r["tokens_per_second"] == pytest.approx(r["sentences"] * r["length"] / r["seconds"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: bf16 throughput on it, synchronised")
def test_throughput_on_a_gpu_with_bf16():
    ours = build_model(CONFIGS["transformer-tiny"], 60).cuda()
    batches = [b.to("cuda") for b in random_batches(2, 4, 60, 3, 6, seed=0)]
    result = throughput({"ours": ours, "torch": to_torch(ours).cuda()}, batches, rounds=2, steps=2, warmup=1, bf16=True)
    assert all(v > 0 for v in result["tokens_per_second"].values())
