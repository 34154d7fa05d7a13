"""Recurrent networks (chapter 1): the tanh RNN cell, one layer unrolled over time, and a stacked RNN.

Conventions used across the course:
  * tensors are batch-first: a batch of sequences is ``(B, T, D)``;
  * weights are named and shaped as in ``torch.nn.RNN``, so that a state dict copies either way:
    ``weight_ih_l{k}``: (H, D_k), ``weight_hh_l{k}``: (H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}``: (H,),
    where D_0 = input_size and D_k = hidden_size for the layers k > 0 above the first.

    ours = RNN(D, H, num_layers=2)
    ours.load_state_dict(nn.RNN(D, H, num_layers=2, batch_first=True).state_dict())  # and back again
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .._checks import positive_int, require_tensor

__all__ = ["rnn_cell", "rnn_step_jacobian", "rnn_layer", "StackedRecurrent", "RNN"]


def check_cell_inputs(
    x_t: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None, gates: int = 1
) -> None:
    """Raise a clear error unless the shapes fit one step of a recurrent cell with ``gates`` blocks of rows.

    x_t: (B, D), h: (B, H), w_ih: (gates*H, D), w_hh: (gates*H, H), b_ih, b_hh: (gates*H,) or None.
    (The LSTM of chapter 2 has gates = 4.)
    """
    require_tensor("x_t", x_t, dim=2)
    require_tensor("h", h, dim=2)
    require_tensor("w_ih", w_ih, dim=2)
    require_tensor("w_hh", w_hh, dim=2)
    batch, hidden = h.shape
    if x_t.shape[0] != batch:
        raise ValueError(f"x_t and h must have the same batch size, got x_t {tuple(x_t.shape)} and h {tuple(h.shape)}")
    rows = f"{gates} * hidden_size = {gates * hidden}" if gates > 1 else f"hidden_size = {hidden}"
    if tuple(w_hh.shape) != (gates * hidden, hidden):
        raise ValueError(f"w_hh must have shape ({rows}, hidden_size = {hidden}), got {tuple(w_hh.shape)}")
    if tuple(w_ih.shape) != (gates * hidden, x_t.shape[1]):
        raise ValueError(f"w_ih must have shape ({rows}, input_size = {x_t.shape[1]}), got {tuple(w_ih.shape)}")
    for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is not None and tuple(require_tensor(name, b, dim=1).shape) != (gates * hidden,):
            raise ValueError(f"{name} must have shape ({gates * hidden},), got {tuple(b.shape)}")


def affine(x_t: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor:
    """x_t W_ih^T + b_ih + h W_hh^T + b_hh: (B, D), (B, H) -> (B, rows of the weights)."""
    z = x_t @ w_ih.T + h @ w_hh.T
    if b_ih is not None:
        z = z + b_ih
    if b_hh is not None:
        z = z + b_hh
    return z


def rnn_cell(
    x_t: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> Tensor:
    """One step of a tanh RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).

    x_t: (B, D), h: (B, H), w_ih: (H, D), w_hh: (H, H), b_ih, b_hh: (H,) or None -> h_t: (B, H)
    """
    check_cell_inputs(x_t, h, w_ih, w_hh, b_ih, b_hh)
    return torch.tanh(affine(x_t, h, w_ih, w_hh, b_ih, b_hh))


def rnn_step_jacobian(h_t: Tensor, w_hh: Tensor) -> Tensor:
    """The Jacobian of one tanh step with respect to the previous state: diag(1 - h_t^2) W_hh.

    h_t: (B, H), the state the step produced; w_hh: (H, H) -> (B, H, H),
    entry [b, i, j] = d h_t[b, i] / d h_{t-1}[b, j].
    """
    require_tensor("h_t", h_t, dim=2)
    require_tensor("w_hh", w_hh, dim=2)
    hidden = h_t.shape[1]
    if tuple(w_hh.shape) != (hidden, hidden):
        raise ValueError(
            f"w_hh must have shape ({hidden}, {hidden}) to match h_t {tuple(h_t.shape)}, got {tuple(w_hh.shape)}"
        )
    return (1 - h_t**2).unsqueeze(-1) * w_hh  # row i of W_hh scaled by tanh'(a_i) = 1 - h_t[i]^2


def rnn_layer(
    x: Tensor, h0: Tensor | None, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One RNN layer unrolled over a batch of sequences, the same weights at every step.

    x: (B, T, D), h0: (B, H) or None for zeros -> outputs (B, T, H), the states h_1 .. h_T, and h_T: (B, H)
    """
    require_tensor("x", x, dim=3)
    batch, steps, _ = x.shape
    if steps == 0:
        raise ValueError(f"x must hold at least one time step, got shape {tuple(x.shape)}")
    require_tensor("w_hh", w_hh, dim=2)
    h = x.new_zeros(batch, w_hh.shape[1]) if h0 is None else h0  # (B, H)
    outputs = []
    for t in range(steps):
        h = rnn_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)  # the state is carried from step to step
        outputs.append(h)
    return torch.stack(outputs, dim=1), h


