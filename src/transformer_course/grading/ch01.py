"""Chapter 1 exercises: the RNN cell, the RNN unrolled over a batch of sequences, one step of backpropagation through time."""

from __future__ import annotations

import math

import torch

from .. import rnn as ref
from .registry import Case, Exercise, Mistake, randn, register

NOTEBOOK = "01_rnn.ipynb"

# The exercises build these; PyTorch's own recurrent layers and autograd's Jacobians would skip the point.
BUILTIN_RNN = ("RNN", "RNNCell", "rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell")
BUILTIN_JACOBIAN = ("jacobian", "jacrev", "jacfwd", "vjp", "jvp", "backward", "grad")


def _weights(g: torch.Generator, d: int, h: int) -> tuple[torch.Tensor, ...]:
    """(w_ih, w_hh, b_ih, b_hh) at the scale of PyTorch's initialisation, a little larger so that tanh bends."""
    s = 1.5 / math.sqrt(h)
    return randn(g, h, d, scale=s), randn(g, h, h, scale=s), randn(g, h, scale=s), randn(g, h, scale=s)


# 1.1 the RNN cell ----------------------------------------------------------------------------


def _cell_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 1, D = H = 3", (randn(g, 1, 3), randn(g, 1, 3).tanh(), *_weights(g, 3, 3))),
        Case("B = 3, D = 5, H = 4", (randn(g, 3, 5), randn(g, 3, 4).tanh(), *_weights(g, 5, 4))),
        Case(
            "B = 2, D = H = 4, large inputs (tanh saturates)",
            (randn(g, 2, 4, scale=4.0), randn(g, 2, 4).tanh(), *_weights(g, 4, 4)),
        ),
    ]


