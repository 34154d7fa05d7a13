"""Chapters 1 and 2: the RNN cell, the RNN unrolled in time, the LSTM cell and the GRU cell."""

from __future__ import annotations

import math
from typing import Any

from . import _args
from ._canvas import HIGHLIGHT, NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render
from ._shapes import Box

__all__ = ["gru_cell", "lstm_cell", "rnn_cell", "rnn_unrolled"]


def _on_circle(c: Box, towards: tuple[float, float]) -> tuple[float, float]:
    """The point of circle ``c``'s edge that faces ``towards``: where an arrow from there meets it."""
    dx, dy = towards[0] - c.x, towards[1] - c.y
    d = math.hypot(dx, dy)
    return (c.x + dx / d * c.w / 2, c.y + dy / d * c.h / 2)


@drawing
@narrow_layout("rnn_cell")
def rnn_cell() -> Diagram:
    """One step of a vanilla RNN: the previous state h_{t-1} and the input x_t go through one tanh layer, whose
    output h_t is the new state (passed to the next step, and read as the output)."""
    phone = narrow()  # a phone: the formula and the note on two lines each, the boxes closer
    c = Canvas(NARROW, 3.05) if phone else Canvas(6.4, 2.75)
    label = r"$h_t = \tanh(W_{ih}\,x_t + b_{ih} + W_{hh}\,h_{t-1} + b_{hh})$"
    if phone:
        label = r"$h_t = \tanh(W_{ih}\,x_t + b_{ih}$" + "\n" + r"$+\ W_{hh}\,h_{t-1} + b_{hh})$"
    mid, right = (1.85, 3.35) if phone else (3.2, 5.95)
    cell = c.box(mid, 1.3, 2.05 if phone else 3.9, 0.8 if phone else 0.75, label, "recurrent", part="cell")
    prev = c.box(0.4 if phone else 0.45, 1.3, 0.6, 0.42, "$h_{t-1}$", "state", part="state", index="previous")
    new = c.box(right, 1.3, 0.6, 0.42, "$h_t$", "state", part="state", index="next")
    x = c.box(mid, 0.35, 0.6, 0.42, "$x_t$", "input", part="input")
    c.arrow(prev.right, cell.left)
    c.arrow(x.top, cell.bottom)
    c.arrow(cell.right, new.left)
    c.arrow(new.top, (new.x, 1.95))
    if phone:
        c.text(new.x + 0.3, 2.1, "to step $t+1$", va="center", ha="right")
        c.text(mid, 2.7, "the same weights $W_{ih}$, $W_{hh}$, $b_{ih}$, $b_{hh}$\nat every time step")
    else:
        c.text(new.x, 2.1, "to step $t+1$", va="center")
        c.text(3.2, 2.45, "the same weights $W_{ih}$, $W_{hh}$, $b_{ih}$, $b_{hh}$ at every time step")
    alt = (
        "One step of a recurrent neural network: the previous hidden state h_{t-1} and the input x_t go through "
        "one tanh layer, h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), whose output h_t is passed to the "
        "next step."
    )
    return render(c, alt)


