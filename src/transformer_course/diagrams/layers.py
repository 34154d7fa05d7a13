"""Chapter 8: one Transformer layer with its residual connections and layer norms, post-norm (the paper's) and
pre-norm (``norm_first=True``, the course's models), alone or side by side. Chapter 10: the decoder-only layer of a
language model, the decoder's layer without its cross-attention, drawn where that sub-layer was, and the three kinds
of layer side by side."""

from __future__ import annotations

from .._checks import check_heads
from . import _args
from ._canvas import NARROW as PHONE
from ._canvas import Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render

__all__ = ["layer_kinds", "pre_post_norm", "transformer_layer"]

GAP = 0.2  # between two elements of the main path: room for its arrow, and for the residual to branch off
SUBLAYERS = {
    "encoder": (("self-attention", "attention"), ("feed-forward", "feedforward")),
    "decoder": (
        ("masked self-attention", "attention"),
        ("cross-attention", "attention"),
        ("feed-forward", "feedforward"),
    ),
}
# A language model's layer (GPT's): the decoder's, less the cross-attention to an encoder it does not have.
REMOVED = "cross-attention"
SUBLAYERS["decoder-only"] = tuple(s for s in SUBLAYERS["decoder"] if s[0] != REMOVED)
KINDS = tuple(SUBLAYERS)
GHOST = "#9a9a9a"  # the outline of what a layer no longer has
HEIGHTS = {"norm": 0.3, "block": 0.38, "add": 0.24}  # of a sub-layer's elements, as _column draws them


def _slots(kind: str) -> int:
    """How many sub-layers tall the layer is drawn: a decoder-only layer keeps an empty slot for the removed one."""
    return len(SUBLAYERS["decoder" if kind == "decoder-only" else kind])


def _column(c: Canvas, cx: float, bw: float, kind: str, norm: str, y: float, prefix: str = "", names=None) -> float:
    """One layer, bottom to top from y (the end of the input's line) at x = cx, its blocks ``bw`` wide; returns
    the y its output leaves at. Each sub-layer ("sublayer-i") with its layer norm ("norm-i"), residual sum
    ("add-i") and residual path ("residual-i"), which branches off before the sub-layer (and before its norm,
    pre-norm) and runs up on the left, clear of the boxes. A decoder-only layer keeps the decoder's geometry: where
    the decoder has its cross-attention, the main path runs straight up past a dashed, grey box ("removed"), so
    the two layers drawn side by side line up sub-layer by sub-layer."""
    res_x = cx - bw / 2 - 0.22
    order = ("norm", "block", "add") if norm == "pre" else ("block", "add", "norm")
    i = 0
    for name, colour in SUBLAYERS["decoder" if kind == "decoder-only" else kind]:
        if kind == "decoder-only" and name == REMOVED:
            # The slot of the decoder's sub-layer (its block, sum and norm, each after a gap), left empty; the box
            # stands where the decoder's cross-attention and encoder output are, level with them.
            slot = sum(GAP + HEIGHTS[e] for e in order)
            level = y + sum(GAP + HEIGHTS[e] for e in order[: order.index("block")]) + GAP + HEIGHTS["block"] / 2
            right = cx + bw / 2 + 0.8  # where the decoder's "encoder output" ends
            c.box(
                (cx + 0.15 + right) / 2,
                level,
                right - cx - 0.15,
                0.62,
                "cross-attention:\nremoved\n(no encoder)",
                "plain",
                part=f"{prefix}removed",
                edge=GHOST,
                linestyle="--",
                alpha=0.8,
            )
            c.arrow((cx, y), (cx, y + slot))
            y += slot
            continue
        i += 1
        branch = y + 0.08
        for element in order:
            if element == "norm":
                b = c.box(cx, y + GAP + 0.15, bw * 0.7, 0.3, "layer norm", "norm", part=f"{prefix}norm", index=i)
            elif element == "block":
                label = names[i - 1] if names else name
                b = c.box(cx, y + GAP + 0.19, bw, 0.38, label, colour, part=f"{prefix}sublayer", index=i)
                if name == "cross-attention":  # keys and values from the encoder, queries from below
                    mx, mw = (0.55, 0.7) if c.phone else (0.5, 0.6)  # its text is larger on a phone
                    memory = c.box(cx + bw / 2 + mx, b.y, mw, 0.5, "encoder\noutput", "state")
                    c.arrow(memory.left, b.right)
            else:
                b = c.circle(cx, y + GAP + 0.12, "+", r=0.12, kind="norm", part=f"{prefix}add", index=i)
                c.arrow((cx, branch), (res_x, branch), (res_x, b.y), b.left, part=f"{prefix}residual", index=i)
            c.arrow((cx, y), b.bottom)
            y = b.top[1]
    return y


