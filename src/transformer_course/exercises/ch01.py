"""Chapter 1 exercises: the RNN cell, the RNN unrolled over a batch of sequences, one step of backpropagation through time."""

from __future__ import annotations

import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register
from ..models import rnn as ref

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


def _cell_hh_not_transposed(x_t, h, w_ih, w_hh, b_ih, b_hh):
    # w_hh is square (H, H): h @ w_hh runs whatever the sizes, and is wrong
    return torch.tanh(x_t @ w_ih.T + b_ih + h @ w_hh + b_hh)


def _cell_ih_not_transposed(x_t, h, w_ih, w_hh, b_ih, b_hh):
    # runs only where D = H, and is wrong there
    return torch.tanh(x_t @ w_ih + b_ih + h @ w_hh.T + b_hh)


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


# 1.4 an experiment: the gain at which the gradient neither vanishes nor explodes -------------------------

EDGE = 3.0  # the first input's gradient must be within this factor of the last input's


def _edge_cases(g: torch.Generator) -> list[Case]:
    def case(label: str, b: int, t: int, d: int, h: int, scale: float) -> Case:
        k = 1 / math.sqrt(h)  # PyTorch's initialisation of the input weights and biases: uniform(-k, k)
        w_ih, b_ih, b_hh = (
            (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * k for shape in ((h, d), (h,), (h,))
        )
        rotation, _ = torch.linalg.qr(randn(g, h, h))  # a random orthogonal matrix
        return Case(label, (randn(g, b, t, d, scale=scale), w_ih, rotation, b_ih, b_hh, randn(g, h, scale=k)))

    return [
        case("B = 8 sequences of T = 40 steps, D = 8, H = 16", 8, 40, 8, 16, 1.0),
        case("B = 8, T = 60, D = 16, H = 32, inputs half as large (tanh nearly linear)", 8, 60, 16, 32, 0.5),
        case("B = 8, T = 30, D = 4, H = 24, inputs three times as large (tanh saturates)", 8, 30, 4, 24, 3.0),
    ]


def gradient_ratio(gain: float, x, w_ih, rotation, b_ih, b_hh, u) -> float:
    """||d(u.h_T)/dx_1|| / ||d(u.h_T)/dx_T||, each averaged over the batch, with W_hh = gain * rotation."""
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        _, h_T = ref.rnn_layer(x, None, w_ih, gain * rotation, b_ih, b_hh)
        (h_T @ u).sum().backward()
    size = x.grad.norm(dim=-1).mean(dim=0)  # (T,): how much each input matters to the last state
    return (size[0] / size[-1]).item()


def balanced_gain(x, w_ih, rotation, b_ih, b_hh, u):
    """The gain g for which, with W_hh = g * rotation, the first input's gradient is about the last one's.

    The ratio grows with the gain (from vanishing to exploding), so bisect on log g until it is about 1.
    """
    low, high = math.log(0.5), math.log(4.0)
    for _ in range(30):
        middle = (low + high) / 2
        if gradient_ratio(math.exp(middle), x, w_ih, rotation, b_ih, b_hh, u) < 1:
            low = middle
        else:
            high = middle
    return math.exp((low + high) / 2)


def _judge_gain(case: Case, answer) -> str | None:
    if isinstance(answer, torch.Tensor) and answer.numel() == 1 and answer.dtype.is_floating_point:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return f"the answer should be one number, the gain; got {registry.describe(answer)}"
    if not math.isfinite(answer) or answer <= 0:
        return f"the gain should be a positive finite number, got {answer!r}"
    ratio = gradient_ratio(float(answer), *case.args)
    if 1 / EDGE <= ratio <= EDGE:
        return None
    way = "vanishes" if ratio < 1 else "explodes"
    return (
        f"with the gain {answer:.4g}, the first input's gradient is {ratio:.3g} times the last input's: it {way} "
        f"(it must be between {1 / EDGE:.2g} and {EDGE:g} times)"
    )


def _gain_fixed(value: float):
    return lambda x, w_ih, rotation, b_ih, b_hh, u: value


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
            Mistake(
                "w_hh is not transposed: it is stored (out, in) like w_ih, so the state term is h @ w_hh.T. Being "
                "square, it multiplies without an error either way.",
                _cell_hh_not_transposed,
            ),
            Mistake(
                "w_ih is not transposed: it is stored (out, in) = (H, D), so the input term is x_t @ w_ih.T. With "
                "D = H the product runs without an error, and is wrong.",
                _cell_ih_not_transposed,
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
        parts={(0,): 'the tensor of outputs', (1,): 'the final state h_T'},
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
            Mistake(
                "the derivative of tanh is missing: by the chain rule, the weights are multiplied by the slope of "
                "tanh at each unit of h_t.",
                _jac_no_derivative,
            ),
            Mistake(
                "the slope of tanh scales the columns of W_hh; it belongs to the rows: unit i's slope scales "
                "everything that flows into unit i.",
                _jac_columns,
            ),
            Mistake(
                "W_hh is transposed: entry [b, i, j] is how unit i of h_t moves with unit j of h_(t-1), and W_hh "
                "is stored (out, in) as in nn.Linear.",
                _jac_transposed,
            ),
            Mistake(
                "h_t is already tanh(a); the derivative of tanh at a is 1 - h_t^2, so do not apply tanh to h_t again.",
                _jac_tanh_again,
            ),
            Mistake(
                "the slope is not 1 - h_t: look again at the derivative of tanh, written with tanh(a) itself, "
                "which is h_t.",
                _jac_not_squared,
            ),
            Mistake(
                "h_t * (1 - h_t) is the sigmoid's derivative, written with its output; tanh's, written with "
                "its output h_t, is another expression.",
                _jac_sigmoid_derivative,
            ),
        ),
        forbidden=BUILTIN_RNN + BUILTIN_JACOBIAN,
    ),
    Exercise(
        id="1.4",
        title="the knife edge",
        idea=(
            "the gradient that reaches the first input shrinks with a small gain and grows with a large one; "
            "measure the ratio for a few gains, see which way it moves, and narrow the interval where it "
            "crosses one."
        ),
        points=3,
        name="balanced_gain",
        kind="function",
        reference=balanced_gain,
        make_cases=_edge_cases,
        judge=_judge_gain,
        mistakes=(
            Mistake(
                "a gain of 1 keeps the rotation length-preserving, but every tanh step still squashes the "
                "gradient a little, and over many steps that adds up: the gain must be larger than 1.",
                _gain_fixed(1.0),
            ),
            Mistake(
                "1.5 is the gain that happened to work for the chapter's example; the edge moves with the length, "
                "the sizes and the inputs, so measure it for each case's weights.",
                _gain_fixed(1.5),
            ),
            Mistake(
                "this gain makes the gradient explode: the first input matters thousands of times more than the "
                "last. Measure, then move towards a smaller gain.",
                _gain_fixed(3.0),
            ),
            Mistake(
                "0 removes the recurrence: no gradient reaches the earlier inputs at all.",
                _gain_fixed(0.0),
            ),
        ),
    ),
)
