"""The reference RNN of chapter 1 against PyTorch's nn.RNN, its properties, and its errors on bad input."""

import pytest
import torch
from torch import nn

from transformer_course.models.rnn import RNN, rnn_cell, rnn_layer, rnn_step_jacobian

f64 = dict(dtype=torch.float64)


def _weights(d=3, h=4):
    return (torch.randn(h, d, **f64), torch.randn(h, h, **f64) / h**0.5, torch.randn(h, **f64), torch.randn(h, **f64))


def _pair(num_layers, d=4, h=5, bias=True):
    theirs = nn.RNN(d, h, num_layers=num_layers, bias=bias, batch_first=True).double()
    ours = RNN(d, h, num_layers=num_layers, bias=bias).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("with_h0", [False, True])
def test_agrees_with_nn_rnn_in_float64(num_layers, with_h0):
    ours, theirs = _pair(num_layers)
    x = torch.randn(3, 7, 4, **f64)
    h0 = torch.randn(num_layers, 3, 5, **f64) if with_h0 else None
    with torch.no_grad():
        (out, h_n), (out_t, h_n_t) = ours(x, h0), theirs(x, h0)
    assert out.shape == (3, 7, 5) and h_n.shape == (num_layers, 3, 5)
    assert (out - out_t).abs().max().item() < 1e-10
    assert (h_n - h_n_t).abs().max().item() < 1e-10


def test_weights_copy_both_ways_and_without_bias():
    ours, theirs = _pair(2, bias=False)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    theirs.load_state_dict(ours.state_dict())  # and back
    x = torch.randn(2, 5, 4, **f64)
    with torch.no_grad():
        assert (ours(x)[0] - theirs(x)[0]).abs().max().item() < 1e-10


def test_gradients_agree_with_nn_rnn():
    ours, theirs = _pair(2)
    x = torch.randn(2, 6, 4, **f64)
    ours(x)[0].sum().backward()
    theirs(x)[0].sum().backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert (p.grad - q.grad).abs().max().item() < 1e-10, name


def test_initialisation_matches_pytorch_bounds():
    model = RNN(3, 16, num_layers=2)
    bound = 1 / 16**0.5
    assert all(p.abs().max().item() <= bound for p in model.parameters())
    assert model.weight_hh_l1.std().item() > bound / 4  # uniform, not zeros


def test_cell_is_the_equation():
    w_ih, w_hh, b_ih, b_hh = _weights()
    x, h = torch.randn(2, 3, **f64), torch.randn(2, 4, **f64)
    expected = torch.tanh(torch.einsum("hd,bd->bh", w_ih, x) + b_ih + torch.einsum("hk,bk->bh", w_hh, h) + b_hh)
    torch.testing.assert_close(rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh), expected, atol=1e-12, rtol=0)


def test_layer_carries_the_state_and_starts_from_h0():
    w = _weights()
    x, h0 = torch.randn(2, 5, 3, **f64), torch.randn(2, 4, **f64)
    outputs, h_T = rnn_layer(x, h0, *w)
    h = h0
    for t in range(5):
        h = rnn_cell(x[:, t], h, *w)
        torch.testing.assert_close(outputs[:, t], h, atol=1e-12, rtol=0)
    torch.testing.assert_close(h_T, h, atol=0, rtol=0)
    zeros = rnn_layer(x, None, *w)[0]
    torch.testing.assert_close(zeros, rnn_layer(x, torch.zeros(2, 4, **f64), *w)[0], atol=0, rtol=0)


def test_layer_is_causal():
    w = _weights()
    x = torch.randn(2, 6, 3, **f64)
    changed = x.clone()
    changed[:, 3] += 1.0
    before, after = rnn_layer(x, None, *w)[0], rnn_layer(changed, None, *w)[0]
    assert torch.equal(before[:, :3], after[:, :3])
    assert (before[:, 3:] - after[:, 3:]).abs().max().item() > 1e-3


def test_step_jacobian_matches_autograd():
    w_ih, w_hh, b_ih, b_hh = _weights()
    x, h = torch.randn(3, 3, **f64), torch.randn(3, 4, **f64).tanh()
    h_t = rnn_cell(x, h, w_ih, w_hh, b_ih, b_hh)
    for b in range(3):
        auto = torch.autograd.functional.jacobian(
            lambda hb, b=b: rnn_cell(x[b : b + 1], hb[None], w_ih, w_hh, b_ih, b_hh)[0], h[b]
        )
        torch.testing.assert_close(rnn_step_jacobian(h_t, w_hh)[b], auto, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda w: rnn_cell(torch.randn(2, 3, **f64), torch.randn(3, 4, **f64), *w), ValueError, "same batch size"),
        (
            lambda w: rnn_cell(torch.randn(2, 5, **f64), torch.randn(2, 4, **f64), *w),
            ValueError,
            "w_ih must have shape",
        ),
        (
            lambda w: rnn_cell(torch.randn(2, 3, **f64), torch.randn(2, 4, **f64), w[0], w[1].T[:3], *w[2:]),
            ValueError,
            "w_hh must have shape",
        ),
        (
            lambda w: rnn_cell(torch.randn(2, 3, **f64), torch.randn(2, 4, **f64), w[0], w[1], w[2][:2], w[3]),
            ValueError,
            "b_ih must have shape",
        ),
        (lambda w: rnn_cell([[1.0, 2.0, 3.0]], torch.randn(1, 4, **f64), *w), TypeError, "must be a torch.Tensor"),
        (lambda w: rnn_layer(torch.randn(5, 3, **f64), None, *w), ValueError, "x must have 3 dimensions"),
        (lambda w: rnn_layer(torch.randn(2, 0, 3, **f64), None, *w), ValueError, "at least one time step"),
        (
            lambda w: rnn_step_jacobian(torch.randn(2, 4, **f64), torch.randn(3, 3, **f64)),
            ValueError,
            "w_hh must have shape",
        ),
        (lambda w: RNN(3, 4)(torch.randn(2, 5, 6)), ValueError, "input_size = 3"),
        (
            lambda w: RNN(3, 4, num_layers=2)(torch.randn(2, 5, 3), torch.randn(1, 2, 4)),
            ValueError,
            "h0 must have shape",
        ),
        (lambda w: RNN(3, 0), ValueError, "hidden_size must be a positive int"),
    ],
)
def test_bad_input_gives_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call(_weights())
