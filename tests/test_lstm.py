"""The reference LSTM of chapter 2 against PyTorch's nn.LSTM, its gates, and its errors on bad input."""

import pytest
import torch
from torch import nn

from transformer_course.models.lstm import LSTM, lstm_cell, lstm_gates, lstm_layer

f64 = dict(dtype=torch.float64)


def _weights(d=3, h=4):
    return (
        torch.randn(4 * h, d, **f64),
        torch.randn(4 * h, h, **f64) / h**0.5,
        torch.randn(4 * h, **f64),
        torch.randn(4 * h, **f64),
    )


def _state(b=2, h=4):
    return torch.randn(b, h, **f64).tanh(), torch.randn(b, h, **f64)


def _pair(num_layers, d=4, h=5, bias=True):
    theirs = nn.LSTM(d, h, num_layers=num_layers, bias=bias, batch_first=True).double()
    ours = LSTM(d, h, num_layers=num_layers, bias=bias).double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("with_state", [False, True])
def test_agrees_with_nn_lstm_in_float64(num_layers, with_state):
    ours, theirs = _pair(num_layers)
    x = torch.randn(3, 7, 4, **f64)
    state = (torch.randn(num_layers, 3, 5, **f64), torch.randn(num_layers, 3, 5, **f64)) if with_state else None
    with torch.no_grad():
        (out, (h_n, c_n)), (out_t, (h_n_t, c_n_t)) = ours(x, state), theirs(x, state)
    assert out.shape == (3, 7, 5) and h_n.shape == c_n.shape == (num_layers, 3, 5)
    for a, b in ((out, out_t), (h_n, h_n_t), (c_n, c_n_t)):
        assert (a - b).abs().max().item() < 1e-10


def test_weights_copy_both_ways_and_without_bias():
    ours, theirs = _pair(2, bias=False)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 5, 4, **f64)
    with torch.no_grad():
        assert (ours(x)[0] - theirs(x)[0]).abs().max().item() < 1e-10


def test_gradients_agree_with_nn_lstm():
    ours, theirs = _pair(2)
    x = torch.randn(2, 6, 4, **f64)
    ours(x)[0].sum().backward()
    theirs(x)[0].sum().backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert (p.grad - q.grad).abs().max().item() < 1e-10, name


def test_gates_follow_pytorchs_order_and_ranges():
    w_ih, w_hh, b_ih, b_hh = _weights()
    x, (h, _) = torch.randn(2, 3, **f64), _state()
    i, f, g, o = lstm_gates(x, h, w_ih, w_hh, b_ih, b_hh)
    z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    torch.testing.assert_close(f, torch.sigmoid(z[:, 4:8]), atol=1e-12, rtol=0)  # block 2 is the forget gate
    torch.testing.assert_close(g, torch.tanh(z[:, 8:12]), atol=1e-12, rtol=0)
    assert all(((t > 0) & (t < 1)).all() for t in (i, f, o)) and g.abs().max() < 1


def test_cell_state_is_a_conveyor():
    # zero weights: the gates are set by the biases; forget open, candidate 0 -> c is multiplied by sigmoid(b_f)
    w_ih, w_hh = torch.zeros(4, 1, **f64), torch.zeros(4, 1, **f64)
    b_ih = torch.tensor([0.0, 10.0, 0.0, 0.0], **f64)
    state = (torch.zeros(1, 1, **f64), torch.ones(1, 1, **f64))
    x = torch.zeros(1, 100, 1, **f64)
    _, (h, c) = lstm_layer(x, state, w_ih, w_hh, b_ih, None)
    torch.testing.assert_close(
        c, torch.sigmoid(torch.tensor(10.0, **f64)) ** 100 * torch.ones(1, 1, **f64), atol=1e-12, rtol=0
    )
    torch.testing.assert_close(h, 0.5 * torch.tanh(c), atol=1e-12, rtol=0)


def test_layer_carries_both_states():
    w = _weights()
    x, state = torch.randn(2, 5, 3, **f64), _state()
    outputs, (h_T, c_T) = lstm_layer(x, state, *w)
    s = state
    for t in range(5):
        s = lstm_cell(x[:, t], s, *w)
        torch.testing.assert_close(outputs[:, t], s[0], atol=1e-12, rtol=0)
    assert torch.equal(h_T, s[0]) and torch.equal(c_T, s[1])


def test_layer_is_causal():
    w = _weights()
    x = torch.randn(2, 6, 3, **f64)
    changed = x.clone()
    changed[:, 2] += 1.0
    before, after = lstm_layer(x, None, *w)[0], lstm_layer(changed, None, *w)[0]
    assert torch.equal(before[:, :2], after[:, :2])
    assert (before[:, 2:] - after[:, 2:]).abs().max().item() > 1e-3


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda w: lstm_gates(torch.randn(2, 3, **f64), torch.randn(2, 4, **f64), w[0][:4], *w[1:]),
            ValueError,
            r"4 \* hidden_size = 16",
        ),
        (
            lambda w: lstm_gates(torch.randn(2, 3, **f64), torch.randn(2, 5, **f64), *w),
            ValueError,
            "w_hh must have shape",
        ),
        (lambda w: lstm_cell(torch.randn(2, 3, **f64), torch.randn(2, 4, **f64), *w), TypeError, r"a pair \(h, c\)"),
        (
            lambda w: lstm_cell(torch.randn(2, 3, **f64), (torch.randn(2, 4, **f64), torch.randn(2, 3, **f64)), *w),
            ValueError,
            "same shape",
        ),
        (lambda w: lstm_layer(torch.randn(2, 0, 3, **f64), None, *w), ValueError, "at least one time step"),
        (lambda w: LSTM(3, 4)(torch.randn(2, 5, 3), torch.zeros(1, 2, 4)), TypeError, r"a pair \(h0, c0\)"),
        (
            lambda w: LSTM(3, 4, 2)(torch.randn(2, 5, 3), (torch.zeros(2, 2, 4), torch.zeros(1, 2, 4))),
            ValueError,
            "c0 must have shape",
        ),
        (lambda w: LSTM(3, 4)(torch.randn(5, 3)), ValueError, "x must have 3 dimensions"),
    ],
)
def test_bad_input_gives_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call(_weights())
