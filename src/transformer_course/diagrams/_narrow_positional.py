"""Chapter 7's entry of positions laid out for a phone's column (see _render.LAYOUTS): the two branches closer, the
shapes on their arrows beside them on the outer sides, the ids of the wide diagram in positional.py."""

from __future__ import annotations

from ._canvas import NARROW, Canvas
from ._render import narrow_layout
from .positional import _root

__all__: list[str] = []


@narrow_layout("positional_entry")
def positional_entry(d_model: int = 512) -> Canvas:
    """As positional.positional_entry, the branches 1.95 in apart instead of 2.8: the embedding's shape goes left of
    its arrow and the encoding's (two lines) inside, between the branches, where the wide one had room beside."""
    d = d_model
    c = Canvas(NARROW, 3.9)
    left, right, mid = 0.9, 2.85, 1.875
    tokens = c.box(left, 0.3, 1.3, 0.4, "token ids", "input", part="tokens")
    positions = c.box(right, 0.3, 1.55, 0.4, "positions 0 … T−1", "input", part="positions")
    emb = c.box(left, 1.3, 1.6, 0.55, f"token embedding\n× √{d} = {_root(d)}", "embedding", part="token_embedding")
    pe = c.box(right, 1.3, 1.6, 0.55, "positional encoding\nsin and cos", "embedding", part="positional_encoding")
    total = c.circle(mid, 2.55, "+", part="sum")
    layer = c.box(mid, 3.45, 3.3, 0.5, "the first encoder (or decoder) layer", "layer", part="first_layer")
    c.arrow(tokens.top, emb.bottom, label="(B, T)")
    c.arrow(positions.top, pe.bottom, label="(T,)")
    c.arrow(emb.top, (emb.x, total.y), total.left, label=f"(B, T, {d})", label_side="left", label_segment=0)
    c.arrow(
        pe.top,
        (pe.x, total.y),
        total.right,
        label=f"(T, {d}): the same\nfor every sentence",
        label_side="left",
        label_segment=0,
    )
    c.arrow(total.top, layer.bottom, label=f"(B, T, {d})")
    return c