@drawing
def rnn_unrolled(n_steps: int = 4) -> Diagram:
    """The RNN unrolled over ``n_steps`` time steps: one copy of the same cell per step (gid "cell-i", i from 1),
    reading x_i ("input-i") and passing its state h_i on to the next and up as the output ("hidden-i", from 0)."""
    n = _args.count("n_steps", n_steps, 1, 8)
    step = 1.3 if n <= 4 else (6.8 - 1.45 - 0.45) / (n - 1)
    width = 1.45 + (n - 1) * step + 0.55
    c = Canvas(width, 3.0)
    w = min(step - 0.3, 0.8)  # the gap between cells: room for an arrow and its label
    xs = [1.45 + i * step for i in range(n)]
    previous = c.box(0.45, 1.25, 0.5, 0.42, "$h_0$", "state", part="hidden", index=0)
    for i, x in enumerate(xs, start=1):
        cell = c.box(x, 1.25, w, 0.6, "tanh", "recurrent", part="cell", index=i)
        inp = c.box(x, 0.35, min(w, 0.6), 0.42, f"$x_{{{i}}}$", "input", part="input", index=i)
        out = c.box(x, 2.15, min(w, 0.6), 0.42, f"$h_{{{i}}}$", "state", part="hidden", index=i)
        c.arrow(inp.top, cell.bottom)
        c.arrow(cell.top, out.bottom)
        c.arrow(previous.right, cell.left, label=f"$h_{{{i - 1}}}$" if i > 1 else None)
        previous = cell
    c.text(width / 2, 2.72, "one cell, the same weights $W_{ih}$, $W_{hh}$, $b_{ih}$, $b_{hh}$ at every step")
    alt = (
        f"A recurrent network unrolled over {n} time step{'s' if n > 1 else ''}: {n} cop{'ies' if n > 1 else 'y'} "
        f"of one tanh cell, with the same weights, read x_1 to x_{n} in order; each passes its hidden state to "
        f"the next, starting from h_0, and outputs h_1 to h_{n}."
    )
    return render(c, alt)


def _lstm_flows(c: Canvas, cell: dict, gates: dict, cand, top: float, input_label_side: str) -> None:
    """The LSTM cell's arrows, wherever its blocks were placed: the cell state in three thick highlighted segments
    through the forget product and the sum, each gate into its product, the candidate into the input product, and
    the output's path (tanh of the new state, then the output gate's product). ``top``: the cell state's height."""
    path: dict[str, Any] = dict(color=HIGHLIGHT, lw=2.4, part="cell_state")
    c.arrow(cell["c_prev"].right, cell["forget_x"].left, head=False, index=1, **path)
    c.arrow(cell["forget_x"].right, cell["add"].left, head=False, index=2, **path)
    c.arrow(cell["add"].right, cell["c_new"].left, index=3, **path)
    input_x, out_x, squash = cell["input_x"], cell["out_x"], cell["squash"]
    c.arrow(gates["forget"].top, cell["forget_x"].bottom, label="$f_t$")
    c.arrow(gates["input"].top, _on_circle(input_x, gates["input"].top), label="$i_t$", label_side=input_label_side)
    c.arrow(cand.top, _on_circle(input_x, cand.top), label=r"$\tilde{c}_t$")
    c.arrow(input_x.top, cell["add"].bottom)
    c.arrow((squash.x, top), squash.top)
    c.arrow(squash.bottom, out_x.top)
    c.arrow(gates["output"].top, _on_circle(out_x, gates["output"].top), label="$o_t$")


