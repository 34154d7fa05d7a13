"""Sampling (sampling.py): the exact filtered distributions on hand-worked cases, reproducible samples, sample
frequencies against the distribution, generation's stopping rule, and clear errors."""

import math

import pytest
import torch

from transformer_course.decoding.sampling import filter_logits, generate, sample_next


def logits_of(probs: list[float]) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float64).log()


def close(actual: torch.Tensor, expected: list[float]) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-12, rtol=0)


def test_temperature_scales_the_logits():
    logits = logits_of([1, 2, 4])  # weights 1 : 2 : 4
    close(filter_logits(logits), [1 / 7, 2 / 7, 4 / 7])
    close(filter_logits(logits, temperature=0.5), [1 / 21, 4 / 21, 16 / 21])  # squared: sharper
    close(filter_logits(logits, temperature=2.0), [w / (1 + 2**0.5 + 2) for w in (1, 2**0.5, 2)])  # square roots


def test_top_k_keeps_the_k_largest_and_every_tie_with_the_kth():
    logits = torch.tensor([3.0, 1.0, 2.0, 2.0, 0.0], dtype=torch.float64)
    e = math.e
    z = e**3 + 2 * e**2
    close(filter_logits(logits, top_k=2), [e**3 / z, 0, e**2 / z, e**2 / z, 0])  # 2 and 2 tie: both kept
    close(filter_logits(logits, top_k=3), [e**3 / z, 0, e**2 / z, e**2 / z, 0])
    close(filter_logits(logits, top_k=1), [1, 0, 0, 0, 0])
    close(filter_logits(logits, top_k=5), filter_logits(logits).tolist())
    close(filter_logits(logits, top_k=50), filter_logits(logits).tolist())  # k >= V: every token


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    logits = logits_of([0.5, 0.25, 0.125, 0.125])
    close(filter_logits(logits, top_p=0.5), [1, 0, 0, 0])  # 0.5 reaches 0.5 exactly: one token
    close(filter_logits(logits, top_p=0.51), [2 / 3, 1 / 3, 0, 0])
    close(filter_logits(logits, top_p=0.75), [2 / 3, 1 / 3, 0, 0])  # the boundary, 0.5 + 0.25
    close(filter_logits(logits, top_p=0.8), [0.5, 0.25, 0.125, 0.125])  # the two 0.125 tie: both kept
    close(filter_logits(logits, top_p=1.0), [0.5, 0.25, 0.125, 0.125])
    close(filter_logits(logits, top_p=1e-9), [1, 0, 0, 0])  # always at least one token
    # float32 and half-precision logits: the boundary still holds despite rounding, and the dtype is kept
    for dtype, atol in ((torch.float32, 1e-6), (torch.float16, 1e-3), (torch.bfloat16, 1e-2)):
        probs = filter_logits(logits.to(dtype), top_p=0.75)
        assert probs.dtype == dtype
        torch.testing.assert_close(probs, torch.tensor([2 / 3, 1 / 3, 0, 0], dtype=dtype), atol=atol, rtol=0)


def test_temperature_then_top_k_then_top_p():
    logits = logits_of([0.4, 0.3, 0.2, 0.1])
    # top-k 3 renormalises to 4/9, 3/9, 2/9; top-p 0.7 then needs 4/9 + 3/9 = 7/9 >= 0.7
    close(filter_logits(logits, top_k=3, top_p=0.7), [4 / 7, 3 / 7, 0, 0])
    # temperature 0.5 squares the weights first: 16, 9, 4, 1 over 30; top-p 0.5: 16/30 alone reaches it
    close(filter_logits(logits, temperature=0.5, top_p=0.5), [1, 0, 0, 0])


def test_filtering_keeps_impossible_tokens_impossible_and_batches():
    logits = torch.tensor([[0.0, -math.inf, 1.0], [2.0, 2.0, -math.inf]], dtype=torch.float64)
    probs = filter_logits(logits, top_p=1.0)
    assert probs[0, 1] == 0 and probs[1, 2] == 0
    close(probs[1], [0.5, 0.5, 0])
    batched = filter_logits(torch.randn(2, 3, 7, dtype=torch.float64), top_k=3, top_p=0.8)
    assert batched.shape == (2, 3, 7)
    torch.testing.assert_close(batched.sum(-1), torch.ones(2, 3, dtype=torch.float64))


def test_filtering_does_not_depend_on_the_order_of_the_vocabulary():
    g = torch.Generator().manual_seed(0)
    logits = torch.randint(0, 4, (5, 9), generator=g).double()  # many ties
    perm = torch.randperm(9, generator=g)
    for options in (dict(top_k=3), dict(top_p=0.6), dict(top_k=4, top_p=0.5, temperature=0.7)):
        torch.testing.assert_close(filter_logits(logits[:, perm], **options), filter_logits(logits, **options)[:, perm])


