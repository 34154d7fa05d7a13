"""Chapter 11's two grids laid out for a phone's column (see _render.LAYOUTS): tiled attention's state and notes go
under its grid instead of beside it, the sliding windows' counts beside the rows' names; titles, notes and keys are
wrapped. The ids are those of the wide diagrams in scale.py (which checked the arguments)."""

from __future__ import annotations

from ..models.sliding_window import reachability, receptive_field
from ..models.tiled_attention import tile_schedule
from ._canvas import INK, NARROW, Canvas
from ._render import narrow_layout
from ._scale_parts import EDGE, MASKED, _s, _tiles, _window_layer
from ._shapes import text_width
from .attention import ALLOWED, HIDDEN

__all__: list[str] = []


@narrow_layout("tiled_attention_tiles")
def tiled_attention_tiles(n: int = 8, block: int = 2, causal: bool = True) -> Canvas:
    """As scale.tiled_attention_tiles: the grid on top (its row labels closer to it), the red tile's state under
    the grid with the two notes under it, the count of tiles on two lines and the key wrapped to the width."""
    b = block
    done = {(i0 // b, j0 // b) for i0, _, j0, _ in tile_schedule(n, n, b, causal)}
    nb = -(-n // b)
    cs, gap = min(0.3, 2.6 / n), min(0.1, 0.45 / nb)
    side = n * cs + (nb - 1) * gap

    def at(k: int) -> float:
        return (k + 0.5) * cs + (k // b) * gap

    here = (nb - 1, 0)
    i0, i1 = here[0] * b, min(n, here[0] * b + b)
    x0 = 0.65
    # Under the grid, bottom up: the key (two rows), the count of tiles, the two notes, the state.
    state_y = 2.75
    top = state_y + 0.55 + side
    c = Canvas(NARROW, top + 1.1)
    mode = "causal" if causal else "no mask"
    c.text(0.1, top + 0.85, f"tiled attention: n = {n}, block = {b}, {mode}", ha="left", fontsize=10, weight="bold")
    c.text(x0 + side / 2, top + 0.5, "key position $j$")
    c.text(0.2, top - side / 2, "query position $i$", rotation=90)
    every = 1 if cs >= 0.2 else 2  # a 16-wide grid: every other number, the rest would touch
    for k in range(n):
        if k % every == 0:
            c.text(x0 + at(k), top + 0.17, str(k))
            c.text(x0 - 0.08, top - at(k), str(k), ha="right")
    _tiles(c, n, b, x0, top, at, cs, gap, done, here, causal)
    queries = f"queries {i0}–{i1 - 1}" if i1 - i0 > 1 else f"query {i0}"
    label = f"{queries}: running\nmax $m$, sum $l$, output acc"
    state = c.box(1.95, state_y, 2.4, 0.5, label, "state", part="state")
    red = x0 + (at(0) + at(min(n, b) - 1)) / 2  # under the red tile: the first key block
    c.arrow((red, top - side - 0.06), (red, state.top[1]))
    memory = f"only the red tile's scores exist now:\n{b}×{b} = {_s(b * b, 'number')}, not {n}×{n} = {n * n}"
    c.text(0.1, state_y - 0.58, memory, ha="left")
    c.text(
        0.1, state_y - 1.08, "every tile of a query block\nupdates that block's m, l, acc", ha="left", style="italic"
    )
    computed, tiles = len(done), nb * nb
    why = ":\ntheir keys all come after their queries" if causal else ""
    c.text(0.1, 1.0, f"{computed} of {tiles} tiles computed, {tiles - computed} skipped{why}", ha="left")
    entries = (
        ("attention", "tile computed", "-"),
        ("layer", "tile skipped", "--"),
        (ALLOWED, "score", "-"),
        (MASKED, "computed, masked", "-"),
        (HIDDEN, "never computed", "-"),
    )
    x, y = 0.2, 0.55
    for k, (fill, meaning, line) in enumerate(entries):
        if x + text_width(meaning, 10) + 0.15 > NARROW:
            x, y = 0.2, y - 0.3
        c.box(x, y, 0.16, 0.16, kind=fill, lw=0.5 if k > 1 else 1.0, edge=EDGE if k else INK, linestyle=line)
        c.text(x + 0.13, y, meaning, ha="left")
        x += text_width(meaning, 10) + 0.45
    return c


@narrow_layout("sliding_window_reach")
def sliding_window_reach(t: int = 12, window: int = 3, layers: int = 3) -> Canvas:
    """As scale.sliding_window_reach, the grid across the column: each row's count of positions goes under its
    name, on the left, rather than after the row; with 16 positions every other one is numbered."""
    w, n_layers = window, layers
    x0 = 1.0
    cs, row = min(0.34, (NARROW - x0 - 0.05) / t), min(0.75, 3.6 / n_layers)
    y0 = 1.45 + cs / 2  # the input row's middle: the two notes under it
    reached = [reachability(t, w, n_layers - l)[t - 1].tolist() for l in range(n_layers + 1)]
    c = Canvas(NARROW, y0 + n_layers * row + cs / 2 + 0.75)
    c.text(
        0.1,
        c.height - 0.3,
        f"sliding window of {w}, {_s(n_layers, 'layer')}: the positions\nthat reach position {t - 1} at the top",
        ha="left",
        fontsize=10,
        weight="bold",
    )
    for l in range(n_layers + 1):
        y = y0 + l * row
        name = "input" if l == 0 else f"layer {l}"
        c.text(x0 - 0.1, y, f"{name}\n{_s(int(sum(reached[l])), 'position')}", ha="right")
        _window_layer(c, x0, y, cs, row, w, l, reached[l])
    every = 1 if cs >= 0.2 else 2
    for j in range(0, t, every):
        c.text(x0 + (j + 0.5) * cs, y0 - cs / 2 - 0.13, str(j))
    field, full = int(sum(reached[0])), receptive_field(w, n_layers)
    short = "" if field == full else f",\ncut to {field} here: the sequence is shorter"
    reads = f"itself and the {w - 1} before it" if w > 1 else "only itself"
    c.text(0.1, y0 - cs / 2 - 0.3, f"a window of {w}: each position reads\n{reads}", ha="left", va="top")
    c.text(
        0.1,
        y0 - cs / 2 - 0.75,
        f"{_s(n_layers, 'layer')}: a receptive field of\n{n_layers} × ({w} − 1) + 1 = {full} positions{short}",
        ha="left",
        va="top",
    )
    return c
