"""Sliding-window attention masks and how far back a stack of them reaches (chapter 11).

A causal sliding window (Longformer, Beltagy et al. 2020) lets position i attend only to the last ``window``
positions, itself included: keys j with i - window < j <= i. A layer then costs t * window scores instead of
t^2 / 2, but one layer sees only window - 1 positions back.

Stacked layers see further: what position i reads in layer l was itself computed from window - 1 positions
further back in layer l - 1. So after L layers information reaches i from L (window - 1) positions back, and
the receptive field, counted in positions with i itself included, is

    receptive_field(window, L) = L (window - 1) + 1

(the Longformer paper's "l x w", up to how the window is counted). ``reachability`` finds the same number
without the argument: it propagates "may information from j reach i" through the masks, layer by layer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import positive_int

__all__ = ["sliding_window_mask", "reachability", "measured_receptive_field", "receptive_field"]


def _layers(layers: object) -> int:
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
        raise ValueError(f"layers must be a non-negative int, got {layers!r}")
    return layers


def sliding_window_mask(t: int, window: int, device: torch.device | str | None = None) -> Tensor:
    """(t, t) boolean mask, True = may attend: query i sees keys j with 0 <= i - j < window (itself included).

    Row i has min(i + 1, window) True entries. window >= t gives chapter 5's causal mask.
    """
    positive_int("the sequence length t", t)
    positive_int("window", window)
    i = torch.arange(t, device=device)[:, None]  # (t, 1) query positions
    j = torch.arange(t, device=device)[None, :]  # (1, t) key positions
    back = i - j  # (t, t): how many positions key j lies before query i (negative: in the future)
    return (back >= 0) & (back < window)


def reachability(t: int, window: int, layers: int) -> Tensor:
    """(t, t) boolean: True at (i, j) when the input at position j can influence layer ``layers``'s output at i.

    Zero layers: each position sees itself (the identity). Each layer: i is reached from j when i attends to
    some k that was already reached from j, a boolean matrix product of the mask with the previous reachability.
    """
    mask = sliding_window_mask(t, window).to(torch.int64)  # (t, t), 1 where i may attend to k
    reach = torch.eye(t, dtype=torch.int64)  # (t, t)
    for _ in range(_layers(layers)):
        reach = ((mask @ reach) > 0).to(torch.int64)  # path counts -> "some path exists"
    return reach.bool()


def measured_receptive_field(window: int, layers: int) -> int:
    """How many positions (itself included) reach the last position after ``layers`` layers, by ``reachability``.

    Measured on a sequence of layers * window + 1 positions: no layer moves information back window positions or
    more (the mask forbids it), so the last position's field is never cut short by the start of the sequence.
    """
    positive_int("window", window)
    t = _layers(layers) * window + 1
    return int(reachability(t, window, layers)[-1].sum())


def receptive_field(window: int, layers: int) -> int:
    """The closed form, layers * (window - 1) + 1 positions (see the module's docstring for the argument)."""
    positive_int("window", window)
    return _layers(layers) * (window - 1) + 1
