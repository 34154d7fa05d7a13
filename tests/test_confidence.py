"""decoding.confidence (exercise 9.5's reference): the mean entropy of next-token distributions, against PyTorch's
own Categorical entropy, and what it says about bad input."""

import math

import pytest
import torch

from transformer_course.decoding.confidence import entropies, mean_entropy


def test_the_mean_entropy_equals_pytorchs_categorical_entropy_over_the_real_positions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=g, dtype=torch.float64) * 3  # (B, T, V)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 2, 4])[:, None]  # (B, T): 12 real positions
    expected = torch.distributions.Categorical(logits=logits[mask]).entropy().mean()
    assert torch.allclose(mean_entropy(logits, mask), expected, atol=1e-12)
    per_position = torch.distributions.Categorical(logits=logits).entropy()  # (B, T)
    assert torch.allclose(entropies(logits), per_position, atol=1e-12)


def test_the_entropy_is_zero_for_a_certain_model_and_log_v_for_a_uniform_one_without_nan():
    certain = torch.full((1, 2, 5), -1e4, dtype=torch.float64)
    certain[..., 3] = 0.0  # every other probability underflows to exactly 0
    assert torch.softmax(certain, -1)[0, 0, 0] == 0  # the case where p * log(p) would give nan
    h = mean_entropy(certain, torch.ones(1, 2, dtype=torch.bool))
    assert not h.isnan() and h.item() == pytest.approx(0.0, abs=1e-12)
    uniform = torch.zeros(2, 3, 7)
    assert mean_entropy(uniform, torch.ones(2, 3, dtype=torch.bool)).item() == pytest.approx(math.log(7))


def test_bad_input_says_what_was_wrong():
    logits = torch.zeros(2, 3, 5)
    with pytest.raises(ValueError, match=r"mask \(B, T\) expected, got \(2, 3, 5\) and \(3, 2\)"):
        mean_entropy(logits, torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask must be bool"):
        mean_entropy(logits, torch.ones(2, 3))
    with pytest.raises(ValueError, match="counts no position"):
        mean_entropy(logits, torch.zeros(2, 3, dtype=torch.bool))
