"""Values cross between the grader and the kernel as JSON data; malformed data is refused, never run."""

import json
import math

import pytest
import torch

from transformer_course.grading.codec import CodecError, decode, encode


@pytest.mark.parametrize(
    "value",
    [
        torch.randn(2, 3, dtype=torch.float64),
        torch.tensor([[True, False]]),
        torch.arange(5),
        torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
        (torch.ones(2), [1, 2.5, None, "x"], {"w": torch.zeros(1, 2)}),
        torch.empty(0, 3),
    ],
)
def test_round_trip_is_exact(value):
    back = decode(json.loads(json.dumps(encode(value), allow_nan=False)))

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))

    assert same(value, back)


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        {"__tensor__": "float64", "shape": [2], "data": [1.0]},
        {"__tensor__": "object", "shape": [1], "data": [1]},
        {"__tensor__": "float64", "shape": [-1], "data": []},
        {"__tensor__": "bool", "shape": [1], "data": [1]},
        {"__tensor__": "int64", "shape": [1], "data": [1.5]},
        {"__tensor__": "float64", "shape": [1], "data": ["__import__('os')"]},
        {"__seq__": "tuple", "items": 3},
        {"surprise": 1},
    ],
)
def test_malformed_values_are_refused(bad):
    with pytest.raises(CodecError):
        decode(bad)


def test_unsupported_values_are_refused():
    with pytest.raises(CodecError):
        encode(object())
    with pytest.raises(CodecError):
        encode(torch.zeros(2_000_000))
