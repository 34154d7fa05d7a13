"""Chapters 1 and 2's cells laid out for a phone's column (see _render.LAYOUTS): the same blocks, closer, the long
formula and notes wrapped, and the ids of the wide diagrams in recurrent.py."""

from __future__ import annotations

from ._canvas import HIGHLIGHT, NARROW, Canvas
from ._render import narrow_layout
from .recurrent import _lstm_flows

__all__: list[str] = []


@narrow_layout("lstm_cell")
def lstm_cell() -> Canvas:
    """As recurrent.lstm_cell: the cell state along the top, the four gates in one row under it, [h_{t-1}, x_t]
    under them. The output's path (tanh, then the output gate's product) hangs from the line between the + and
    c_t, so h_t leaves to the right under c_t; the note on the cell state takes two lines."""
    c = Canvas(NARROW, 4.35)
    top = 3.35
    c_prev = c.box(0.32, top, 0.5, 0.42, "$c_{t-1}$", "state", part="state", index="c-previous")
    c_new = c.box(3.42, top, 0.5, 0.42, "$c_t$", "state", part="state", index="c-next")
    forget_x = c.circle(1.0, top, "×", part="operator", index="forget")
    add = c.circle(1.95, top, "+", part="operator", index="add")
    input_x = c.circle(1.95, 2.5, "×", part="operator", index="input")
    out_x = c.circle(2.82, 2.15, "×", part="operator", index="output")
    squash = c.box(2.82, 2.72, 0.52, 0.34, "tanh", "recurrent", part="squash")
    gates = {
        name: c.box(x, 1.3, 0.62, 0.55, f"{name}\n$\\sigma$", "recurrent", part="gate", index=name)
        for name, x in (("forget", 1.0), ("input", 1.68), ("output", 3.35))
    }
    cand = c.box(2.5, 1.3, 0.9, 0.55, "candidate\ntanh", "recurrent", part="candidate")
    cell = dict(c_prev=c_prev, c_new=c_new, forget_x=forget_x, add=add, input_x=input_x, out_x=out_x, squash=squash)
    _lstm_flows(c, cell, gates, cand, top, "left")
    h_new = c.box(3.42, 2.15, 0.5, 0.42, "$h_t$", "state", part="state", index="h-next")
    c.arrow(out_x.right, h_new.left)
    # [h_{t-1}, x_t]: one bus under the gates, read by all four.
    h_prev = c.box(0.32, 0.6, 0.5, 0.42, "$h_{t-1}$", "state", part="state", index="h-previous")
    x = c.box(1.0, 0.22, 0.44, 0.36, "$x_t$", "input", part="input")
    c.arrow(h_prev.right, (3.35, 0.6), head=False)
    c.arrow(x.top, (x.x, 0.6))
    for g in [*gates.values(), cand]:
        c.arrow((g.x, 0.6), g.bottom)
    c.text(2.35, 0.4, r"$[h_{t-1},\ x_t]$")
    c.text(
        c.width / 2,
        3.98,
        "the cell state $c$: only multiplied by $f_t$\nand added to, never squashed",
        color=HIGHLIGHT,
    )
    return c


@narrow_layout("gru_cell")
def gru_cell() -> Canvas:
    """As recurrent.gru_cell: the state's path along the top through the mix (its formula on two lines), the gates
    under it, h_{t-1} coming down the left edge to the bus that the gates read."""
    c = Canvas(NARROW, 3.9)
    top = 3.3
    h_prev = c.box(0.3, top, 0.5, 0.42, "$h_{t-1}$", "state", part="state", index="previous")
    h_new = c.box(3.45, top, 0.5, 0.42, "$h_t$", "state", part="state", index="next")
    formula = r"$h_t = (1 - z_t) \odot h_{t-1}$" + "\n" + r"$+\ z_t \odot \tilde{h}_t$"
    mix = c.box(1.9, top, 2.3, 0.72, formula, "plain", part="mix")
    c.arrow(h_prev.right, mix.left, color=HIGHLIGHT, lw=2.4, part="state_path", index=1)
    c.arrow(mix.right, h_new.left, color=HIGHLIGHT, lw=2.4, part="state_path", index=2)
    reset = c.box(0.95, 1.4, 0.64, 0.55, "reset\n$\\sigma$", "recurrent", part="gate", index="reset")
    cand = c.box(1.95, 1.4, 0.9, 0.55, "candidate\ntanh", "recurrent", part="candidate")
    update = c.box(2.92, 1.4, 0.7, 0.55, "update\n$\\sigma$", "recurrent", part="gate", index="update")
    c.arrow(reset.right, cand.left, label="$r_t$")
    c.arrow(cand.top, (cand.x, mix.bottom[1]), label=r"$\tilde{h}_t$")
    c.arrow(update.top, (update.x, mix.bottom[1]), label="$z_t$")
    x = c.box(0.8, 0.22, 0.44, 0.36, "$x_t$", "input", part="input")
    c.arrow(h_prev.bottom, (h_prev.x, 0.65), (update.x, 0.65), head=False)
    c.arrow(x.top, (x.x, 0.65))
    for g in (reset, cand, update):
        c.arrow((g.x, 0.65), g.bottom)
    c.text(2.45, 0.45, r"$[h_{t-1},\ x_t]$")
    c.text(1.05, 2.3, "the candidate\nreads $r_t \\odot h_{t-1}$\nand $x_t$", style="italic")
    return c


@narrow_layout("rnn_unrolled")
def rnn_unrolled(n_steps: int = 4) -> Canvas:
    """As recurrent.rnn_unrolled, four steps a row: a longer sequence wraps, its state running from the end of
    one row, between the rows, to the start of the next (the label on that run names the state it carries)."""
    n, per_row, pitch, w = int(n_steps), 4, 0.78, 0.48
    rows = -(-n // per_row)
    c = Canvas(NARROW, 0.6 + rows * 2.2 + (rows - 1) * 0.7)
    c.text(
        c.width / 2, c.height - 0.3, "one cell, the same weights $W_{ih}$, $W_{hh}$,\n$b_{ih}$, $b_{hh}$ at every step"
    )
    previous = c.box(0.35, c.height - 1.7, 0.5, 0.42, "$h_0$", "state", part="hidden", index=0)
    for i in range(1, n + 1):
        r, k = divmod(i - 1, per_row)
        x, y = 1.0 + k * pitch, c.height - 1.7 - r * 2.9
        cell = c.box(x, y, w, 0.6, "tanh", "recurrent", part="cell", index=i)
        inp = c.box(x, y - 0.9, w, 0.42, f"$x_{{{i}}}$", "input", part="input", index=i)
        out = c.box(x, y + 0.9, w, 0.42, f"$h_{{{i}}}$", "state", part="hidden", index=i)
        c.arrow(inp.top, cell.bottom)
        c.arrow(cell.top, out.bottom)
        label = f"$h_{{{i - 1}}}$" if i > 1 else None
        if k == 0 and r > 0:  # the state from the row above: round its end, between the rows, in from the left
            right, mid = previous.right[0] + 0.08, y + 1.45
            c.arrow(previous.right, (right, previous.y), (right, mid), (0.45, mid), (0.45, y), cell.left, label=label)
        else:
            c.arrow(previous.right, cell.left, label=label)
        previous = cell
    return c
