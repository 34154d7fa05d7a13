"""Chapter 11's diagrams laid out for a phone's column (see _render.LAYOUTS): what stood side by side is stacked,
long lines are wrapped, and the ids are those of the wide diagrams in scale.py (which checked the arguments)."""

from __future__ import annotations

from fractions import Fraction

from ._canvas import NARROW, Canvas
from ._render import narrow_layout
from .scale import _s

__all__: list[str] = []


@narrow_layout("query_key_value_heads")
def query_key_value_heads(n_heads: int = 8, n_kv_heads: int = 2) -> Canvas:
    """The query heads above the key/value heads, as scale.query_key_value_heads, the row names above and below
    the rows rather than beside them, and the title and the cache's size on two lines each."""
    h, g = int(n_heads), int(n_kv_heads)
    r = h // g
    name = "multi-head" if g == h else "multi-query" if g == 1 else "grouped-query"
    c = Canvas(NARROW, 3.55)
    pitch = min(0.7, (NARROW - 0.3) / h)
    xs = [c.width / 2 + (i - (h - 1) / 2) * pitch for i in range(h)]
    fraction = "" if Fraction(g, h).denominator == h else f" = {Fraction(g, h)}"
    if g == h:
        title = f"each of the {_s(h, 'query head')}\nhas its own key/value head"
        reads = "key/value cache: one head per query head;\nquery head $i$ reads kv head $i$"
    else:
        title = f"{_s(h, 'query head')} share {_s(g, 'key/value head')}"
        reads = f"key/value cache: {g}/{h}{fraction} of multi-head's;\nquery head $i$ reads kv head $i$ // {r}"
    c.text(c.width / 2, c.height - 0.3, f"{name} attention:\n{title}", fontsize=10, weight="bold")
    c.text(c.width / 2, c.height - 0.9, reads)
    c.text(0.1, 2.15, "query heads", ha="left")
    c.text(0.1, 0.15, "key/value heads (cached)", ha="left")
    for i, x in enumerate(xs):
        label = str(i) if pitch >= 0.3 else ""  # 16 heads: numbers do not fit; the alt text says it
        c.box(x, 1.8, pitch - 0.08, 0.36, label, "attention", part="query_head", index=i, fontsize=9)
    for k in range(g):
        mid = (xs[k * r] + xs[k * r + r - 1]) / 2
        label = f"$K_{{{k}}}$, $V_{{{k}}}$" if r * pitch >= 0.8 else str(k) if r * pitch >= 0.3 else ""
        kv = c.box(mid, 0.55, r * pitch - 0.08, 0.36, label, "state", part="kv_head", index=k, fontsize=9)
        for i in range(k * r, k * r + r):
            c.arrow(
                (kv.x + (i - k * r - (r - 1) / 2) * min(0.1, kv.w / r), kv.top[1]),
                (xs[i], 1.62),
                part="reads",
                index=(i, k),
                lw=1.0,
            )
    return c