def test_a_fixed_generator_gives_fixed_samples():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(1))
    draws = [sample_next(logits, torch.Generator().manual_seed(7), top_p=0.9) for _ in range(2)]
    assert draws[0].dtype == torch.int64 and draws[0].shape == (4,)
    assert torch.equal(draws[0], draws[1])
    assert torch.equal(sample_next(logits, greedy=True), logits.argmax(-1))


def test_sample_frequencies_match_the_filtered_distribution():
    logits = torch.tensor([2.0, 1.5, 1.0, 1.0, 0.2, -1.0, -3.0])
    probs = filter_logits(logits, temperature=0.9, top_k=5, top_p=0.9).double()
    n = 20_000
    draws = sample_next(logits.expand(n, -1), torch.Generator().manual_seed(3), temperature=0.9, top_k=5, top_p=0.9)
    counts = torch.bincount(draws, minlength=7).double()
    assert (counts[probs == 0] == 0).all()  # a filtered token is never drawn
    kept = probs > 0
    expected = n * probs[kept]
    chi2 = float(((counts[kept] - expected) ** 2 / expected).sum())
    assert chi2 < 20.5, (chi2, counts, expected)  # chi-square with <= 4 degrees of freedom: p < 0.0005 above 20.5


class CountingModel(torch.nn.Module):
    """A stand-in language model whose next token is always (last token + 1) mod V, by a wide margin."""

    vocab, max_len = 6, 20

    def last_logits(self, ids):
        return 10.0 * torch.nn.functional.one_hot((ids[:, -1] + 1) % self.vocab, self.vocab).float()

    def start_cache(self):
        return []

    def step(self, cache, ids):
        cache.extend(ids.unbind(1))
        return self.last_logits(torch.stack(cache, 1))[:, None].expand(-1, ids.shape[1], -1)


@pytest.mark.parametrize("use_cache", [True, False])
def test_generation_stops_at_eos_and_pads_finished_rows_with_it(use_cache):
    prompt = torch.tensor([[0, 1], [2, 3]])
    out = generate(CountingModel(), prompt, 10, greedy=True, eos_id=5, use_cache=use_cache)
    assert out.tolist() == [[0, 1, 2, 3, 4, 5], [2, 3, 4, 5, 5, 5]]  # row 1 finished first
    assert generate(CountingModel(), prompt, 3, greedy=True, use_cache=use_cache).tolist() == [
        [0, 1, 2, 3, 4],
        [2, 3, 4, 5, 0],
    ]


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(temperature=0), ValueError, "temperature"),
        (dict(temperature=-1.0), ValueError, "temperature"),
        (dict(temperature=math.nan), ValueError, "temperature"),
        (dict(temperature="hot"), TypeError, "temperature"),
        (dict(top_k=0), ValueError, "top_k"),
        (dict(top_k=2.5), ValueError, "top_k"),
        (dict(top_k=True), ValueError, "top_k"),
        (dict(top_p=0.0), ValueError, "top_p"),
        (dict(top_p=1.5), ValueError, "top_p"),
        (dict(top_p="all"), TypeError, "top_p"),
    ],
)
def test_bad_options_are_named(options, error, match):
    with pytest.raises(error, match=match):
        filter_logits(torch.zeros(3), **options)
    with pytest.raises(error, match=match):
        sample_next(torch.zeros(1, 3), **options)
    with pytest.raises(error, match=match):
        generate(CountingModel(), torch.zeros(1, 1, dtype=torch.long), 2, **options)


def test_bad_logits_and_prompts_are_named():
    with pytest.raises(TypeError, match="floating-point"):
        filter_logits(torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match="floating-point"):
        filter_logits([0.0, 1.0])
    with pytest.raises(ValueError, match=r"\(\.\.\., V\)"):
        filter_logits(torch.tensor(1.0))
    with pytest.raises(ValueError, match="NaN"):
        filter_logits(torch.tensor([0.0, math.nan]))
    with pytest.raises(ValueError, match="all -inf"):
        filter_logits(torch.full((2, 3), -math.inf))
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        sample_next(torch.zeros(2, 3, 4))
    with pytest.raises(TypeError, match="int64"):
        generate(CountingModel(), torch.zeros(1, 2), 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(CountingModel(), torch.zeros(1, 2, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="max_len"):
        generate(CountingModel(), torch.zeros(1, 2, dtype=torch.long), 20)
    with pytest.raises(TypeError, match="start_cache"):
        generate(torch.nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long), 3)