@drawing
def lstm_cell() -> Diagram:
    """The LSTM cell: forget, input and output gates ("gate-forget", "gate-input", "gate-output"), the candidate
    ("candidate"), and the cell state running straight through the top ("cell-state-1" to "-3", highlighted),
    only multiplied by the forget gate and added to."""
    c = Canvas(6.6, 3.75)
    top = 3.05
    c_prev = c.box(0.45, top, 0.6, 0.42, "$c_{t-1}$", "state", part="state", index="c-previous")
    c_new = c.box(6.15, top, 0.6, 0.42, "$c_t$", "state", part="state", index="c-next")
    forget_x = c.circle(1.9, top, "×", part="operator", index="forget")
    add = c.circle(3.3, top, "+", part="operator", index="add")
    input_x = c.circle(3.3, 2.35, "×", part="operator", index="input")
    out_x = c.circle(5.3, 1.9, "×", part="operator", index="output")
    squash = c.box(5.3, 2.45, 0.6, 0.34, "tanh", "recurrent", part="squash")
    gates = {
        name: c.box(x, 1.5, 0.84, 0.55, f"{name}\n$\\sigma$", "recurrent", part="gate", index=name)
        for name, x in (("forget", 1.9), ("input", 2.8), ("output", 4.7))
    }
    cand = c.box(3.8, 1.5, 0.84, 0.55, "candidate\ntanh", "recurrent", part="candidate")
    cell = dict(c_prev=c_prev, c_new=c_new, forget_x=forget_x, add=add, input_x=input_x, out_x=out_x, squash=squash)
    _lstm_flows(c, cell, gates, cand, top, "right")
    h_new = c.box(6.15, 1.9, 0.6, 0.42, "$h_t$", "state", part="state", index="h-next")
    c.arrow(out_x.right, h_new.left)
    # [h_{t-1}, x_t]: one bus under the gates, read by all four.
    h_prev = c.box(0.45, 0.75, 0.6, 0.42, "$h_{t-1}$", "state", part="state", index="h-previous")
    x = c.box(1.25, 0.28, 0.5, 0.38, "$x_t$", "input", part="input")
    c.arrow(h_prev.right, (4.7, 0.75), head=False)
    c.arrow(x.top, (x.x, 0.75))
    for g in [*gates.values(), cand]:
        c.arrow((g.x, 0.75), g.bottom)
    c.text(3.3, 0.55, r"$[h_{t-1},\ x_t]$")
    c.text(3.3, 3.5, "the cell state $c$: only multiplied by $f_t$ and added to, never squashed", color=HIGHLIGHT)
    alt = (
        "An LSTM cell: from the previous state h_{t-1} and the input x_t, a forget gate, an input gate, an output "
        "gate and a tanh candidate are computed; the cell state c runs straight through the top, highlighted, "
        "only multiplied by the forget gate and added to (input gate times candidate), and h_t is the output gate "
        "times tanh of the new cell state."
    )
    return render(c, alt)


@drawing
def gru_cell() -> Diagram:
    """The GRU cell: the reset gate ("gate-reset") scales the state the candidate ("candidate") reads, and the
    update gate ("gate-update") mixes the old state and the candidate on the state's path along the top
    ("state-path-1", "-2", highlighted)."""
    c = Canvas(6.6, 3.6)
    top = 3.0
    h_prev = c.box(0.45, top, 0.6, 0.42, "$h_{t-1}$", "state", part="state", index="previous")
    h_new = c.box(6.15, top, 0.6, 0.42, "$h_t$", "state", part="state", index="next")
    mix = c.box(3.85, top, 2.75, 0.5, r"$h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde{h}_t$", "plain", part="mix")
    c.arrow(h_prev.right, mix.left, color=HIGHLIGHT, lw=2.4, part="state_path", index=1)
    c.arrow(mix.right, h_new.left, color=HIGHLIGHT, lw=2.4, part="state_path", index=2)
    reset = c.box(1.5, 1.55, 0.84, 0.55, "reset\n$\\sigma$", "recurrent", part="gate", index="reset")
    cand = c.box(3.0, 1.55, 1.0, 0.55, "candidate\ntanh", "recurrent", part="candidate")
    update = c.box(4.9, 1.55, 0.84, 0.55, "update\n$\\sigma$", "recurrent", part="gate", index="update")
    c.arrow(reset.right, cand.left, label="$r_t$")
    c.arrow(cand.top, (cand.x, top - 0.25), label=r"$\tilde{h}_t$")
    c.arrow(update.top, (update.x, top - 0.25), label="$z_t$")
    x = c.box(1.0, 0.28, 0.5, 0.38, "$x_t$", "input", part="input")
    c.arrow(h_prev.bottom, (h_prev.x, 0.75), (update.x, 0.75), head=False)
    c.arrow(x.top, (x.x, 0.75))
    for g in (reset, cand, update):
        c.arrow((g.x, 0.75), g.bottom)
    c.text(3.95, 0.55, r"$[h_{t-1},\ x_t]$")
    c.text(2.0, 2.3, "the candidate reads\n$r_t \\odot h_{t-1}$ and $x_t$", ha="center", style="italic", fontsize=9)
    alt = (
        "A GRU cell: from the previous state h_{t-1} and the input x_t, a reset gate and an update gate are "
        "computed; the candidate reads x_t and the reset-scaled state, and the new state h_t, on the highlighted "
        "path along the top, mixes the old state and the candidate by the update gate."
    )
    return render(c, alt)
