"""The reference attention of chapter 5 against PyTorch's own, and its masking properties."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.models.attention import (
    SelfAttention,
    attention_scores,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)

f64 = dict(dtype=torch.float64)


def _qkv(b=2, tq=4, tk=5, d=8, dv=6, device="cpu"):
    return (
        torch.randn(b, tq, d, device=device, **f64),
        torch.randn(b, tk, d, device=device, **f64),
        torch.randn(b, tk, dv, device=device, **f64),
    )


def test_scores_are_scaled_dot_products():
    q, k, _ = _qkv()
    expected = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(q.shape[-1])
    torch.testing.assert_close(attention_scores(q, k), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "random"])
def test_agrees_with_pytorch_in_float64(mask_kind):
    q, k, v = _qkv(tq=5, tk=5)
    mask = {
        "none": None,
        "padding": padding_mask(torch.tensor([3, 5]), 5),
        "causal": causal_mask(5),
        "random": torch.rand(2, 5, 5) > 0.3,
    }[mask_kind]
    if mask is not None:
        mask = mask | torch.eye(5, dtype=torch.bool)  # no query without a key
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (out - expected).abs().max().item() < 1e-10
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5, **f64))


def test_agrees_with_pytorch_with_extra_batch_dimensions():
    q, k, v = (torch.randn(2, 3, 4, 8, **f64), torch.randn(2, 3, 6, 8, **f64), torch.randn(2, 3, 6, 5, **f64))
    mask = padding_mask(torch.tensor([2, 6]), 6)[:, None]  # (2, 1, 1, 6)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert (out - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item() < 1e-10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; CI and most laptops have none")
def test_agrees_with_pytorch_on_gpu():
    q, k, v = _qkv(device="cuda")
    mask = padding_mask(torch.tensor([3, 5], device="cuda"), 5)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    assert (out - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item() < 1e-10


def test_masks():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert padding_mask(torch.tensor([1, 3]), 3).tolist() == [[[True, False, False]], [[True, True, True]]]


def test_masked_keys_get_zero_weight():
    q, k, v = _qkv()
    _, weights = scaled_dot_product_attention(q, k, v, padding_mask(torch.tensor([2, 5]), 5))
    assert weights[0, :, 2:].abs().max().item() == 0.0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(2, 7), st.integers(1, 6), st.data())
def test_padding_never_changes_real_positions(batch, t, d, data):
    lengths = torch.tensor(data.draw(st.lists(st.integers(1, t), min_size=batch, max_size=batch)))
    q, k, v = _qkv(b=batch, tq=t, tk=t, d=d, dv=d)
    mask = padding_mask(lengths, t)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    noise = torch.randn_like(k) * 100
    real = mask.transpose(1, 2)  # (B, t, 1): True at real key positions
    out2, _ = scaled_dot_product_attention(q, torch.where(real, k, noise), torch.where(real, v, noise), mask)
    assert (out - out2).abs().max().item() < 1e-12


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.data())
def test_causal_mask_hides_the_future(t, data):
    position = data.draw(st.integers(0, t - 2))
    layer = SelfAttention(6, 4).double()
    x = torch.randn(2, t, 6, **f64)
    changed = x.clone()
    changed[:, position + 1 :] = torch.randn_like(changed[:, position + 1 :])
    mask = causal_mask(t)
    with torch.no_grad():
        before, _ = layer(x, mask)
        after, _ = layer(changed, mask)
    assert (before[:, : position + 1] - after[:, : position + 1]).abs().max().item() < 1e-12
    assert (before[:, position + 1 :] - after[:, position + 1 :]).abs().max().item() > 1e-6


def test_self_attention_is_permutation_equivariant():
    layer = SelfAttention(6, 4).double()
    x = torch.randn(1, 7, 6, **f64)
    perm = torch.randperm(7)
    with torch.no_grad():
        out, _ = layer(x)
        out_perm, _ = layer(x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-12, rtol=0)


def test_self_attention_projects_then_attends():
    layer = SelfAttention(6, 4, 3).double()
    x = torch.randn(2, 5, 6, **f64)
    with torch.no_grad():
        out, weights = layer(x)
        q, k, v = x @ layer.w_q.weight.T, x @ layer.w_k.weight.T, x @ layer.w_v.weight.T
    assert out.shape == (2, 5, 3) and weights.shape == (2, 5, 5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: attention_scores(torch.ones(2, 3), torch.ones(2, 4)), "same last dimension d_k"),
        (lambda: attention_scores([[1.0]], torch.ones(1, 1)), "must be a torch.Tensor"),
        (lambda: causal_mask(0), "positive int"),
        (lambda: causal_mask(2.5), "positive int"),
        (lambda: padding_mask(torch.tensor([0, 2]), 3), "between 1 and t=3"),
        (lambda: padding_mask(torch.tensor([1.0]), 3), "integer tensor"),
        (lambda: scaled_dot_product_attention(*_qkv(), mask=torch.ones(2, 4, 5)), "boolean tensor"),
        (
            lambda: scaled_dot_product_attention(*_qkv(), mask=torch.ones(3, 4, 5, dtype=torch.bool)),
            "does not broadcast",
        ),
        (
            lambda: scaled_dot_product_attention(torch.ones(1, 2, 3), torch.ones(1, 4, 3), torch.ones(1, 5, 3)),
            "same length T_k",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()