def _check(kind: str, norm: str) -> tuple[str, str]:
    return _args.choice("kind", kind, KINDS), _args.choice("norm", norm, ("pre", "post"))


def _describe(kind: str, norm: str) -> str:
    names = " then ".join(n for n, _ in SUBLAYERS[kind])
    where = (
        "after each residual sum (post-norm)"
        if norm == "post"
        else "before each sub-layer, inside the residual (pre-norm)"
    )
    described = f"{len(SUBLAYERS[kind])} sub-layers ({names}), each in a residual connection, with a layer norm {where}"
    if kind == "decoder-only":
        described += (
            f"; the decoder's {REMOVED} sub-layer, between them, is removed (a dashed grey box where it was): "
            "there is no encoder to attend to"
        )
    return described


@drawing
@narrow_layout("transformer_layer")
def transformer_layer(
    kind: str = "encoder", norm: str = "post", d_model: int = 512, n_heads: int = 8, d_ff: int = 2048
) -> Diagram:
    """One encoder, decoder or decoder-only layer, bottom to top, with its residual connections and layer norms:
    ``norm="post"`` normalises after each residual sum (the paper's), ``norm="pre"`` before each sub-layer, leaving
    the residual path a clean sum (gids "sublayer-i", "norm-i", "add-i", "residual-i", i from 1). The decoder-only
    layer (chapter 10's language model) is the decoder's without its cross-attention: a dashed grey box
    ("removed") stands where it was."""
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
        "decoder-only": (f"masked self-attention, {attention}", f"feed-forward {d}→{ff}→{d}"),
    }[kind]
    cx, bw, width = (1.6, 2.3, PHONE) if narrow() else (2.2, 2.5, 5.0)  # a phone: the same column, closer
    c = Canvas(width, 1.52 * _slots(kind) + 1.25)
    c.text(cx, 0.15, f"from the layer below: (B, T, {d})")
    top = _column(c, cx, bw, kind, norm, 0.3, names=names)
    c.arrow((cx, top), (cx, top + 0.3))
    c.text(cx, top + 0.45, f"to the next layer: (B, T, {d})")
    c.text(cx, c.height - 0.2, f"{kind} layer, {norm}-norm", fontsize=10, weight="bold")
    alt = f"A Transformer {kind} layer of width {d}, {norm}-norm: {_describe(kind, norm)}."
    return render(c, alt)


def _stacked(c: Canvas, columns, height: float) -> None:
    """A phone's layout of layers drawn side by side: one above the other, the first on top, each ``height`` tall.
    ``columns``: (kind, norm, title, note, prefix) per layer."""
    cx = 1.6  # as transformer_layer's on a phone: the residual on the left, the encoder output on the right
    for k, (kind, norm, title, note, prefix) in enumerate(columns):
        base = (len(columns) - 1 - k) * height
        c.text(cx, base + height - 0.2, title, fontsize=10, weight="bold")
        if note:
            c.text(cx, base + height - 0.45, note)
        c.text(cx, base + 0.15, "from the layer below")
        top = _column(c, cx, 2.3, kind, norm, base + 0.3, prefix=prefix)
        c.arrow((cx, top), (cx, top + 0.3))
        c.text(cx, top + 0.45, "to the next layer")


