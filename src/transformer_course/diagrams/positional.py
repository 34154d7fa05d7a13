"""Chapter 7: where the positional encoding enters the model, and its two column layouts (interleaved, as in the
paper, against concatenated)."""

from __future__ import annotations

from . import _args
from ._canvas import NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render

__all__ = ["pe_layouts", "positional_entry"]

SIN, COS = "#f8cdd6", "#c7e0f5"  # the two kinds of columns of the encoding


def _root(d: int) -> str:
    return f"{d**0.5:.2f}".rstrip("0").rstrip(".")


@drawing
def positional_entry(d_model: int = 512) -> Diagram:
    """Where positions enter: the tokens' embeddings, scaled by sqrt(d_model) ("token-embedding"), plus the
    positional encoding of positions 0 to T-1 ("positional-encoding"), summed ("sum") into the first layer's input
    ("first-layer"), with the shapes on the arrows."""
    d = _args.count("d_model", d_model, 1, 1 << 20)
    c = Canvas(5.6, 3.9)
    tokens = c.box(1.4, 0.3, 1.5, 0.4, "token ids", "input", part="tokens")
    positions = c.box(4.2, 0.3, 1.7, 0.4, "positions 0 … T−1", "input", part="positions")
    emb = c.box(1.4, 1.3, 1.9, 0.55, f"token embedding\n× √{d} = {_root(d)}", "embedding", part="token_embedding")
    pe = c.box(4.2, 1.3, 1.9, 0.55, "positional encoding\nsin and cos", "embedding", part="positional_encoding")
    total = c.circle(2.8, 2.35, "+", part="sum")
    layer = c.box(2.8, 3.45, 3.2, 0.5, "the first encoder (or decoder) layer", "layer", part="first_layer")
    c.arrow(tokens.top, emb.bottom, label="(B, T)")
    c.arrow(positions.top, pe.bottom, label="(T,)")
    c.arrow(emb.top, (emb.x, total.y), total.left, label=f"(B, T, {d})", label_side="left", label_segment=0)
    c.arrow(pe.top, (pe.x, total.y), total.right, label=f"(T, {d}): the same\nfor every sentence", label_segment=0)
    c.arrow(total.top, layer.bottom, label=f"(B, T, {d})")
    alt = (
        f"How positions enter the model: each token's embedding of width d_model = {d}, scaled by the square root "
        f"of {d}, is added to the positional encoding of its position (sines and cosines, the same for every "
        f"sentence), and the sum, of shape (B, T, {d}), is the first layer's input."
    )
    return render(c, alt)


@drawing
@narrow_layout("pe_layouts")
def pe_layouts(d_model: int = 8) -> Diagram:
    """The columns of a positional encoding of width ``d_model``: interleaved ("interleaved-k", k the column from
    0: sin at even k, cos at odd k, as in the paper) against concatenated ("concatenated-k": the d_model / 2 sines,
    then the cosines). Column k's frequency index is shown under it."""
    d = _args.count("d_model", d_model, 2, 16)
    if d % 2:
        raise ValueError(f"d_model = {d} must be even: every frequency has a sin and a cos column")
    half = d // 2
    phone = narrow()  # a phone: narrower columns, the titles on two lines
    cw = min(0.6, (NARROW - 0.2 if phone else 5.9) / d)
    c = Canvas(NARROW if phone else 6.8, 3.75 if phone else 3.45)
    x0 = (c.width - d * cw) / 2
    layouts = (
        (
            "interleaved",
            3.35 if phone else 3.2,
            "interleaved (the paper's):" + ("\n" if phone else " ") + "column 2i is sin, 2i + 1 is cos",
            [("sin" if k % 2 == 0 else "cos", k // 2) for k in range(d)],
        ),
        (
            "concatenated",
            1.75 if phone else 1.65,
            "concatenated:" + ("\n" if phone else " ") + f"the {half} sines, then the {half} cosines",
            [("sin", k) if k < half else ("cos", k - half) for k in range(d)],
        ),
    )
    for name, top, title, columns in layouts:
        c.text(c.width / 2, top + (0.12 if phone else 0), title, fontsize=10, weight="bold")
        if x0 >= 0.65:
            c.text(x0 - 0.08, top - 0.3, "column", ha="right", color="#6a6a6a")
        for k, (fn, i) in enumerate(columns):
            x = x0 + (k + 0.5) * cw
            c.text(x, top - 0.3, str(k), color="#6a6a6a")
            c.box(
                x,
                top - 0.78,
                cw - 0.05,
                0.6,
                f"{fn}\n$\\omega_{{{i}}}$" if cw >= 0.35 or not phone else "",  # 16 columns: the colours say
                SIN if fn == "sin" else COS,
                part=name,
                index=k,
                fontsize=9,
                lw=0.8,
            )
    c.legend(0.1 if phone else c.width / 2 - 1.9, 0.25, [(SIN, r"$\sin(\omega_i\, pos)$")])
    c.legend(1.95 if phone else c.width / 2 + 0.3, 0.25, [(COS, r"$\cos(\omega_i\, pos)$")])
    alt = (
        f"The {d} columns of a positional encoding, in two layouts: interleaved, as in the paper, sin and cos "
        f"alternate (sin, cos, sin, cos, ...) with frequency i in columns 2i and 2i + 1; concatenated, the {half} "
        f"sine columns come first and the {half} cosine columns after them, frequency i in columns i and i + {half}."
    )
    return render(c, alt)
