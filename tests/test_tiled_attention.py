"""Chapter 11's online softmax and tiled attention against PyTorch's own softmax and scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.models.tiled_attention import online_softmax, score_bytes, tile_schedule, tiled_attention

ATOL = 1e-6  # float32


@pytest.mark.parametrize("n, block", [(1, 1), (7, 1), (7, 3), (16, 4), (17, 4), (10, 10), (5, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_equals_torch_sdpa_in_float32(n, block, causal):
    torch.manual_seed(n * 100 + block)
    q, k, v = (torch.randn(2, 3, n, 8) for _ in range(3))  # (B, h, n, d)
    ours = tiled_attention(q, k, v, causal=causal, block=block)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert ours.shape == theirs.shape == (2, 3, n, 8)
    assert (ours - theirs).abs().max().item() < ATOL


@pytest.mark.parametrize("n_q, n_k", [(5, 9), (9, 5)])
@pytest.mark.parametrize("causal", [False, True])
def test_cross_lengths_and_value_size_follow_sdpa(n_q, n_k, causal):
    torch.manual_seed(3)
    q, k, v = torch.randn(2, n_q, 6), torch.randn(2, n_k, 6), torch.randn(2, n_k, 5)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # top-left aligned causal mask
    assert (tiled_attention(q, k, v, causal=causal, block=2) - theirs).abs().max().item() < ATOL


def test_large_scores_do_not_overflow():
    torch.manual_seed(4)
    q, k, v = 30 * torch.randn(1, 12, 8), 30 * torch.randn(1, 12, 8), torch.randn(1, 12, 8)  # scores in the hundreds
    ours = tiled_attention(q, k, v, block=5)
    assert torch.isfinite(ours).all()
    assert (ours - F.scaled_dot_product_attention(q, k, v)).abs().max().item() < ATOL


def test_causal_tiles_skip_the_future_and_stay_small():
    assert len(tile_schedule(8, 8, 2, causal=False)) == 16
    causal = tile_schedule(8, 8, 2, causal=True)
    assert len(causal) == 4 * 5 // 2  # b (b + 1) / 2 with b = 4 blocks
    assert all(j0 <= i1 - 1 for i0, i1, j0, j1 in causal)  # no tile lies wholly in the future
    assert all(i1 - i0 <= 2 and j1 - j0 <= 2 for i0, i1, j0, j1 in causal)
    # every (query, key) pair a causal mask allows is covered exactly once
    covered = torch.zeros(8, 8, dtype=torch.int64)
    for i0, i1, j0, j1 in causal:
        covered[i0:i1, j0:j1] += 1
    assert torch.equal(covered.tril(), torch.ones(8, 8, dtype=torch.int64).tril())


def test_no_score_larger_than_a_tile_is_formed(monkeypatch):
    # Every score passes through a matmul of q with k^T; record the shapes of the products that are formed.
    shapes = []
    real_matmul = torch.Tensor.__matmul__

    def spy(a, b):
        out = real_matmul(a, b)
        shapes.append(tuple(out.shape))
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", spy)
    q, k, v = torch.randn(1, 20, 4), torch.randn(1, 20, 4), torch.randn(1, 20, 4)
    tiled_attention(q, k, v, block=6)
    monkeypatch.undo()
    assert shapes and max(s[-2] * s[-1] for s in shapes) <= 6 * 6
    assert score_bytes(4096) == 4096 * 4096 * 4 and score_bytes(4096, block=64) == 64 * 64 * 4
    assert score_bytes(10, block=64, bytes_per_number=2) == 10 * 10 * 2


@pytest.mark.parametrize("block", [1, 3, 8, 100])
def test_online_softmax_equals_torch_softmax(block):
    torch.manual_seed(block)
    scores = torch.randn(4, 5, 11)
    assert (online_softmax(scores, block=block) - torch.softmax(scores, dim=-1)).abs().max().item() < ATOL


def test_online_softmax_with_huge_values_and_minus_infinity():
    scores = torch.tensor(
        [
            [1e4, 1e4 + 1.0, -1e4, 3.0, 1e4 - 2.0, 0.0],  # exp(1e4) overflows float32: must not matter
            [float("-inf"), float("-inf"), float("-inf"), 2.0, float("-inf"), 1.0],  # first blocks all -inf
            [5.0, float("-inf"), 80.0, 90.0, float("-inf"), 100.0],  # the maximum grows block after block
            [3.0e38, 3.0e38, -3.0e38, 0.0, 1.0, 2.0],  # near float32's largest number
        ]
    )
    expected = torch.softmax(scores, dim=-1)
    for block in (1, 2, 4, 6):
        ours = online_softmax(scores, block=block)
        assert torch.isfinite(ours).all(), block
        assert (ours - expected).abs().max().item() < ATOL, block
    assert ours[1, :3].eq(0).all() and ours[1, 4] == 0  # -inf gets exactly zero


def test_a_row_of_only_minus_infinity_is_nan_as_in_torch():
    scores = torch.full((1, 4), float("-inf"))
    assert torch.isnan(torch.softmax(scores, dim=-1)).all() and torch.isnan(online_softmax(scores, block=2)).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: tiled_attention(torch.ones(3, 4), torch.ones(3, 5), torch.ones(3, 4)), "same last dimension"),
        (lambda: tiled_attention(torch.ones(3, 4), torch.ones(3, 4), torch.ones(2, 4)), "same length"),
        (lambda: tiled_attention(torch.ones(3, 4), torch.ones(3, 4), torch.ones(3, 4), block=0), "block must be"),
        (lambda: online_softmax(torch.ones(3), block=-1), "block must be"),
        (lambda: score_bytes(0), "n must be"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
