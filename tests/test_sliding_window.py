"""Chapter 11's sliding-window masks and the receptive field of a stack of them."""

import pytest
import torch

from transformer_course.models.attention import causal_mask
from transformer_course.models.sliding_window import (
    measured_receptive_field,
    reachability,
    receptive_field,
    sliding_window_mask,
)


@pytest.mark.parametrize("t, window", [(1, 1), (6, 1), (6, 3), (6, 6), (4, 10)])
def test_each_row_sees_the_last_window_positions(t, window):
    mask = sliding_window_mask(t, window)
    assert mask.dtype == torch.bool and mask.shape == (t, t)
    assert mask.sum(dim=1).tolist() == [min(i + 1, window) for i in range(t)]
    assert not (mask & ~causal_mask(t)).any()  # never a future key
    for i in range(t):
        assert mask[i, max(0, i - window + 1) : i + 1].all()  # the window is contiguous and ends at i


def test_a_window_as_long_as_the_sequence_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(7, 7), causal_mask(7))


def test_reachability_by_hand():
    # window 2, two layers: position 4 reads 3 and 4, which read 2, 3 and 4.
    reach = reachability(6, 2, 2)
    assert reach[4].nonzero().flatten().tolist() == [2, 3, 4]
    assert torch.equal(reachability(5, 3, 0), torch.eye(5, dtype=torch.bool))


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("layers", [0, 1, 2, 3, 6])
def test_propagated_receptive_field_matches_the_closed_form(window, layers):
    assert measured_receptive_field(window, layers) == receptive_field(window, layers) == layers * (window - 1) + 1
    # near the start the field is cut short by the sequence itself, and it is always a contiguous run ending at i
    t = 12
    reach = reachability(t, window, layers)
    for i in range(t):
        assert reach[i].nonzero().flatten().tolist() == list(
            range(max(0, i - receptive_field(window, layers) + 1), i + 1)
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: sliding_window_mask(4, 0), "window must be a positive int"),
        (lambda: sliding_window_mask(0, 2), "t must be a positive int"),
        (lambda: receptive_field(3, -1), "layers must be a non-negative int"),
        (lambda: measured_receptive_field(0, 2), "window must be a positive int"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
