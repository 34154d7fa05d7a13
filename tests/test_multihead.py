"""The reference multi-head attention of chapter 6 against PyTorch's own, its masking properties, and its exercises."""

import math

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.models.attention import causal_mask, padding_mask, scaled_dot_product_attention
from transformer_course.models.multihead import (
    MultiHeadAttention,
    from_torch,
    merge_heads,
    split_heads,
    to_torch,
    torch_masks,
)

f64 = dict(dtype=torch.float64)


def _layer(d_model=16, n_heads=4, bias=True):
    return MultiHeadAttention(d_model, n_heads, bias=bias).double()


def _run_torch(theirs, q, k, v, key_padding=None, attn=None):
    return theirs(
        q, k, v, need_weights=True, average_attn_weights=False, **torch_masks(key_padding=key_padding, attn=attn)
    )


def _our_mask(key_padding, attn):
    if key_padding is None:
        return attn
    return key_padding if attn is None else key_padding & attn


def test_split_gives_head_i_the_ith_block_of_features():
    x = torch.randn(2, 3, 12, **f64)
    heads = split_heads(x, 3)  # (2, 3, 3, 4)
    assert heads.shape == (2, 3, 3, 4)
    for i in range(3):
        assert torch.equal(heads[:, i], x[..., 4 * i : 4 * (i + 1)])


@pytest.mark.parametrize(
    "shape, n_heads", [((2, 5, 12), 1), ((2, 5, 12), 3), ((1, 1, 6), 6), ((4, 7), 7), ((2, 3, 4, 8), 2)]
)
def test_merge_undoes_split(shape, n_heads):
    x = torch.randn(*shape, **f64)
    assert torch.equal(merge_heads(split_heads(x, n_heads)), x)


def _inputs(cross: bool, b=3, t_q=5, t_k=7, d=16):
    q = torch.randn(b, t_q, d, **f64)
    if not cross:
        return q, q, q
    memory = torch.randn(b, t_k, d, **f64)
    return q, memory, memory


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "cross, masks",
    [
        (False, "none"),
        (False, "padding"),
        (False, "causal"),
        (False, "padding+causal"),
        (True, "none"),
        (True, "padding"),
        (True, "attn"),
        (True, "padding+attn"),
    ],
)
def test_agrees_with_nn_multiheadattention_in_float64(cross, masks, bias):
    layer = _layer(bias=bias)
    theirs = to_torch(layer)
    q, k, v = _inputs(cross)
    t_q, t_k = q.shape[1], k.shape[1]
    key_padding = padding_mask(torch.tensor([t_k, 3, 1]), t_k) if "padding" in masks else None
    attn = None
    if "causal" in masks:
        attn = causal_mask(t_q)
    elif "attn" in masks:
        attn = torch.rand(t_q, t_k) > 0.4
        attn[:, 0] = True  # every query keeps a key
    with torch.no_grad():
        out, weights = layer(q, k, v, _our_mask(key_padding, attn))
        out_torch, weights_torch = _run_torch(theirs, q, k, v, key_padding, attn)
    assert out.shape == out_torch.shape and weights.shape == weights_torch.shape == (3, 4, t_q, t_k)
    assert (out - out_torch).abs().max().item() < 1e-10
    assert (weights - weights_torch).abs().max().item() < 1e-10


def test_per_head_masks_agree_with_a_3d_attn_mask():
    layer = _layer(d_model=12, n_heads=3)
    q, k, v = _inputs(cross=True, b=2, t_q=4, t_k=6, d=12)
    per_head = torch.rand(2, 3, 4, 6) > 0.5  # (B, h, T_q, T_k): a different mask for every head
    per_head[..., 0] = True
    with torch.no_grad():
        out, weights = layer(q, k, v, per_head)
        out_torch, weights_torch = to_torch(layer)(
            q, k, v, attn_mask=~per_head.reshape(6, 4, 6), need_weights=True, average_attn_weights=False
        )
    assert (out - out_torch).abs().max().item() < 1e-10 and (weights - weights_torch).abs().max().item() < 1e-10


def test_from_torch_copies_every_weight():
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    nn.init.normal_(theirs.in_proj_bias)
    nn.init.normal_(theirs.out_proj.bias)
    ours = from_torch(theirs)
    q, k, v = _inputs(cross=True, b=2, t_q=3, t_k=5, d=8)
    with torch.no_grad():
        out, weights = ours(q, k, v)
        out_torch, weights_torch = theirs(q, k, v, average_attn_weights=False)
    assert (out - out_torch).abs().max().item() < 1e-10 and (weights - weights_torch).abs().max().item() < 1e-10
    assert to_torch(ours).state_dict().keys() == theirs.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(to_torch(ours).state_dict().values(), theirs.state_dict().values()))


