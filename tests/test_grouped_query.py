"""Chapter 11's grouped-query attention: chapter 6's multi-head attention when every query head has its own key
head, PyTorch's enable_gqa attention when heads are shared, masks respected, and the key/value cache's size."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.models.attention import causal_mask, padding_mask
from transformer_course.models.grouped_query import GroupedQueryAttention, from_multihead, kv_cache_bytes_per_token
from transformer_course.models.multihead import MultiHeadAttention, merge_heads, split_heads


def _sdpa_reference(layer, query, key, value, mask=None):
    """The layer's computation with torch's SDPA sharing the key/value heads (enable_gqa=True)."""
    q = split_heads(layer.w_q(query), layer.n_heads)  # (B, h, T_q, d_k)
    k = split_heads(layer.w_k(key), layer.n_kv_heads)  # (B, g, T_k, d_k)
    v = split_heads(layer.w_v(value), layer.n_kv_heads)
    if mask is not None and mask.dim() == 3:
        mask = mask[:, None]  # (B, 1, T_q, T_k)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return layer.w_o(merge_heads(out))


def _repeat_reference(layer, query, key, value):
    """The same with each key/value head copied for its r query heads (repeat_interleave)."""
    q = split_heads(layer.w_q(query), layer.n_heads)
    k = split_heads(layer.w_k(key), layer.n_kv_heads).repeat_interleave(layer.group, dim=1)  # (B, h, T_k, d_k)
    v = split_heads(layer.w_v(value), layer.n_kv_heads).repeat_interleave(layer.group, dim=1)
    weights = torch.softmax(q @ k.transpose(-2, -1) / layer.d_k**0.5, dim=-1)
    return layer.w_o(merge_heads(weights @ v)), weights


@pytest.mark.parametrize("bias", [True, False])
def test_as_many_kv_heads_as_query_heads_is_chapter_6s_multihead_attention(bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, bias=bias).double()
    gqa = from_multihead(mha)
    assert gqa.n_kv_heads == 4 and gqa.w_k.weight.shape == (16, 16)
    x, memory = torch.randn(2, 5, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    mask = padding_mask(torch.tensor([7, 3]), 7)
    with torch.no_grad():
        for args in ((x, x, x, causal_mask(5)), (x, memory, memory, mask)):
            out, weights = gqa(*args)
            out_mha, weights_mha = mha(*args)
            assert (out - out_mha).abs().max().item() < 1e-12
            assert (weights - weights_mha).abs().max().item() < 1e-12


@pytest.mark.parametrize("n_kv_heads", [1, 2])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding+causal"])
def test_shared_kv_heads_equal_torch_sdpa_with_enable_gqa(n_kv_heads, mask_kind):
    torch.manual_seed(n_kv_heads)
    layer = GroupedQueryAttention(16, 4, n_kv_heads)
    x = torch.randn(3, 6, 16)
    mask = None
    if mask_kind == "causal":
        mask = causal_mask(6)
    elif mask_kind == "padding+causal":
        mask = padding_mask(torch.tensor([6, 4, 1]), 6) & causal_mask(6)  # (B, T, T)
    with torch.no_grad():
        out, weights = layer(x, x, x, mask)
        expected = _sdpa_reference(layer, x, x, x, mask)
    assert out.shape == (3, 6, 16) and weights.shape == (3, 4, 6, 6)
    assert (out - expected).abs().max().item() < 1e-6


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3])
def test_query_head_i_reads_kv_head_i_over_r_as_repeat_interleave(n_kv_heads):
    torch.manual_seed(5)
    layer = GroupedQueryAttention(18, 6, n_kv_heads)
    query, memory = torch.randn(2, 4, 18), torch.randn(2, 7, 18)
    with torch.no_grad():
        out, weights = layer(query, memory, memory)
        expected, expected_weights = _repeat_reference(layer, query, memory, memory)
    assert (out - expected).abs().max().item() < 1e-6 and (weights - expected_weights).abs().max().item() < 1e-6
    assert layer.w_k.weight.shape == (n_kv_heads * 3, 18)  # only g key heads are projected (and cached)


def test_masks_are_respected():
    torch.manual_seed(6)
    layer = GroupedQueryAttention(8, 4, 2).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 3:] = torch.randn(2, 2, 8, dtype=torch.float64)
    per_head = torch.rand(2, 4, 5, 5) > 0.5  # (B, h, T_q, T_k): a different mask for every query head
    per_head[..., 0] = True
    with torch.no_grad():
        before, weights = layer(x, x, x, causal_mask(5))
        after, _ = layer(changed, changed, changed, causal_mask(5))
        _, per_head_weights = layer(x, x, x, per_head)
    assert (before[:, :3] - after[:, :3]).abs().max().item() < 1e-12  # the future changes no earlier output
    assert (before[:, 3:] - after[:, 3:]).abs().max().item() > 1e-6
    assert weights.masked_select(~causal_mask(5)).abs().sum().item() == 0.0
    assert per_head_weights.masked_select(~per_head).abs().sum().item() == 0.0


def test_mean_pooling_conversion_averages_each_groups_kv_heads():
    torch.manual_seed(7)
    mha = MultiHeadAttention(12, 4).double()
    gqa = from_multihead(mha, n_kv_heads=2)  # r = 2: heads (0, 1) -> 0, (2, 3) -> 1; d_k = 3
    rows = lambda w, head: w[3 * head : 3 * head + 3]
    for name in ("w_k", "w_v"):
        mine, theirs = getattr(gqa, name), getattr(mha, name)
        for g in range(2):
            pooled = (rows(theirs.weight, 2 * g) + rows(theirs.weight, 2 * g + 1)) / 2
            assert torch.allclose(rows(mine.weight, g), pooled, atol=1e-15, rtol=0)
            assert torch.allclose(rows(mine.bias, g), (rows(theirs.bias, 2 * g) + rows(theirs.bias, 2 * g + 1)) / 2)
    assert torch.equal(gqa.w_q.weight, mha.w_q.weight) and torch.equal(gqa.w_o.bias, mha.w_o.bias)
    # a model whose paired heads already agree loses nothing in the conversion
    with torch.no_grad():
        for name in ("w_k", "w_v"):
            w, b = getattr(mha, name).weight, getattr(mha, name).bias
            w[3:6], w[9:12], b[3:6], b[9:12] = w[0:3], w[6:9], b[0:3], b[6:9]
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    with torch.no_grad():
        assert (from_multihead(mha, 2)(x, x, x)[0] - mha(x, x, x)[0]).abs().max().item() < 1e-12


def test_kv_cache_bytes_per_token_by_hand():
    # 80 layers, 8 kv heads of 128 dimensions, 16-bit numbers: 2 (K, V) * 80 * 8 * 128 * 2 bytes
    assert kv_cache_bytes_per_token(80, 8, 128) == 327_680
    assert kv_cache_bytes_per_token(80, 64, 128) == 8 * 327_680  # no grouping: eight times as much
    assert kv_cache_bytes_per_token(2, 1, 16, bytes_per_number=4) == 256  # multi-query, float32


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: GroupedQueryAttention(16, 4, 3), "n_heads=4 is not divisible by n_kv_heads=3"),
        (lambda: GroupedQueryAttention(18, 4, 2), "d_model=18 is not divisible by n_heads=4"),
        (lambda: GroupedQueryAttention(16, 4, 8), "n_kv_heads=8 is more than n_heads=4"),
        (lambda: GroupedQueryAttention(16, 4, 0), "n_kv_heads must be a positive int"),
        (lambda: GroupedQueryAttention(16, 4, 2)(*[torch.ones(1, 3, 8)] * 3), "d_model=16"),
        (
            lambda: GroupedQueryAttention(8, 4, 2)(*[torch.ones(1, 3, 8)] * 3, torch.ones(1, 2, 3, 3) > 0),
            "1 or n_heads=4",
        ),
        (lambda: kv_cache_bytes_per_token(0, 8, 128), "n_layers must be a positive int"),
    ],
)
def test_bad_arguments_say_what_was_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_from_multihead_needs_a_multihead_attention():
    with pytest.raises(TypeError, match="expected a MultiHeadAttention"):
        from_multihead(torch.nn.Linear(4, 4))  # type: ignore[arg-type]
