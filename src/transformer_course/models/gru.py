"""The GRU cell (chapter 2): two gates and no separate cell state, in PyTorch's equations and gate order.

    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)        the reset gate
    z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)        the update gate
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))     the candidate
    h_t = (1 - z) * n + z * h                         keep the old state where z is near 1

Weights are shaped as in ``torch.nn.GRU`` / ``nn.GRUCell``: w_ih (3H, D), w_hh (3H, H), b_ih, b_hh (3H,), with
the row blocks in the order r, z, n. The encoder-decoders of chapters 3 and 4 use ``nn.GRU``, which this cell
reproduces.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .rnn import check_cell_inputs

__all__ = ["GATES", "gru_cell"]

GATES = ("reset", "update", "candidate")  # the order of the row blocks, as in torch.nn.GRU


def gru_cell(
    x_t: Tensor, h: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> Tensor:
    """One GRU step. x_t: (B, D), h: (B, H), w_ih: (3H, D), w_hh: (3H, H), b_ih, b_hh: (3H,) or None -> h_t (B, H)."""
    check_cell_inputs(x_t, h, w_ih, w_hh, b_ih, b_hh, gates=3)
    from_x = x_t @ w_ih.T + (b_ih if b_ih is not None else 0)  # (B, 3H): blocks r, z, n
    from_h = h @ w_hh.T + (b_hh if b_hh is not None else 0)  # (B, 3H)
    x_r, x_z, x_n = from_x.chunk(3, dim=-1)
    h_r, h_z, h_n = from_h.chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    # The reset gate scales the recurrent term after its matrix product (PyTorch's form, and cuDNN's), not h before it.
    n = torch.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h
