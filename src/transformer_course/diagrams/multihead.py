"""Chapter 6: multi-head attention, split into heads, attended in parallel, concatenated and projected by W_O,
with the tensor's shape at every stage."""

from __future__ import annotations

from .._checks import check_heads
from . import _args
from ._canvas import NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render

__all__ = ["multi_head"]


@drawing
@narrow_layout("multi_head")
def multi_head(n_heads: int = 8, d_model: int = 512, T: int | None = None) -> Diagram:
    """Multi-head attention, bottom to top: the input ("input"), projected by W_Q, W_K, W_V and split into
    ``n_heads`` heads ("projection"), one box per head attending in parallel ("head-i", i from 1), concatenated
    ("concat") and projected by W_O ("output-projection"). The shapes ("shape-1" to "-5") stand beside the arrows,
    with B for the batch and ``T`` for the length (the letter T if not given)."""
    h = _args.count("n_heads", n_heads, 1, 16)
    d = _args.count("d_model", d_model, 1, 1 << 20)
    check_heads(d, h)
    t = "T" if T is None else _args.count("T", T, 1, 1 << 20)
    d_k = d // h
    phone = narrow()  # a phone: the same stack, narrower, the shapes beside it in fewer words
    c = Canvas(NARROW if phone else 6.8, 5.45)
    cx, full = (1.2, 2.3) if phone else (2.4, 4.5)
    pitch = min(0.9, full / h)
    xs = [cx + (i - (h - 1) / 2) * pitch for i in range(h)]
    x = c.box(cx, 0.3, 2.0, 0.4, "input $X$", "input", part="input")
    split = c.box(
        cx,
        1.2,
        full,
        0.5 if phone else 0.45,
        f"$W_Q$, $W_K$, $W_V$;{chr(10) if phone else ' '}split into {h} head{'s' * (h > 1)}",
        "attention",
        part="projection",
    )
    concat = c.box(cx, 3.35, full, 0.45, f"concatenate the {h} head{'s' * (h > 1)}", "attention", part="concat")
    wo = c.box(cx, 4.2, min(2.2, full), 0.45, f"$W_O$  ({d} × {d})", "attention", part="output_projection")
    out = c.box(cx, 5.05, 2.0, 0.4, "output", "state", part="output")
    for i, hx in enumerate(xs, start=1):
        label = f"head {i}" if pitch >= 0.75 else str(i) if pitch >= 0.2 or not phone else ""
        head = c.box(hx, 2.27, pitch - (0.1 if pitch >= 0.5 else 0.05), 0.7, label, "attention", part="head", index=i)
        c.arrow((hx, split.top[1]), head.bottom)
        c.arrow(head.top, (hx, concat.bottom[1]))
    for a, b in ((x, split), (concat, wo), (wo, out)):
        c.arrow(a.top, b.bottom)
    # The shapes, in a column to the right of the stack, each level with the arrows it describes.
    shapes = [
        (0.75, f"(B, {t}, {d})"),
        (1.72, f"(B, {h}, {t}, {d_k})\n" + ("" if phone else f"{h} head{'s' * (h > 1)} of ") + f"$d_k$ = {d_k}"),
        (2.98, f"(B, {h}, {t}, {d_k})"),
        (3.78, f"(B, {t}, {h}·{d_k})\n= (B, {t}, {d})"),
        (4.63, f"(B, {t}, {d})"),
    ]
    for i, (y, text) in enumerate(shapes, start=1):
        c.text(cx + full / 2 + 0.15, y, text, ha="left", part="shape", index=i)
    heads = f"{h} head{'s' * (h > 1)}"
    alt = (
        f"Multi-head attention with {heads} on d_model = {d}: the input (B, {t}, {d}) is projected by W_Q, W_K and "
        f"W_V and split into {heads} of d_k = {d_k}, shape (B, {h}, {t}, {d_k}); the {heads} attend in parallel, "
        f"are concatenated back to (B, {t}, {d}) and projected by W_O."
    )
    return render(c, alt)
