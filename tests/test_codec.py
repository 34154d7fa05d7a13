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


def test_a_dict_or_list_subclass_crosses_as_the_plain_value_without_running_its_methods():
    from collections import Counter, OrderedDict, defaultdict

    class Sly(dict):  # methods a hostile answer might override: none of them runs
        def items(self):
            raise RuntimeError("ran")

        def __iter__(self):
            raise RuntimeError("ran")

    class Rows(list):
        def __iter__(self):
            raise RuntimeError("ran")

    for value in (Counter({"l o": 5}), OrderedDict(a=1), defaultdict(int, b=2), Sly(c=3)):
        back = decode(json.loads(json.dumps(encode(value))))
        assert type(back) is dict and back == dict(dict.items(value))
    back = decode(json.loads(json.dumps(encode(Rows([1, 2])))))
    assert type(back) is list and back == [1, 2]
    with pytest.raises(CodecError, match="string keys"):
        encode(Counter({("l", "o"): 5}))


def test_an_answer_to_10_1_that_returns_a_counter_passes_as_the_self_check_says():
    # the self-check took (pair, Counter) and said it passed; the grader's codec refused the Counter: 0 points
    from collections import Counter

    from transformer_course.grading import registry

    ex = registry.get("10.1")
    for case in ex.cases(3):
        pair, words = registry.run_case(ex, ex.reference, case)
        sent = decode(json.loads(json.dumps(encode((pair, Counter(words))))))
        assert registry.verdict(ex, case, sent) is None, case.label
