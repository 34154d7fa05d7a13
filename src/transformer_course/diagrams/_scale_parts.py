"""The pieces chapter 11's diagrams share between their wide layouts (scale.py) and their phone layouts
(_narrow_grids.py, _narrow_scale.py): the grids' colours, a grid cell, tiled attention's tiles, a layer of the
sliding-window grid, a rotary dial. Each draws on a Canvas at the place it is given; the layouts differ only in
where they put them."""

from __future__ import annotations

import math

from ._canvas import FADED, HIGHLIGHT, INK, Canvas
from .attention import ALLOWED, HIDDEN

MASKED = "#cfcfcf"  # a score computed, then set to -inf (inside a tile on the diagonal)
EDGE = "#9a9a9a"  # the outline of a grid's cells
POSITIONS = ("#9a9a9a", "#5b8cc0", HIGHLIGHT, "#7d5ba6")  # the vectors of rotary_pairs, one colour per position


def _s(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _cell(c: Canvas, x: float, y: float, size: float, fill: str, part: str, index: object, **kw) -> None:
    c.box(x, y, size - 0.04, size - 0.04, "", fill, part=part, index=index, lw=0.5, edge=EDGE, **kw)


def _tiles(
    c: Canvas, n: int, b: int, x0: float, top: float, at, cs: float, gap: float, done, here, causal: bool
) -> None:
    """Each block-by-block tile of the score grid, framed (bold where the step is), its cells filled: the wide
    and the narrow tiled-attention diagrams draw the same grid, only placed differently."""
    nb = -(-n // b)
    for qb in range(nb):
        for kb in range(nb):
            rows, cols = range(qb * b, min(n, qb * b + b)), range(kb * b, min(n, kb * b + b))
            x, y = x0 + (at(cols[0]) + at(cols[-1])) / 2, top - (at(rows[0]) + at(rows[-1])) / 2
            w, h = len(cols) * cs + gap / 2, len(rows) * cs + gap / 2
            on = (qb, kb) in done
            lw, edge = (2.0, HIGHLIGHT) if (qb, kb) == here else (1.0, INK if on else EDGE)
            kind, part = ("attention", "tile_computed") if on else ("layer", "tile_skipped")
            dash = "-" if on else "--"
            c.box(x, y, w, h, "", kind, part=part, index=(qb, kb), frame=True, lw=lw, edge=edge, linestyle=dash)
            for i in rows:
                for j in cols:
                    kind = ("masked" if causal and j > i else "score") if on else "unvisited"
                    fill = {"score": ALLOWED, "masked": MASKED, "unvisited": HIDDEN}[kind]
                    _cell(c, x0 + at(j), top - at(i), cs, fill, kind, (i, j), alpha=1.0 if on else FADED)


def _window_layer(c: Canvas, x0: float, y: float, cs: float, row: float, w: int, l: int, reached: list) -> None:
    """One layer's row of the sliding-window grid: a cell per position, reached or not, and for a reached position
    above the input an arrow from each of the w positions below it that it attends to."""
    for j, on in enumerate(reached):
        x = x0 + (j + 0.5) * cs
        _cell(c, x, y, cs, ALLOWED if on else HIDDEN, "reached" if on else "unreached", (l, j))
        if l and on:
            for k in range(max(0, j - w + 1), j + 1):
                c.arrow(
                    (x0 + (k + 0.5) * cs, y - row + cs / 2 - 0.02),
                    (x, y - cs / 2 + 0.02),
                    part="attends",
                    index=(l, j, k),
                    color=EDGE,
                    lw=0.8,
                )


def _dial(c: Canvas, cx: float, cy: float, radius: float, i: int, rotation: tuple, gaps: tuple) -> None:
    """Pair i of rotary dimensions as a dial centred at (cx, cy): a ring, one vector per position (its angle),
    and three lines of text under it at the given gaps below the ring. rotation: (positions, their angles per pair,
    the pairs' frequencies, the index of the last position)."""
    ps, angles, thetas, last = rotation
    ring = [(cx + radius * math.cos(a), cy + radius * math.sin(a)) for a in (k * math.pi / 24 for k in range(49))]
    c.arrow(*ring, head=False, color=EDGE, lw=0.8)
    for k, p in enumerate(ps):
        a = angles[k][i]
        tip = (cx + 0.92 * radius * math.cos(a), cy + 0.92 * radius * math.sin(a))
        c.arrow((cx, cy), tip, part="vector", index=(i, p), color=POSITIONS[k], lw=1.6)
    c.text(cx, cy - radius - gaps[0], f"dims {2 * i}, {2 * i + 1}")
    c.text(cx, cy - radius - gaps[1], f"$\\theta_{{{i}}}$ = {thetas[i]:.3g}")
    c.text(cx, cy - radius - gaps[2], f"$p$ = {ps[last]}: {math.degrees(angles[last][i]):.1f}°")
