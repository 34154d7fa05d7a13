"""Chapter 11's linear attention: the recurrence equals the parallel causal form, and both equal the explicit
normalised similarity matrix phi(q) phi(k)^T."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.models.attention import causal_mask
from transformer_course.models.linear_attention import (
    feature_map,
    linear_attention,
    linear_attention_recurrent,
    linear_attention_step,
)


def _explicit(q, k, v, mask=None):
    """out_i = sum_j A_ij v_j / sum_j A_ij with A = phi(q) phi(k)^T, masked to zero where not allowed."""
    a = feature_map(q) @ feature_map(k).transpose(-2, -1)  # (..., n_q, n)
    if mask is not None:
        a = a * mask
    return (a @ v) / a.sum(dim=-1, keepdim=True)


def _inputs(n, d_k=4, d_v=3, seed=0):
    torch.manual_seed(seed)
    return torch.randn(2, 3, n, d_k), torch.randn(2, 3, n, d_k), torch.randn(2, 3, n, d_v)


@pytest.mark.parametrize("n", [1, 2, 9])
def test_recurrent_equals_parallel_causal(n):
    q, k, v = _inputs(n, seed=n)
    recurrent, parallel = linear_attention_recurrent(q, k, v), linear_attention(q, k, v, causal=True)
    assert recurrent.shape == parallel.shape == (2, 3, n, 3)
    assert (recurrent - parallel).abs().max().item() < 1e-6


def test_non_causal_equals_the_explicit_matrix_product():
    q, k, v = _inputs(7, seed=1)
    q = q[..., :5, :]  # fewer queries than keys is fine without a mask
    assert (linear_attention(q, k, v) - _explicit(q, k, v)).abs().max().item() < 1e-6


def test_causal_equals_the_explicit_masked_product_and_ignores_the_future():
    q, k, v = _inputs(8, seed=2)
    causal = linear_attention(q, k, v, causal=True)
    assert (causal - _explicit(q, k, v, causal_mask(8))).abs().max().item() < 1e-6
    assert (causal - linear_attention(q, k, v)).abs().max().item() > 1e-3  # the mask matters
    k2, v2 = k.clone(), v.clone()
    k2[..., 5:, :], v2[..., 5:, :] = torch.randn(2, 3, 3, 4), torch.randn(2, 3, 3, 3)
    assert torch.allclose(linear_attention(q, k2, v2, causal=True)[..., :5, :], causal[..., :5, :], atol=1e-6)


def test_the_state_has_a_fixed_size():
    q, k, v = _inputs(6, seed=3)
    state = (torch.zeros(2, 3, 4, 3), torch.zeros(2, 3, 4))
    for i in range(6):
        _, state = linear_attention_step(state, q[..., i, :], k[..., i, :], v[..., i, :])
        assert state[0].shape == (2, 3, 4, 3) and state[1].shape == (2, 3, 4)
    assert torch.allclose(state[1], feature_map(k).sum(dim=-2), atol=1e-6)  # z_n = sum of phi(k_j)


def test_feature_map_is_elu_plus_one_and_stays_positive_in_float32():
    x = torch.linspace(-80, 5, 341)
    assert (feature_map(x) - (F.elu(x) + 1)).abs().max().item() < 1e-6
    assert (feature_map(x) > 0).all()  # elu(x) + 1 computed literally is 0 below about -17 in float32
    x = torch.tensor([-30.0, 0.0, 100.0], requires_grad=True)
    feature_map(x).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad[2] == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: linear_attention(torch.ones(3, 4), torch.ones(3, 5), torch.ones(3, 2)), "same last dimension"),
        (lambda: linear_attention(torch.ones(3, 4), torch.ones(3, 4), torch.ones(2, 2)), "same length"),
        (
            lambda: linear_attention(torch.ones(2, 4), torch.ones(3, 4), torch.ones(3, 2), causal=True),
            "as many queries",
        ),
        (lambda: linear_attention_recurrent(torch.ones(2, 4), torch.ones(3, 4), torch.ones(3, 2)), "as many queries"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