def check_initial_state(name: str, state: Tensor, num_layers: int, batch: int, hidden: int) -> None:
    require_tensor(name, state, dim=3)
    if tuple(state.shape) != (num_layers, batch, hidden):
        raise ValueError(
            f"{name} must have shape (num_layers, B, hidden_size) = {(num_layers, batch, hidden)}, got {tuple(state.shape)}"
        )


class StackedRecurrent(nn.Module):
    """The parameters of a stack of recurrent layers, named and initialised as in torch.nn.RNN and nn.LSTM.

    Layer k has weight_ih_l{k} (GATES * H, d_in), weight_hh_l{k} (GATES * H, H) and, with bias, bias_ih_l{k}
    and bias_hh_l{k} (GATES * H,): one block of rows per gate, so that weights copy to and from PyTorch's modules.
    Subclasses set GATES (1 for the RNN, 4 for the LSTM) and write forward.
    """

    GATES = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True) -> None:
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            positive_int(name, value)
        self.input_size, self.hidden_size, self.num_layers, self.bias = input_size, hidden_size, num_layers, bias
        rows = self.GATES * hidden_size
        for k in range(num_layers):
            d_in = input_size if k == 0 else hidden_size
            setattr(self, f"weight_ih_l{k}", nn.Parameter(torch.empty(rows, d_in)))
            setattr(self, f"weight_hh_l{k}", nn.Parameter(torch.empty(rows, hidden_size)))
            if bias:
                setattr(self, f"bias_ih_l{k}", nn.Parameter(torch.empty(rows)))
                setattr(self, f"bias_hh_l{k}", nn.Parameter(torch.empty(rows)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.hidden_size)  # as PyTorch: U(-1/sqrt(H), 1/sqrt(H)) for every parameter
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def layer_weights(self, k: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """(w_ih, w_hh, b_ih, b_hh) of layer k."""
        return (
            getattr(self, f"weight_ih_l{k}"),
            getattr(self, f"weight_hh_l{k}"),
            getattr(self, f"bias_ih_l{k}", None),
            getattr(self, f"bias_hh_l{k}", None),
        )

    def check_input(self, x: Tensor) -> None:
        require_tensor("x", x, dim=3)
        if x.shape[-1] != self.input_size:
            raise ValueError(
                f"x must have input_size = {self.input_size} features in its last dimension, got shape {tuple(x.shape)}"
            )

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}" + (
            "" if self.bias else ", bias=False"
        )


class RNN(StackedRecurrent):
    """A stack of tanh RNN layers; layer k reads the output sequence of layer k - 1.

    x: (B, T, input_size), h0: (num_layers, B, hidden_size) or None
    -> output (B, T, hidden_size), the last layer's states, and h_n (num_layers, B, hidden_size)
    Parameters and their initialisation are those of torch.nn.RNN (nonlinearity='tanh', batch_first=True).
    """

    GATES = 1

    def forward(self, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        self.check_input(x)
        if h0 is not None:
            check_initial_state("h0", h0, self.num_layers, x.shape[0], self.hidden_size)
        output, last = x, []
        for k in range(self.num_layers):
            output, h_k = rnn_layer(output, None if h0 is None else h0[k], *self.layer_weights(k))  # (B, T, H), (B, H)
            last.append(h_k)
        return output, torch.stack(last)  # (B, T, H), (num_layers, B, H)
