"""Chapter 2 exercises: the LSTM's gates, one step of the LSTM cell, an LSTM layer over a sequence, a stacked LSTM,
one step of the GRU cell, and an experiment: the forget bias that keeps a given fraction of the memory."""

from __future__ import annotations

import functools
import math

import torch

from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register
from ..models import gru as gru_ref
from ..models import lstm as ref

NOTEBOOK = "02_lstm.ipynb"

# The exercises build these; PyTorch's own LSTM would skip the point.
BUILTIN_LSTM = ("LSTM", "LSTMCell", "lstm", "lstm_cell", "_VF")
BUILTIN_GRU = ("GRU", "GRUCell", "gru", "gru_cell", "_VF")


def _weights(g: torch.Generator, d: int, h: int, gates: int = 4) -> tuple[torch.Tensor, ...]:
    """(w_ih, w_hh, b_ih, b_hh) of a gated cell, ``gates`` blocks of rows (4 for the LSTM, 3 for the GRU), a little
    larger than PyTorch's initialisation."""
    s, rows = 1.5 / math.sqrt(h), gates * h
    return randn(g, rows, d, scale=s), randn(g, rows, h, scale=s), randn(g, rows, scale=s), randn(g, rows, scale=s)


def _state(g: torch.Generator, b: int, h: int, c_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    return randn(g, b, h).tanh() * 0.9, randn(g, b, h, scale=c_scale)


def _affine(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh


# 2.1 the gates --------------------------------------------------------------------------------


def _step_cases(g: torch.Generator, gates: int = 4) -> list[Case]:
    """One step of a gated cell from (x_t, h): the cases of 2.1 (the LSTM's gates) and 2.6 (the GRU, gates=3)."""
    return [
        Case("B = 1, D = H = 2", (randn(g, 1, 2), randn(g, 1, 2).tanh(), *_weights(g, 2, 2, gates))),
        Case("B = 3, D = 4, H = 3", (randn(g, 3, 4), randn(g, 3, 3).tanh(), *_weights(g, 4, 3, gates))),
        Case(
            "B = 2, D = 5, H = 4, large inputs",
            (randn(g, 2, 5, scale=3.0), randn(g, 2, 4).tanh(), *_weights(g, 5, 4, gates)),
        ),
    ]


def _gates_if_swapped(x_t, h, w_ih, w_hh, b_ih, b_hh):
    i, f, g, o = ref.lstm_gates(x_t, h, w_ih, w_hh, b_ih, b_hh)
    return f, i, g, o


def _gates_all_tanh(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return tuple(torch.tanh(z) for z in _affine(x_t, h, w_ih, w_hh, b_ih, b_hh).chunk(4, dim=-1))


def _gates_all_sigmoid(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return tuple(torch.sigmoid(z) for z in _affine(x_t, h, w_ih, w_hh, b_ih, b_hh).chunk(4, dim=-1))


def _gates_ifog(x_t, h, w_ih, w_hh, b_ih, b_hh):
    z_i, z_f, z_o, z_g = _affine(x_t, h, w_ih, w_hh, b_ih, b_hh).chunk(4, dim=-1)
    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)


def _gates_g_o_swapped(x_t, h, w_ih, w_hh, b_ih, b_hh):
    z_i, z_f, z_g, z_o = _affine(x_t, h, w_ih, w_hh, b_ih, b_hh).chunk(4, dim=-1)
    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.sigmoid(z_o), torch.tanh(z_g)


def _gates_one_bias(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return ref.lstm_gates(x_t, h, w_ih, w_hh, b_ih, None)


# 2.2 one LSTM step ----------------------------------------------------------------------------


def _cell_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 1, D = 2, H = 3", (randn(g, 1, 2), _state(g, 1, 3), *_weights(g, 2, 3))),
        Case("B = 3, D = 4, H = 3", (randn(g, 3, 4), _state(g, 3, 3), *_weights(g, 4, 3))),
        Case(
            "B = 2, D = 3, H = 4, a large cell state",
            (randn(g, 2, 3), _state(g, 2, 4, c_scale=4.0), *_weights(g, 3, 4)),
        ),
    ]


def _cell_update(x_t, state, weights, update, show):
    h, c = state
    i, f, g, o = ref.lstm_gates(x_t, h, *weights)
    c_new = update(i, f, g, c)
    return show(o, c_new, c), c_new


def _cell_gates_swapped(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: i * c + f * g, lambda o, c, c_old: o * torch.tanh(c))


def _cell_no_forgetting(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: c + i * g, lambda o, c, c_old: o * torch.tanh(c))


def _cell_no_input_gate(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: f * c + g, lambda o, c, c_old: o * torch.tanh(c))


def _cell_no_tanh(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: f * c + i * g, lambda o, c, c_old: o * c)


def _cell_tanh_outside(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: f * c + i * g, lambda o, c, c_old: torch.tanh(o * c))


def _cell_old_memory_shown(x_t, state, *w):
    return _cell_update(x_t, state, w, lambda i, f, g, c: f * c + i * g, lambda o, c, c_old: o * torch.tanh(c_old))


def _cell_order_swapped(x_t, state, *w):
    h, c = ref.lstm_cell(x_t, state, *w)
    return c, h


# 2.3 an LSTM layer ----------------------------------------------------------------------------


def _layer_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 2, T = 5, D = 3, H = 4, no initial state", (randn(g, 2, 5, 3), None, *_weights(g, 3, 4))),
        Case(
            "B = 3, T = 4, D = 2, H = 3, with an initial state",
            (randn(g, 3, 4, 2), _state(g, 3, 3), *_weights(g, 2, 3)),
        ),
        Case(
            "B = 1, T = 1, D = 2, H = 2, with an initial state",
            (randn(g, 1, 1, 2), _state(g, 1, 2), *_weights(g, 2, 2)),
        ),
        Case(
            "B = 2, T = 8, D = 3, H = 4, with an initial state",
            (randn(g, 2, 8, 3), _state(g, 2, 4), *_weights(g, 3, 4)),
        ),
    ]


def _initial(x, state, w_hh):
    if state is None:
        zeros = x.new_zeros(x.shape[0], w_hh.shape[1])
        return zeros, zeros
    return state


def _layer_loop(x, state, weights, carry_h: bool, carry_c: bool, emit_c: bool = False):
    h0, c0 = _initial(x, state, weights[1])
    h, c = h0, c0
    outputs = []
    for t in range(x.shape[1]):
        h_new, c_new = ref.lstm_cell(x[:, t], (h if carry_h else h0, c if carry_c else c0), *weights)
        h, c = h_new, c_new
        outputs.append(c if emit_c else h)
    return torch.stack(outputs, dim=1), (h, c)


def _layer_c_not_carried(x, state, *w):
    return _layer_loop(x, state, w, carry_h=True, carry_c=False)


def _layer_h_not_carried(x, state, *w):
    return _layer_loop(x, state, w, carry_h=False, carry_c=True)


def _layer_nothing_carried(x, state, *w):
    return _layer_loop(x, state, w, carry_h=False, carry_c=False)


def _layer_cell_states_out(x, state, *w):
    return _layer_loop(x, state, w, carry_h=True, carry_c=True, emit_c=True)


def _layer_state_ignored(x, state, *w):
    return ref.lstm_layer(x, None, *w)


def _layer_first_state(x, state, *w):
    h0, c0 = _initial(x, state, w[1])
    outputs, _ = ref.lstm_layer(x, state, *w)
    return outputs, ref.lstm_cell(x[:, 0], (h0, c0), *w)


# 2.4 a stacked LSTM ---------------------------------------------------------------------------


def _stack_state(g: torch.Generator, d: int, h: int, layers: int) -> dict:
    state = {}
    for k in range(layers):
        w_ih, w_hh, b_ih, b_hh = _weights(g, d if k == 0 else h, h)
        state.update({f"weight_ih_l{k}": w_ih, f"weight_hh_l{k}": w_hh, f"bias_ih_l{k}": b_ih, f"bias_hh_l{k}": b_hh})
    return state


def _stack_cases(g: torch.Generator) -> list[Case]:
    def case(label, b, t, d, h, layers, with_state):
        init = {"input_size": d, "hidden_size": h, "num_layers": layers}
        kwargs = {}
        if with_state:
            kwargs = {"state": (randn(g, layers, b, h).tanh(), randn(g, layers, b, h))}
        return Case(label, (randn(g, b, t, d),), kwargs, init, _stack_state(g, d, h, layers))

    return [
        case("one layer, B = 2, T = 4, D = 3, H = 4, no initial state", 2, 4, 3, 4, 1, False),
        case("three layers, B = 2, T = 3, D = H = 4, with an initial state", 2, 3, 4, 4, 3, True),
        case("two layers, B = 3, T = 5, D = 3, H = 4, with an initial state", 3, 5, 3, 4, 2, True),
        case("two layers, B = 1, T = 6, D = 2, H = 3, no initial state", 1, 6, 2, 3, 2, False),
    ]


class _StackEveryLayerReadsX(ref.LSTM):
    def forward(self, x, state=None):
        hs, cs = [], []
        for k in range(self.num_layers):
            output, (h, c) = ref.lstm_layer(
                x, None if state is None else (state[0][k], state[1][k]), *self.layer_weights(k)
            )
            hs.append(h)
            cs.append(c)
        return output, (torch.stack(hs), torch.stack(cs))


class _StackFirstLayerStateEverywhere(ref.LSTM):
    def forward(self, x, state=None):
        output, hs, cs = x, [], []
        for k in range(self.num_layers):
            output, (h, c) = ref.lstm_layer(
                output, None if state is None else (state[0][0], state[1][0]), *self.layer_weights(k)
            )
            hs.append(h)
            cs.append(c)
        return output, (torch.stack(hs), torch.stack(cs))


class _StackStateOnlyFirstLayer(ref.LSTM):
    def forward(self, x, state=None):
        output, hs, cs = x, [], []
        for k in range(self.num_layers):
            output, (h, c) = ref.lstm_layer(
                output, None if state is None or k > 0 else (state[0][0], state[1][0]), *self.layer_weights(k)
            )
            hs.append(h)
            cs.append(c)
        return output, (torch.stack(hs), torch.stack(cs))


class _StackHCSwapped(ref.LSTM):
    def forward(self, x, state=None):
        output, (h, c) = super().forward(x, state)
        return output, (c, h)


# 2.6 one step of the GRU ----------------------------------------------------------------------------------


def _gru_parts(x_t, h, w_ih, w_hh, b_ih, b_hh):
    return (x_t @ w_ih.T + b_ih).chunk(3, dim=-1), (h @ w_hh.T + b_hh).chunk(3, dim=-1)


def _gru_reset_before_product(x_t, h, w_ih, w_hh, b_ih, b_hh):
    (x_r, x_z, x_n), (h_r, h_z, _) = _gru_parts(x_t, h, w_ih, w_hh, b_ih, b_hh)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    w_hn, b_hn = w_hh.chunk(3, dim=0)[2], b_hh.chunk(3)[2]
    n = torch.tanh(x_n + (r * h) @ w_hn.T + b_hn)
    return (1 - z) * n + z * h


def _gru_interpolation_reversed(x_t, h, w_ih, w_hh, b_ih, b_hh):
    (x_r, x_z, x_n), (h_r, h_z, h_n) = _gru_parts(x_t, h, w_ih, w_hh, b_ih, b_hh)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    return z * torch.tanh(x_n + r * h_n) + (1 - z) * h


def _gru_gates_swapped(x_t, h, w_ih, w_hh, b_ih, b_hh):
    (x_z, x_r, x_n), (h_z, h_r, h_n) = _gru_parts(x_t, h, w_ih, w_hh, b_ih, b_hh)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    return (1 - z) * torch.tanh(x_n + r * h_n) + z * h


def _gru_no_reset(x_t, h, w_ih, w_hh, b_ih, b_hh):
    (_, x_z, x_n), (_, h_z, h_n) = _gru_parts(x_t, h, w_ih, w_hh, b_ih, b_hh)
    z = torch.sigmoid(x_z + h_z)
    return (1 - z) * torch.tanh(x_n + h_n) + z * h


# 2.5 an experiment: the forget bias that keeps a given fraction of the memory -----------------------------

WINDOW = 0.1  # the fraction kept must lie within 10% of the target: 0.45 to 0.55 for 0.5, 0.18 to 0.22 for 0.2


def _retention_cases(g: torch.Generator) -> list[Case]:
    def case(label: str, b: int, t: int, d: int, h: int, target: float, scale: float = 1.0) -> Case:
        return Case(label, (randn(g, b, t, d, scale=scale), *_weights(g, d, h), target))

    return [
        case("B = 8 sequences of T = 40 steps, D = 8, H = 16: keep half (target 0.5)", 8, 40, 8, 16, 0.5),
        case("B = 8, T = 60, D = 4, H = 8: keep a fifth (target 0.2)", 8, 60, 4, 8, 0.2),
        case("B = 8, T = 30, D = 16, H = 32, inputs twice as large: keep half (target 0.5)", 8, 30, 16, 32, 0.5, 2.0),
    ]


def belt_retention(bias: float, x, w_ih, w_hh, b_ih, b_hh) -> torch.Tensor:
    """(T,): after each step t, the fraction of the cell state c_0 that the belt still carries, f_1 * ... * f_t
    (the derivative of c_t with respect to c_0 along the belt), averaged over the sequences and units.

    The reference LSTM runs from the zero state with ``bias`` added to the forget-gate rows of b_ih.
    """
    hidden = w_hh.shape[1]
    raised = b_ih.clone()
    raised[hidden : 2 * hidden] += bias  # rows H:2H hold the forget gate (order i, f, g, o)
    h = c = x.new_zeros(x.shape[0], hidden)
    kept, curve = torch.ones_like(h), []
    with torch.no_grad():
        for t in range(x.shape[1]):
            _, f, _, _ = ref.lstm_gates(x[:, t], h, w_ih, w_hh, raised, b_hh)
            h, c = ref.lstm_cell(x[:, t], (h, c), w_ih, w_hh, raised, b_hh)
            kept = kept * f
            curve.append(kept.mean())
    return torch.stack(curve)


def choose_forget_bias(x, w_ih, w_hh, b_ih, b_hh, target):
    """The number b which, added to the forget-gate rows of b_ih, makes the belt keep about ``target`` of c_0
    over the T steps of x (the mean over sequences and units of the product of the forget gate's values).

    The fraction kept grows with b, from 0 to 1, so bisect on b until it is the target.
    """
    hidden = w_hh.shape[1]

    def kept(bias):
        raised = b_ih.clone()
        raised[hidden : 2 * hidden] += bias
        h = c = x.new_zeros(x.shape[0], hidden)
        product = torch.ones_like(h)
        for t in range(x.shape[1]):
            z_i, z_f, z_g, z_o = (x[:, t] @ w_ih.T + raised + h @ w_hh.T + b_hh).chunk(4, dim=-1)
            f = torch.sigmoid(z_f)
            c = f * c + torch.sigmoid(z_i) * torch.tanh(z_g)
            h = torch.sigmoid(z_o) * torch.tanh(c)
            product = product * f
        return product.mean().item()

    low, high = -10.0, 30.0  # the belt keeps nothing at -10 and everything at 30
    with torch.no_grad():
        for _ in range(30):
            middle = (low + high) / 2
            if kept(middle) < target:
                low = middle
            else:
                high = middle
    return (low + high) / 2


def _judge_retention(case: Case, answer) -> str | None:
    if isinstance(answer, torch.Tensor) and answer.numel() == 1 and answer.dtype != torch.bool:
        answer = answer.item()  # a tensor that holds one number, as autograd or a bisection on tensors gives
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return f"the answer should be one number, the bias to add to the forget gate; got {registry.describe(answer)}"
    if not math.isfinite(answer):
        return f"the bias should be a finite number, got {answer!r}"
    *inputs, target = case.args
    kept = belt_retention(float(answer), *inputs)[-1].item()
    low, high = (1 - WINDOW) * target, (1 + WINDOW) * target
    if low <= kept <= high:
        return None
    way = "it forgets too fast" if kept < low else "it holds on too long"
    return (
        f"with the forget bias raised by {answer:.4g}, the belt keeps a fraction {kept:.3g} of c_0 after the "
        f"{inputs[0].shape[1]} steps (the mean over sequences and units of the product of f): {way}; it must "
        f"keep between {low:.3g} and {high:.3g}"
    )


def _bias_fixed(value: float):
    return lambda x, w_ih, w_hh, b_ih, b_hh, target: value


def _bias_closed_form(x, w_ih, w_hh, b_ih, b_hh, target):
    return math.log(target ** (1 / x.shape[1]) / (1 - target ** (1 / x.shape[1])))


register(
    Exercise(
        id="2.1",
        title="the LSTM gates",
        idea=(
            "all four gates come from one affine map of the input and the previous hidden state, cut into four "
            "blocks in PyTorch's order i, f, g, o; three gates squash into (0, 1), the candidate into (-1, 1)."
        ),
        points=2,
        name="lstm_gates",
        kind="function",
        parts={(0,): 'the input gate i', (1,): 'the forget gate f', (2,): 'the candidate g', (3,): 'the output gate o'},
        reference=ref.lstm_gates,
        make_cases=_step_cases,
        mistakes=(
            Mistake(
                "the input and forget gates are swapped: in PyTorch's order the blocks of rows are i (0:H), f (H:2H), "
                "g (2H:3H), o (3H:4H).",
                _gates_if_swapped,
            ),
            Mistake(
                "every gate goes through tanh: i, f and o are sigmoids (between 0 and 1); only the candidate g uses tanh.",
                _gates_all_tanh,
            ),
            Mistake(
                "the candidate g goes through a sigmoid: it uses tanh, so that it can add or subtract (-1 to 1).",
                _gates_all_sigmoid,
            ),
            Mistake(
                "the blocks are taken in the order i, f, o, g: PyTorch's order is i, f, g, o (g is the third block).",
                _gates_ifog,
            ),
            Mistake(
                "g and o are swapped: return (i, f, g, o), with g = tanh of block 3 and o = sigmoid of block 4.",
                _gates_g_o_swapped,
            ),
            Mistake("only b_ih is added: the gates add both biases, b_ih and b_hh.", _gates_one_bias),
        ),
        forbidden=BUILTIN_LSTM,
    ),
    Exercise(
        id="2.2",
        title="one step of the LSTM cell",
        idea=(
            "on the conveyor, the new cell state keeps a gated part of the old one and adds a gated part of the "
            "candidate; the hidden state is a gated, squashed view of the new cell state."
        ),
        points=2,
        name="lstm_cell",
        kind="function",
        parts={(0,): 'the new hidden state h', (1,): 'the new cell state c'},
        reference=ref.lstm_cell,
        make_cases=_cell_cases,
        mistakes=(
            Mistake(
                "the forget and input gates are swapped in the update: the forget gate multiplies the old cell state, "
                "c_t = f * c + i * g.",
                _cell_gates_swapped,
            ),
            Mistake(
                "the old cell state is never forgotten: multiply it by the forget gate, c_t = f * c + i * g.",
                _cell_no_forgetting,
            ),
            Mistake("the candidate is added without the input gate: c_t = f * c + i * g.", _cell_no_input_gate),
            Mistake("h_t = o * c_t is missing a tanh: h_t = o * tanh(c_t).", _cell_no_tanh),
            Mistake("the tanh is outside the output gate: h_t = o * tanh(c_t), not tanh(o * c_t).", _cell_tanh_outside),
            Mistake(
                "h_t uses the old cell state: compute c_t first, then h_t = o * tanh(c_t).", _cell_old_memory_shown
            ),
            Mistake("return the pair in the order (h, c).", _cell_order_swapped),
        ),
        forbidden=BUILTIN_LSTM,
    ),
    Exercise(
        id="2.3",
        title="an LSTM layer over a sequence",
        idea=(
            "run the cell once per position, carrying both h and c from each step to the next; the outputs are "
            "the hidden states."
        ),
        points=3,
        name="lstm_layer",
        kind="function",
        parts={
            (0,): 'the tensor of outputs',
            (1,): 'the final pair (h, c)',
            (1, 0): 'the final hidden state h',
            (1, 1): 'the final cell state c',
        },
        reference=ref.lstm_layer,
        make_cases=_layer_cases,
        mistakes=(
            Mistake(
                "the cell state is not carried between steps: each step must start from the (h, c) the previous step "
                "returned, c included.",
                _layer_c_not_carried,
            ),
            Mistake(
                "the hidden state is not carried between steps: each step must start from the (h, c) the previous step "
                "returned, h included.",
                _layer_h_not_carried,
            ),
            Mistake(
                "the state is not carried between steps: each step must start from the (h, c) the previous step returned.",
                _layer_nothing_carried,
            ),
            Mistake("the outputs are the cell states: outputs[:, t] is the hidden state h_t.", _layer_cell_states_out),
            Mistake(
                "the initial state is ignored: start from it when it is given, from zeros only when it is None.",
                _layer_state_ignored,
            ),
            Mistake("the second item should be the state after the last step, (h_T, c_T).", _layer_first_state),
        ),
        forbidden=BUILTIN_LSTM,
    ),
    Exercise(
        id="2.4",
        title="a stacked LSTM",
        idea=(
            "the first layer reads the input sequence, each later layer reads the outputs of the layer below, "
            "and every layer starts from its own initial state."
        ),
        points=3,
        name="LSTM",
        kind="module",
        parts={
            (0,): 'the tensor of outputs',
            (1,): 'the final pair (h_n, c_n)',
            (1, 0): 'the final hidden states h_n',
            (1, 1): 'the final cell states c_n',
        },
        reference=ref.LSTM,
        make_cases=_stack_cases,
        mistakes=(
            Mistake(
                "every layer reads x: layer k must read the outputs of layer k - 1 (only the first layer reads x).",
                _StackEveryLayerReadsX,
            ),
            Mistake(
                "every layer starts from the state of layer 0: layer k starts from (h0[k], c0[k]).",
                _StackFirstLayerStateEverywhere,
            ),
            Mistake(
                "only the first layer gets its initial state: layer k starts from (h0[k], c0[k]).",
                _StackStateOnlyFirstLayer,
            ),
            Mistake("h_n and c_n are swapped: return (output, (h_n, c_n)).", _StackHCSwapped),
        ),
        forbidden=BUILTIN_LSTM,
    ),
    Exercise(
        id="2.6",
        title="one step of the GRU",
        idea=(
            "the update gate interpolates between the old state and a candidate; the reset gate decides how much "
            "of the old state the candidate's recurrent term may use."
        ),
        points=2,
        name="gru_cell",
        kind="function",
        reference=gru_ref.gru_cell,
        make_cases=functools.partial(_step_cases, gates=3),
        mistakes=(
            Mistake(
                "the candidate's recurrent term is W_hn (r * h) + b_hn; PyTorch's GRU resets after the product: "
                "n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).",
                _gru_reset_before_product,
            ),
            Mistake(
                "the update gate weighs the old state: h_t = (1 - z) * n + z * h, so z near 1 keeps h.",
                _gru_interpolation_reversed,
            ),
            Mistake(
                "the first two row blocks are swapped: PyTorch stacks the GRU's rows as r, z, n (reset first).",
                _gru_gates_swapped,
            ),
            Mistake(
                "the reset gate is missing from the candidate: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).",
                _gru_no_reset,
            ),
        ),
        forbidden=BUILTIN_GRU,
    ),
    Exercise(
        id="2.5",
        title="how long the LSTM remembers",
        idea=(
            "the forget bias shifts every forget gate up, but the inputs keep moving the gates, so the fraction "
            "the belt keeps has no formula: measure it for a few biases, see that it grows with the bias, and "
            "narrow the interval where it meets the target."
        ),
        points=3,
        name="choose_forget_bias",
        kind="function",
        reference=choose_forget_bias,
        make_cases=_retention_cases,
        judge=_judge_retention,
        mistakes=(
            Mistake(
                "this is the bias for a gate that hears only its bias, the same value at every step; here the "
                "inputs and the hidden state move the gate up and down, and over many steps a gate that swings "
                "keeps less than a steady gate at its middle value. Measure the product of the actual forget "
                "gates instead.",
                _bias_closed_form,
            ),
            Mistake(
                "a bias of 0 leaves the forget gate near one half, PyTorch's starting point: the belt halves its "
                "content at every step and keeps almost nothing after T steps.",
                _bias_fixed(0.0),
            ),
            Mistake(
                "a forget bias of 1 is a good recipe for the start of training, not an answer to this question: "
                "sigmoid(1) is about 0.73, and 0.73 to the power 30 or more is far below the target.",
                _bias_fixed(1.0),
            ),
            Mistake(
                "5 is the bias the chapter's training used; what it keeps depends on T, the weights and the "
                "inputs, so measure for each case.",
                _bias_fixed(5.0),
            ),
            Mistake(
                "with a bias of 20 every forget gate is practically 1 and the belt keeps everything: the memory "
                "must fade to the target, not stay whole.",
                _bias_fixed(20.0),
            ),
        ),
    ),
)
