"""Exercise 7.4, sentences self-attention cannot tell apart: the judge measures the pooled outputs."""

import pytest
import torch

from transformer_course.exercises import ch07
from transformer_course.grading import registry
from transformer_course.grading.registry import HIDDEN_SEED, PUBLIC_SEED, run_case, verdict
from transformer_course.models.attention import SelfAttention
from transformer_course.models.positional import PositionalEncoding

EX = registry.get("7.4")


@pytest.mark.parametrize("seed", [PUBLIC_SEED, HIDDEN_SEED, *range(1, 21)])
def test_the_reference_passes_every_case_of_any_seed(seed):
    # The grader draws a fresh hidden seed per run: the reference (and the notebook's solution) must not be lucky.
    for case in EX.cases(seed):
        assert verdict(EX, case, run_case(EX, EX.reference, case)) is None


def test_the_pooled_output_is_the_self_attention_layer_averaged():
    embedding, w_q, w_k, w_v, n = EX.cases(PUBLIC_SEED)[1].args
    layer = SelfAttention(embedding.shape[1], d_k=w_q.shape[0]).double()
    with torch.no_grad():
        for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
            getattr(layer, name).weight.copy_(w)
        ids = torch.tensor([2, 0, 1, 1, 0][:n] + [0] * max(0, n - 5))
        x = embedding[ids][None]
        with_positions = PositionalEncoding(embedding.shape[1], max_len=n).double()(x)
        for positions, inputs in ((False, x), (True, with_positions)):
            expected = layer(inputs)[0][0].mean(dim=0)
            assert torch.allclose(ch07.pooled_output(embedding, w_q, w_k, w_v, ids, positions), expected, atol=1e-12)


def test_every_reordering_with_two_different_tokens_passes_and_every_other_count_fails():
    g = torch.Generator().manual_seed(0)
    for case in EX.cases(PUBLIC_SEED):
        embedding, _, _, _, n = case.args
        V = embedding.shape[0]
        for _ in range(20):
            a = torch.randint(0, V, (n,), generator=g)
            b = a[torch.randperm(n, generator=g)]
            problem = verdict(EX, case, (a, b))
            if torch.equal(a, b):
                assert "the same sequence" in problem
            else:
                assert problem is None, (a, b, problem)
            c = b.clone()
            c[0] = (c[0] + 1) % V  # one token more of one kind, one fewer of another
            assert "without positions the layer already tells them apart" in verdict(EX, case, (a, c))


@pytest.mark.parametrize("index", range(len(EX.mistakes)))
def test_each_mistake_fails_a_public_case(index):
    mistake = EX.mistakes[index].implementation
    assert any(verdict(EX, case, run_case(EX, mistake, case)) for case in EX.cases(PUBLIC_SEED))


def _pair(n=4):
    a = torch.arange(n) % 9
    return a, a.roll(1)


@pytest.mark.parametrize(
    "answer, words",
    [
        ("dog bites man", "a pair of int64 tensors of shape (4,)"),
        (_pair()[0], "a pair of int64 tensors"),
        ((_pair()[0],), "a pair of int64 tensors"),
        ([[0, 1, 2, 3], [1, 2, 3, 0]], "the first sequence should be an int64 tensor"),
        ((_pair()[0].double(), _pair()[1]), "the first sequence should be an int64 tensor of token ids, got a float64"),
        ((_pair()[0], _pair()[1].int()), "the second sequence should be an int64 tensor"),
        ((_pair()[0] > 0, _pair()[1]), "int64 tensor"),
        ((torch.full((4,), float("nan")), _pair()[1]), "int64 tensor"),
        (_pair(5), "should have shape (4,)"),
        ((_pair()[0][None], _pair()[1]), "should have shape (4,), one token id per position, got (1, 4)"),
        ((_pair()[0], _pair()[1] + 9), "holds the id 12, but the vocabulary has V = 9 tokens, ids 0 to 8"),
        ((_pair()[0] - 1, _pair()[1]), "holds the id -1"),
        ((_pair()[0], _pair()[0].clone()), "the same sequence, [0, 1, 2, 3]"),
        ((_pair()[0], torch.tensor([0, 1, 2, 4])), "without positions the layer already tells them apart"),
    ],
)
def test_a_malformed_or_wrong_answer_gets_a_sentence(answer, words):
    case = EX.cases(PUBLIC_SEED)[0]
    assert case.args[0].shape[0] == 9 and case.args[4] == 4  # the case the answers above are written for
    problem = verdict(EX, case, answer)
    assert problem is not None and words in problem, problem


def test_a_pair_told_apart_only_by_rounding_is_not_enough():
    # Positions must make a real difference, not one at the level of rounding: an answer the judge accepts
    # differs by orders of magnitude more than the threshold, and one it refuses never reaches it.
    case = EX.cases(PUBLIC_SEED)[2]
    embedding, w_q, w_k, w_v, n = case.args
    a, b = ch07.indistinguishable_sentences(*case.args)
    apart = ch07.pooled_output(embedding, w_q, w_k, w_v, a, True) - ch07.pooled_output(
        embedding, w_q, w_k, w_v, b, True
    )
    assert apart.abs().max() > 3 * ch07.APART
    same = ch07.pooled_output(embedding, w_q, w_k, w_v, a, False) - ch07.pooled_output(
        embedding, w_q, w_k, w_v, b, False
    )
    assert same.abs().max() < 1e-14
