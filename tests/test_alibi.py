"""Chapter 11's ALiBi: the paper's slopes and the linear distance biases."""

import pytest
import torch

from transformer_course.models.alibi import alibi_bias, alibi_slopes


def test_eight_heads_get_one_half_to_one_over_256():
    assert alibi_slopes(8).tolist() == [1 / 2**i for i in range(1, 9)]


def test_sixteen_heads_interleave_the_geometric_means():
    assert torch.allclose(alibi_slopes(16), torch.tensor([2 ** (-0.5 * i) for i in range(1, 17)], dtype=torch.float64))


def test_twelve_heads_follow_the_papers_rule():
    # the 8 slopes of 8 heads, then the 1st, 3rd, 5th and 7th slopes of 16 heads: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expected = [2.0**-i for i in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    assert torch.allclose(alibi_slopes(12), torch.tensor(expected, dtype=torch.float64), atol=1e-15, rtol=0)
    assert alibi_slopes(1).tolist() == [2.0**-8] and torch.allclose(
        alibi_slopes(3), torch.tensor([2.0**-4, 2.0**-8, 2.0**-2], dtype=torch.float64)
    )


def test_bias_is_minus_slope_times_distance():
    bias = alibi_bias(2, 3, 3)  # slopes 1/16, 1/256
    assert bias.shape == (2, 3, 3)
    distance = torch.tensor([[0, 1, 2], [1, 0, 1], [2, 1, 0]], dtype=torch.float64)
    assert torch.equal(bias[0], -distance / 16) and torch.equal(bias[1], -distance / 256)


def test_queries_default_to_the_last_positions():
    bias = alibi_bias(4, 2, 5)  # queries at positions 3 and 4 of 5 keys
    slope = alibi_slopes(4)[:, None]
    assert torch.equal(bias[:, 1], -slope * torch.tensor([4.0, 3, 2, 1, 0], dtype=torch.float64))
    assert torch.equal(bias[:, 0], -slope * torch.tensor([3.0, 2, 1, 0, 1], dtype=torch.float64))
    assert torch.equal(alibi_bias(4, 2, 5, q_offset=0)[:, 0], -slope * torch.arange(5, dtype=torch.float64))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: alibi_slopes(0), "n_heads must be a positive int"),
        (lambda: alibi_bias(4, 0, 3), "t_q must be a positive int"),
        (lambda: alibi_bias(4, 2, 3, q_offset=1.5), "q_offset must be an int"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
