"""The LSTM (chapter 2): its four gates, one step of the cell, one layer unrolled over time, and a stack.

The gates are computed from one affine map of the input and the previous hidden state, whose rows
hold the gates in PyTorch's order i, f, g, o (input gate, forget gate, candidate, output gate):

    i = sigmoid(z_i)   f = sigmoid(z_f)   g = tanh(z_g)   o = sigmoid(z_o)
    c_t = f * c_{t-1} + i * g             h_t = o * tanh(c_t)

Weights are named and shaped as in ``torch.nn.LSTM``, so that a state dict copies either way:
``weight_ih_l{k}``: (4H, D_k), ``weight_hh_l{k}``: (4H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}``: (4H,).
Tensors are batch-first.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import require_tensor
from .rnn import StackedRecurrent, affine, check_cell_inputs, check_initial_state

__all__ = ["lstm_gates", "lstm_cell", "lstm_layer", "LSTM", "GATES"]

GATES = ("input", "forget", "candidate", "output")  # the order of the row blocks, as in torch.nn.LSTM


def lstm_gates(
    x_t: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four gates of one LSTM step.

    x_t: (B, D), h: (B, H), w_ih: (4H, D), w_hh: (4H, H), b_ih, b_hh: (4H,) or None
    -> (i, f, g, o), each (B, H): i, f, o in (0, 1) through a sigmoid, g in (-1, 1) through tanh.
    """
    check_cell_inputs(x_t, h, w_ih, w_hh, b_ih, b_hh, gates=4)
    z = affine(x_t, h, w_ih, w_hh, b_ih, b_hh)  # (B, 4H): blocks i, f, g, o
    z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)  # (B, H) each
    return torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)


def _require_state(state: object) -> tuple[Tensor, Tensor]:
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError(f"the state must be a pair (h, c), got {type(state).__name__}")
    h, c = state
    require_tensor("h", h, dim=2)
    require_tensor("c", c, dim=2)
    if h.shape != c.shape:
        raise ValueError(f"h and c must have the same shape, got h {tuple(h.shape)} and c {tuple(c.shape)}")
    return h, c


def lstm_cell(
    x_t: Tensor,
    state: tuple[Tensor, Tensor],
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One LSTM step.

    x_t: (B, D), state = (h, c), each (B, H) -> the new state (h_t, c_t), each (B, H)
    """
    h, c = _require_state(state)
    i, f, g, o = lstm_gates(x_t, h, w_ih, w_hh, b_ih, b_hh)
    c = f * c + i * g  # the conveyor: keep a fraction f of the old memory, add i of the candidate
    h = o * torch.tanh(c)  # what the cell shows of its memory
    return h, c


def lstm_layer(
    x: Tensor,
    state: tuple[Tensor, Tensor] | None,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """One LSTM layer unrolled over a batch of sequences.

    x: (B, T, D), state: (h0, c0), each (B, H), or None for zeros
    -> outputs (B, T, H), the hidden states h_1 .. h_T, and the last state (h_T, c_T), each (B, H)
    """
    require_tensor("x", x, dim=3)
    batch, steps, _ = x.shape
    if steps == 0:
        raise ValueError(f"x must hold at least one time step, got shape {tuple(x.shape)}")
    require_tensor("w_hh", w_hh, dim=2)
    if state is None:
        zeros = x.new_zeros(batch, w_hh.shape[1])
        state = (zeros, zeros)
    outputs = []
    for t in range(steps):
        state = lstm_cell(x[:, t], state, w_ih, w_hh, b_ih, b_hh)  # both h and c are carried
        outputs.append(state[0])
    return torch.stack(outputs, dim=1), state


class LSTM(StackedRecurrent):
    """A stack of LSTM layers; layer k reads the hidden states of layer k - 1.

    x: (B, T, input_size), state: (h0, c0), each (num_layers, B, hidden_size), or None
    -> output (B, T, hidden_size), the last layer's hidden states, and (h_n, c_n), each (num_layers, B, hidden_size)
    Parameters and their initialisation are those of torch.nn.LSTM (batch_first=True).
    """

    GATES = 4  # i, f, g, o

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        self.check_input(x)
        if state is not None:
            if not isinstance(state, (tuple, list)) or len(state) != 2:
                raise TypeError(f"the state must be a pair (h0, c0), got {type(state).__name__}")
            for name, s in zip(("h0", "c0"), state):
                check_initial_state(name, s, self.num_layers, x.shape[0], self.hidden_size)
        output, hs, cs = x, [], []
        for k in range(self.num_layers):
            layer_state = None if state is None else (state[0][k], state[1][k])
            output, (h_k, c_k) = lstm_layer(output, layer_state, *self.layer_weights(k))  # (B, T, H), (B, H) x 2
            hs.append(h_k)
            cs.append(c_k)
        return output, (torch.stack(hs), torch.stack(cs))  # (B, T, H), (num_layers, B, H) x 2
