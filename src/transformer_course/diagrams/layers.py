"""Chapter 8: one Transformer layer with its residual connections and layer norms, post-norm (the paper's) and
pre-norm (``norm_first=True``, the course's models), alone or side by side."""

from __future__ import annotations

from .._checks import check_heads
from . import _args
from ._canvas import Canvas
from ._render import Diagram, drawing, render

__all__ = ["pre_post_norm", "transformer_layer"]

GAP = 0.2  # between two elements of the main path: room for its arrow, and for the residual to branch off
SUBLAYERS = {
    "encoder": (("self-attention", "attention"), ("feed-forward", "feedforward")),
    "decoder": (
        ("masked self-attention", "attention"),
        ("cross-attention", "attention"),
        ("feed-forward", "feedforward"),
    ),
}


def _column(c: Canvas, cx: float, bw: float, kind: str, norm: str, y: float, prefix: str = "", names=None) -> float:
    """One layer, bottom to top from y (the end of the input's line) at x = cx, its blocks ``bw`` wide; returns
    the y its output leaves at. Each sub-layer ("sublayer-i") with its layer norm ("norm-i"), residual sum
    ("add-i") and residual path ("residual-i"), which branches off before the sub-layer (and before its norm,
    pre-norm) and runs up on the left, clear of the boxes."""
    res_x = cx - bw / 2 - 0.22
    order = ("norm", "block", "add") if norm == "pre" else ("block", "add", "norm")
    for i, (name, colour) in enumerate(SUBLAYERS[kind], start=1):
        branch = y + 0.08
        for element in order:
            if element == "norm":
                b = c.box(cx, y + GAP + 0.15, bw * 0.7, 0.3, "layer norm", "norm", part=f"{prefix}norm", index=i)
            elif element == "block":
                label = names[i - 1] if names else name
                b = c.box(cx, y + GAP + 0.19, bw, 0.38, label, colour, part=f"{prefix}sublayer", index=i)
                if name == "cross-attention":  # keys and values from the encoder, queries from below
                    memory = c.box(cx + bw / 2 + 0.5, b.y, 0.6, 0.5, "encoder\noutput", "state")
                    c.arrow(memory.left, b.right)
            else:
                b = c.circle(cx, y + GAP + 0.12, "+", r=0.12, kind="norm", part=f"{prefix}add", index=i)
                c.arrow((cx, branch), (res_x, branch), (res_x, b.y), b.left, part=f"{prefix}residual", index=i)
            c.arrow((cx, y), b.bottom)
            y = b.top[1]
    return y


def _check(kind: str, norm: str) -> tuple[str, str]:
    return _args.choice("kind", kind, ("encoder", "decoder")), _args.choice("norm", norm, ("pre", "post"))


def _describe(kind: str, norm: str) -> str:
    names = " then ".join(n for n, _ in SUBLAYERS[kind])
    where = (
        "after each residual sum (post-norm)"
        if norm == "post"
        else "before each sub-layer, inside the residual (pre-norm)"
    )
    return f"{len(SUBLAYERS[kind])} sub-layers ({names}), each in a residual connection, with a layer norm {where}"


@drawing
def transformer_layer(
    kind: str = "encoder", norm: str = "post", d_model: int = 512, n_heads: int = 8, d_ff: int = 2048
) -> Diagram:
    """One encoder or decoder layer, bottom to top, with its residual connections and layer norms: ``norm="post"``
    normalises after each residual sum (the paper's), ``norm="pre"`` before each sub-layer, leaving the residual
    path a clean sum (gids "sublayer-i", "norm-i", "add-i", "residual-i", i from 1)."""
    kind, norm = _check(kind, norm)
    d = _args.count("d_model", d_model, 1, 1 << 20)
    h = _args.count("n_heads", n_heads, 1, 1 << 10)
    ff = _args.count("d_ff", d_ff, 1, 1 << 20)
    check_heads(d, h)
    attention = f"{h} head{'s' * (h > 1)}"
    names = {
        "encoder": (f"self-attention, {attention}", f"feed-forward {d}→{ff}→{d}"),
        "decoder": (
            f"masked self-attention, {attention}",
            f"cross-attention, {attention}",
            f"feed-forward {d}→{ff}→{d}",
        ),
    }[kind]
    n = len(SUBLAYERS[kind])
    c = Canvas(5.0, 1.52 * n + 1.25)
    c.text(2.2, 0.15, f"from the layer below: (B, T, {d})")
    top = _column(c, 2.2, 2.5, kind, norm, 0.3, names=names)
    c.arrow((2.2, top), (2.2, top + 0.3))
    c.text(2.2, top + 0.45, f"to the next layer: (B, T, {d})")
    c.text(2.2, c.height - 0.2, f"{kind} layer, {norm}-norm", fontsize=10, weight="bold")
    alt = f"A Transformer {kind} layer of width {d}, {norm}-norm: {_describe(kind, norm)}."
    return render(c, alt)


@drawing
def pre_post_norm(kind: str = "encoder") -> Diagram:
    """The same layer twice, side by side: post-norm (left, gids "postnorm-sublayer-i", "postnorm-norm-i", ...) and
    pre-norm (right, "prenorm-sublayer-i", ...), which then needs one more layer norm at the top of the stack."""
    kind, _ = _check(kind, "pre")
    n = len(SUBLAYERS[kind])
    c = Canvas(6.8, 1.52 * n + 1.5)
    for cx, norm, title in (
        (1.75, "post", "post-norm (the paper's)"),
        (5.15, "pre", "pre-norm (norm_first=True)"),
    ):
        c.text(cx, c.height - 0.2, title, fontsize=10, weight="bold")
        c.text(cx, 0.15, "from the layer below")
        top = _column(c, cx, 1.6, kind, norm, 0.3, prefix=f"{norm}norm_")
        c.arrow((cx, top), (cx, top + 0.3))
        c.text(cx, top + 0.45, "to the next layer")
    c.text(5.15, c.height - 0.45, "(and a final layer norm atop the stack)")
    alt = (
        f"The same Transformer {kind} layer drawn twice. Left, post-norm, as in the paper: {_describe(kind, 'post')}. "
        f"Right, pre-norm: {_describe(kind, 'pre')}, so the residual path from input to output is a plain sum; a "
        "pre-norm stack ends with one more layer norm."
    )
    return render(c, alt)
