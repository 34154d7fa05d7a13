"""Chapter 11's rotary position embedding: scores that depend only on the relative position, lengths kept."""

import math

import pytest
import torch

from transformer_course.models.rotary import rotary_angles, rotate


def _at(x, position):
    """x (d,) rotated as if it sat at ``position``."""
    return rotate(x[None, :], torch.tensor([position]))[0]


@pytest.mark.parametrize("d_head", [2, 8, 64])
def test_score_depends_only_on_the_relative_position(d_head):
    torch.manual_seed(d_head)
    q, k = torch.randn(d_head), torch.randn(d_head)
    for m, n in [(0, 0), (3, 1), (1, 3), (17, 5), (40, 40)]:
        base = _at(q, m) @ _at(k, n)
        for shift in (1, 7, 100, 1000):
            assert abs((_at(q, m + shift) @ _at(k, n + shift)) - base).item() < 1e-5, (m, n, shift)
    # and it does depend on the relative position: else the test above would prove nothing
    assert abs((_at(q, 5) @ _at(k, 0)) - (_at(q, 0) @ _at(k, 0))).item() > 1e-3


def test_rotation_keeps_norms_and_position_zero_is_the_identity():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 10, 16)  # (B, h, t, d_head)
    rotated = rotate(x)
    assert rotated.shape == x.shape and rotated.dtype == x.dtype
    assert (rotated.norm(dim=-1) - x.norm(dim=-1)).abs().max().item() < 1e-5
    assert torch.equal(rotated[..., 0, :], x[..., 0, :])  # position 0: cos 0 = 1, sin 0 = 0
    assert not torch.allclose(rotated[..., 1:, :], x[..., 1:, :])


def test_pairs_turn_by_position_times_theta_i():
    # d_head = 4: pairs (0, 1) with theta_0 = 1 and (2, 3) with theta_1 = 10000^(-1/2) = 0.01
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    out = rotate(x, torch.tensor([3]))[0]
    expected = [math.cos(3), math.sin(3), -math.sin(0.03), math.cos(0.03)]
    assert torch.allclose(out, torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=0)
    assert torch.allclose(rotary_angles(torch.tensor([2]), 4), torch.tensor([[2.0, 0.02]], dtype=torch.float64))


def test_explicit_positions_continue_a_cache():
    torch.manual_seed(2)
    x = torch.randn(1, 9, 8)
    whole = rotate(x)
    assert torch.allclose(rotate(x[:, 6:], torch.arange(6, 9)), whole[:, 6:], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: rotate(torch.ones(3, 5)), "d_head must be even"),
        (lambda: rotate(torch.ones(3, 4), torch.arange(4)), "t=3"),
        (lambda: rotate(torch.ones(4)), "at least 2 dimensions"),
        (lambda: rotary_angles(torch.tensor([True]), 4), "real-valued"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