@drawing
@narrow_layout("pre_post_norm")
def pre_post_norm(kind: str = "encoder") -> Diagram:
    """The same layer twice, side by side: post-norm (left, gids "postnorm-sublayer-i", "postnorm-norm-i", ...) and
    pre-norm (right, "prenorm-sublayer-i", ...), which then needs one more layer norm at the top of the stack."""
    kind, _ = _check(kind, "pre")
    if narrow():  # a phone: post-norm above pre-norm
        c = Canvas(PHONE, 2 * (1.52 * _slots(kind) + 1.5))
        columns = (
            (kind, "post", "post-norm (the paper's)", "", "postnorm_"),
            (kind, "pre", "pre-norm (norm_first=True)", "(and a final layer norm atop the stack)", "prenorm_"),
        )
        _stacked(c, columns, c.height / 2)
    else:
        c = Canvas(6.8, 1.52 * _slots(kind) + 1.5)
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


NARROW = {  # the sub-layers' names in a column too narrow for them on one line
    "masked self-attention": "masked\nself-attention",
}


@drawing
@narrow_layout("layer_kinds")
def layer_kinds(kinds=("encoder", "decoder", "decoder-only"), norm: str = "post") -> Diagram:
    """Two or three kinds of layer side by side, bottom-aligned, so that their sub-layers line up: the encoder's
    (gids "encoder-sublayer-i", "encoder-norm-i", ...), the decoder's ("decoder-sublayer-i", ...) and the
    decoder-only layer of a language model ("decoder-only-sublayer-i", ..., and "decoder-only-removed": the dashed
    grey box where the decoder's cross-attention was)."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    kinds = tuple(kinds)
    for kind in kinds:
        _args.choice("kinds' entries", kind, KINDS)
    if not 2 <= len(kinds) <= 3 or len(set(kinds)) != len(kinds):
        raise ValueError(f"kinds must be two or three different kinds of {', '.join(KINDS)}, got {kinds!r}")
    _, norm = _check(kinds[0], norm)
    if narrow():  # a phone: one above the other, in the order given, each as tall as the tallest
        height = 1.52 * max(_slots(k) for k in kinds) + 1.5
        c = Canvas(PHONE, len(kinds) * height)
        _stacked(c, [(kind, norm, f"{kind} layer", "", f"{kind.replace('-', '_')}_") for kind in kinds], height)
    else:
        bw = 1.3 if len(kinds) == 3 else 1.6
        # Each column: the residual path on the left of its blocks, and on the right the decoder's encoder output or
        # the decoder-only layer's removed cross-attention.
        lefts = [bw / 2 + 0.3 for _ in kinds]
        rights = [bw / 2 + (0.85 if kind != "encoder" else 0.15) for kind in kinds]
        spare = (7.0 - sum(lefts) - sum(rights)) / (len(kinds) + 1)
        c = Canvas(7.0, 1.52 * max(_slots(k) for k in kinds) + 1.5)
        x = spare
        for kind, left, right in zip(kinds, lefts, rights):
            cx = x + left
            x = cx + right + spare
            names = [NARROW.get(name, name) if bw < 1.5 else name for name, _ in SUBLAYERS[kind]]
            c.text(cx, c.height - 0.2, f"{kind} layer", fontsize=10, weight="bold")
            c.text(cx, 0.15, "from the layer below")
            top = _column(c, cx, bw, kind, norm, 0.3, prefix=f"{kind.replace('-', '_')}_", names=names)
            c.arrow((cx, top), (cx, top + 0.3))
            c.text(cx, top + 0.45, "to the next layer")
    described = "; ".join(f"the {kind} layer has {_describe(kind, norm)}" for kind in kinds)
    alt = f"{len(kinds)} kinds of Transformer layer side by side, {norm}-norm, their sub-layers lined up: {described}."
    return render(c, alt)