def test_batched_heads_equal_a_loop_over_heads():
    layer = _layer(d_model=12, n_heads=3)
    q, k, v = _inputs(cross=True, b=2, t_q=4, t_k=6, d=12)
    mask = padding_mask(torch.tensor([6, 2]), 6)
    with torch.no_grad():
        out, weights = layer(q, k, v, mask)
        heads = []
        for i in range(3):
            rows = slice(4 * i, 4 * (i + 1))  # head i's rows of the stacked projection weights
            project = lambda x, lin, rows=rows: x @ lin.weight[rows].T + lin.bias[rows]
            head_out, head_weights = scaled_dot_product_attention(
                project(q, layer.w_q), project(k, layer.w_k), project(v, layer.w_v), mask
            )
            torch.testing.assert_close(head_weights, weights[:, i], atol=1e-12, rtol=0)
            heads.append(head_out)
        torch.testing.assert_close(layer.w_o(torch.cat(heads, dim=-1)), out, atol=1e-12, rtol=0)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 3),
    st.sampled_from([(8, 1), (8, 2), (12, 3), (12, 4)]),
    st.integers(1, 5),
    st.integers(2, 7),
    st.data(),
)
def test_padding_keys_change_no_output_at_real_positions(batch, sizes, t_q, t_k, data):
    d_model, n_heads = sizes
    layer = _layer(d_model, n_heads)
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, t_k), min_size=batch, max_size=batch)))
    query = torch.randn(batch, t_q, d_model, **f64)
    memory = torch.randn(batch, t_k, d_model, **f64)
    mask = padding_mask(lengths, t_k)  # (B, 1, T_k)
    real = mask.transpose(1, 2)  # (B, T_k, 1)
    noisy = torch.where(real, memory, 100 * torch.randn_like(memory))
    with torch.no_grad():
        before, w_before = layer(query, memory, memory, mask)
        after, _ = layer(query, noisy, noisy, mask)
        assert (before - after).abs().max().item() < 1e-12  # cross-attention: every query is real
        hidden = (~mask[:, None]).expand_as(w_before)  # (B, h, T_q, T_k): True at padded keys
        assert w_before[hidden].abs().sum().item() == 0.0  # no head gives a padded key any weight
        # self-attention over the padded sequence: the outputs at real positions do not move either
        self_before, _ = layer(memory, memory, memory, mask)
        self_after, _ = layer(noisy, noisy, noisy, mask)
    assert (self_before - self_after).masked_select(real).abs().max().item() < 1e-12


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 8), st.sampled_from([(8, 2), (12, 3), (16, 4)]), st.data())
def test_with_a_causal_mask_a_later_token_changes_no_earlier_output(t, sizes, data):
    d_model, n_heads = sizes
    position = data.draw(st.integers(1, t - 1))  # the first changed token
    layer = _layer(d_model, n_heads)
    x = torch.randn(2, t, d_model, **f64)
    changed = x.clone()
    changed[:, position:] = torch.randn_like(changed[:, position:])
    with torch.no_grad():
        before, _ = layer(x, x, x, causal_mask(t))
        after, _ = layer(changed, changed, changed, causal_mask(t))
    assert (before[:, :position] - after[:, :position]).abs().max().item() < 1e-12
    assert (before[:, position:] - after[:, position:]).abs().max().item() > 1e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; CI and most laptops have none")
def test_agrees_with_nn_multiheadattention_on_gpu():
    layer = _layer().cuda()
    q, k, v = (t.cuda() for t in _inputs(cross=True))
    pad = padding_mask(torch.tensor([7, 3, 1], device="cuda"), 7)
    with torch.no_grad():
        out, weights = layer(q, k, v, pad)
        out_torch, weights_torch = _run_torch(to_torch(layer), q, k, v, pad)
    assert (out - out_torch).abs().max().item() < 1e-10 and (weights - weights_torch).abs().max().item() < 1e-10


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: MultiHeadAttention(10, 3), ValueError, "divisible by n_heads=3"),
        (lambda: MultiHeadAttention(8, 0), ValueError, "n_heads must be a positive int"),
        (lambda: split_heads(torch.ones(2, 3, 10), 4), ValueError, "not divisible by n_heads=4"),
        (lambda: split_heads(torch.ones(2, 3, 8), 0), ValueError, "positive int"),
        (lambda: split_heads([[1.0]], 1), TypeError, "must be a torch.Tensor"),
        (lambda: merge_heads(torch.ones(3, 4)), ValueError, "at least 3 dimensions"),
        (
            lambda: _layer()(torch.ones(2, 3, 8, **f64), torch.ones(2, 3, 16, **f64), torch.ones(2, 3, 16, **f64)),
            ValueError,
            "query must have last dimension d_model=16",
        ),
        (lambda: _layer()(*_inputs(cross=True), mask=torch.ones(3, 1, 7)), TypeError, "boolean tensor"),
        (
            lambda: _layer()(*_inputs(cross=True), mask=torch.ones(1, 1, 1, 1, 7, dtype=torch.bool)),
            ValueError,
            "at most 4",
        ),
        (
            lambda: _layer()(*_inputs(cross=True), mask=torch.ones(3, 1, 5, dtype=torch.bool)),
            ValueError,
            "does not broadcast",
        ),
        (lambda: from_torch(nn.Linear(2, 2)), TypeError, "nn.MultiheadAttention"),
        (lambda: from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4)), ValueError, "kdim = vdim = embed_dim"),
        (lambda: torch_masks(key_padding=torch.ones(2, 5)), ValueError, "boolean tensor"),
        (lambda: torch_masks(key_padding=torch.ones(2, 3, 5, dtype=torch.bool)), ValueError, r"\(B, 1, T_k\)"),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_scaling_uses_d_k_not_d_model():
    layer = _layer(d_model=16, n_heads=4)
    x = torch.randn(1, 5, 16, **f64)
    with torch.no_grad():
        _, weights = layer(x, x, x)
        q = split_heads(layer.w_q(x), 4)
        k = split_heads(layer.w_k(x), 4)
        expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    torch.testing.assert_close(weights, expected, atol=1e-12, rtol=0)