def _cell_sigmoid(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.sigmoid(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh)


def _cell_relu(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.relu(x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh)


def _cell_linear(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh


def _cell_no_state(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.tanh(x_t @ w_ih.T + b_ih + b_hh)


def _cell_one_bias(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.tanh(x_t @ w_ih.T + b_ih + h @ w_hh.T)


def _cell_weights_swapped(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.tanh(x_t @ w_hh.T + b_ih + h @ w_ih.T + b_hh)


def _cell_not_transposed(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return torch.tanh(x_t @ w_ih + b_ih + h @ w_hh + b_hh)


# 1.2 the unrolled RNN ------------------------------------------------------------------------


def _layer_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 2, T = 5, D = 3, H = 4, no initial state (h0 = None)", (randn(g, 2, 5, 3), None, *_weights(g, 3, 4))),
        Case(
            "B = 3, T = 4, D = 3, H = 4, with an initial state h0",
            (randn(g, 3, 4, 3), randn(g, 3, 4).tanh(), *_weights(g, 3, 4)),
        ),
        Case("B = 1, T = 1, D = 2, H = 3, with h0", (randn(g, 1, 1, 2), randn(g, 1, 3).tanh(), *_weights(g, 2, 3))),
        Case("B = 2, T = 7, D = 3, H = 5, with h0", (randn(g, 2, 7, 3), randn(g, 2, 5).tanh(), *_weights(g, 3, 5))),
    ]


def _zeros_if_none(x, h0, w_hh):
    return x.new_zeros(x.shape[0], w_hh.shape[0]) if h0 is None else h0


def _layer_not_carried(x, h0, w_ih, w_hh, b_ih, b_hh):
    start = _zeros_if_none(x, h0, w_hh)
    outputs = [ref.rnn_cell(x[:, t], start, w_ih, w_hh, b_ih, b_hh) for t in range(x.shape[1])]
    return torch.stack(outputs, dim=1), outputs[-1]


def _layer_h0_ignored(x, h0, w_ih, w_hh, b_ih, b_hh):
    return ref.rnn_layer(x, None, w_ih, w_hh, b_ih, b_hh)


def _layer_first_state_returned(x, h0, w_ih, w_hh, b_ih, b_hh):
    outputs, _ = ref.rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh)
    return outputs, outputs[:, 0]


def _layer_shifted(x, h0, w_ih, w_hh, b_ih, b_hh):
    h = _zeros_if_none(x, h0, w_hh)
    outputs = []
    for t in range(x.shape[1]):
        outputs.append(h)  # the state before reading x_t
        h = ref.rnn_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)
    return torch.stack(outputs, dim=1), h


def _layer_backwards(x, h0, w_ih, w_hh, b_ih, b_hh):
    outputs, h = ref.rnn_layer(x.flip(1), h0, w_ih, w_hh, b_ih, b_hh)
    return outputs.flip(1), h


def _layer_backwards_unflipped(x, h0, w_ih, w_hh, b_ih, b_hh):
    return ref.rnn_layer(x.flip(1), h0, w_ih, w_hh, b_ih, b_hh)


# 1.3 one step of backpropagation through time -------------------------------------------------


def _jacobian_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 1, H = 3", (randn(g, 1, 3).tanh(), randn(g, 3, 3))),
        Case("B = 2, H = 4", (randn(g, 2, 4).tanh(), randn(g, 4, 4))),
        Case("B = 3, H = 5, some states near +-1 (tanh saturated)", (randn(g, 3, 5, scale=3.0).tanh(), randn(g, 5, 5))),
    ]


def _jac_no_derivative(h_t, w_hh):
    return w_hh.expand(h_t.shape[0], -1, -1).clone()


def _jac_columns(h_t, w_hh):
    return (1 - h_t**2).unsqueeze(-2) * w_hh


def _jac_transposed(h_t, w_hh):
    return (1 - h_t**2).unsqueeze(-1) * w_hh.T


def _jac_tanh_again(h_t, w_hh):
    return (1 - torch.tanh(h_t) ** 2).unsqueeze(-1) * w_hh


def _jac_not_squared(h_t, w_hh):
    return (1 - h_t).unsqueeze(-1) * w_hh


def _jac_sigmoid_derivative(h_t, w_hh):
    return (h_t * (1 - h_t)).unsqueeze(-1) * w_hh


register(
    Exercise(
        id="1.1",
        title="the RNN cell",
        idea=(
            "a step mixes the new input and the previous state, each through its own weight matrix, adds the "
            "biases, and squashes the sum with tanh."
        ),
        points=2,
        name="rnn_cell",
        kind="function",
        reference=ref.rnn_cell,
        make_cases=_cell_cases,
        mistakes=(
            Mistake(
                "the nonlinearity is a sigmoid; the RNN cell uses tanh, whose outputs lie in (-1, 1).", _cell_sigmoid
            ),
            Mistake("the nonlinearity is a ReLU; the RNN cell uses tanh.", _cell_relu),
            Mistake("there is no nonlinearity: apply torch.tanh to the sum.", _cell_linear),
            Mistake("the previous state h does not enter: add h @ W_hh^T (w_hh.T) to the sum.", _cell_no_state),
            Mistake("only b_ih is added: the cell adds both biases, b_ih and b_hh.", _cell_one_bias),
            Mistake(
                "w_ih and w_hh are swapped: w_ih multiplies the input x_t, w_hh the state h.", _cell_weights_swapped
            ),
            Mistake(
                "the weights are not transposed: they are stored (out, in) as in nn.Linear, so use x_t @ w_ih.T and h @ w_hh.T.",
                _cell_not_transposed,
            ),
        ),
        forbidden=BUILTIN_RNN,
    ),
    Exercise(
        id="1.2",
        title="the RNN unrolled over time",
        idea=(
            "the same cell runs once per position, each step starting from the state the step before produced; "
            "every state is an output, and the last one is the summary."
        ),
        points=3,
        name="rnn_layer",
        kind="function",
        reference=ref.rnn_layer,
        make_cases=_layer_cases,
        mistakes=(
            Mistake(
                "the hidden state is not carried between steps: each step must start from the state the previous step "
                "returned, not from h0.",
                _layer_not_carried,
            ),
            Mistake(
                "the initial state h0 is ignored: start from h0 when it is given, from zeros only when it is None.",
                _layer_h0_ignored,
            ),
            Mistake(
                "the second item should be the last state h_T (the same as outputs[:, -1]), not the first.",
                _layer_first_state_returned,
            ),
            Mistake(
                "the outputs are shifted by one step: outputs[:, t] must be the state after reading x_t, so h_1 .. h_T, "
                "not h_0 .. h_{T-1}.",
                _layer_shifted,
            ),
            Mistake(
                "the sequence is read from the last step to the first: go forward, t = 0, 1, ..., T - 1.",
                _layer_backwards,
            ),
            Mistake(
                "the sequence is read from the last step to the first: go forward, t = 0, 1, ..., T - 1.",
                _layer_backwards_unflipped,
            ),
        ),
        forbidden=BUILTIN_RNN,
    ),
    Exercise(
        id="1.3",
        title="one step of backpropagation through time",
        idea=(
            "differentiate h_t = tanh(a_t) with respect to h_(t-1) by the chain rule: the derivative of the "
            "tanh, 1 - h_t^2, times the recurrent weights; work out on paper which index of the result each "
            "factor goes with."
        ),
        points=2,
        name="rnn_step_jacobian",
        kind="function",
        reference=ref.rnn_step_jacobian,
        make_cases=_jacobian_cases,
        mistakes=(
            Mistake("the derivative of tanh is missing: scale row i of W_hh by 1 - h_t[i]^2.", _jac_no_derivative),
            Mistake(
                "the factor 1 - h_t^2 scales the columns of W_hh; it belongs to the rows: entry [b, i, j] is "
                "(1 - h_t[b, i]^2) * W_hh[i, j].",
                _jac_columns,
            ),
            Mistake("W_hh is transposed: entry [b, i, j] is (1 - h_t[b, i]^2) * W_hh[i, j].", _jac_transposed),
            Mistake(
                "h_t is already tanh(a); the derivative of tanh at a is 1 - h_t^2, so do not apply tanh to h_t again.",
                _jac_tanh_again,
            ),
            Mistake("the factor is 1 - h_t, not squared: tanh'(a) = 1 - tanh(a)^2 = 1 - h_t^2.", _jac_not_squared),
            Mistake("h_t * (1 - h_t) is the sigmoid's derivative; tanh's is 1 - h_t^2.", _jac_sigmoid_derivative),
        ),
        forbidden=BUILTIN_RNN + BUILTIN_JACOBIAN,
    ),
)
