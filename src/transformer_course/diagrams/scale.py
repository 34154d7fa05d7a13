"""Chapter 11: attention at scale. Tiled attention's tiles (computed, or skipped under a causal mask), query heads
sharing key/value heads (multi-head, grouped-query, multi-query), RoPE turning each pair of coordinates by its
position's angle, and how far back a stack of sliding windows reaches. Each is drawn from the chapter's own
functions (tile_schedule, rotary_angles, reachability), so the picture is what the code computes."""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..models.rotary import rotary_angles
from ..models.sliding_window import reachability, receptive_field
from ..models.tiled_attention import tile_schedule
from . import _args
from ._canvas import INK, Canvas
from ._render import Diagram, drawing, render
from ._scale_parts import EDGE, MASKED, POSITIONS, _dial, _s, _tiles, _window_layer
from ._shapes import text_width
from .attention import ALLOWED, HIDDEN

__all__ = ["query_key_value_heads", "rotary_pairs", "sliding_window_reach", "tiled_attention_tiles"]


@drawing
def tiled_attention_tiles(n: int = 8, block: int = 2, causal: bool = True) -> Diagram:
    """The n x n scores (query i as rows, key j as columns) cut into block x block tiles: a tile that
    ``tile_schedule`` visits ("tile-computed-a-b", a and b the query and key block from 0) holds its cells ("score-
    i-j", or "masked-i-j" for a causal tile's future keys); one it skips ("tile-skipped-a-b", dashed, faded) holds
    cells never computed ("unvisited-i-j"). The last query block's first tile is outlined in red: its scores are
    the only ones that exist now, and they update that block's running max m, sum l and output acc ("state")."""
    n = _args.count("n", n, 2, 16)
    b = _args.count("block", block, 1, n)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    done = {(i0 // b, j0 // b) for i0, _, j0, _ in tile_schedule(n, n, b, causal)}
    nb = -(-n // b)
    cs, gap = min(0.3, 2.6 / n), min(0.1, 0.45 / nb)
    side = n * cs + (nb - 1) * gap

    def at(k: int) -> float:  # the centre of row (or column) k, from the grid's top (or left) edge
        return (k + 0.5) * cs + (k // b) * gap

    here = (nb - 1, 0)  # the tile drawn as the one being computed: the last query block's first
    i0, i1 = here[0] * b, min(n, here[0] * b + b)
    mid = (at(i0) + at(i1 - 1)) / 2  # its middle, below the grid's top edge
    x0, top = 0.95, side + 1.1
    c = Canvas(7.0, top + max(0.95, 1.45 - mid))  # room above its state for the two notes
    mode = "causal" if causal else "no mask"
    c.text(0.1, top + 0.75, f"tiled attention: n = {n}, block = {b}, {mode}", ha="left", fontsize=10, weight="bold")
    c.text(x0 + side / 2, top + 0.45, "key position $j$")
    c.text(0.35, top - side / 2, "query position $i$", rotation=90)
    for k in range(n):
        c.text(x0 + at(k), top + 0.15, str(k))
        c.text(x0 - 0.1, top - at(k), str(k), ha="right")
    _tiles(c, n, b, x0, top, at, cs, gap, done, here, causal)
    y = top - mid
    queries = f"queries {i0}–{i1 - 1}" if i1 - i0 > 1 else f"query {i0}"
    sx, label = max(x0 + side + 1.5, (x0 + side + c.width) / 2), f"{queries}: running\nmax $m$, sum $l$, output acc"
    state = c.box(sx, y, 2.3, 0.5, label, "state", part="state", fontsize=9)
    c.arrow((x0 + side + 0.06, y), state.left)
    memory = f"only the red tile's scores exist now:\n{b}×{b} = {_s(b * b, 'number')}, not {n}×{n} = {n * n}"
    c.text(state.x, y + 0.62, memory)
    computed, tiles = len(done), nb * nb
    c.text(state.x, y + 1.2, "every tile of a query block\nupdates that block's m, l, acc", style="italic")
    why = " (their keys all come after their queries)" if causal else ""
    c.text(0.1, 0.7, f"{computed} of {tiles} tiles computed, {tiles - computed} skipped{why}", ha="left")
    entries = (
        ("attention", "tile computed", "-"),
        ("layer", "tile skipped", "--"),
        (ALLOWED, "score", "-"),
        (MASKED, "computed, masked", "-"),
        (HIDDEN, "never computed", "-"),
    )
    x = 0.2
    for k, (fill, meaning, line) in enumerate(entries):
        c.box(x, 0.3, 0.16, 0.16, kind=fill, lw=0.5 if k > 1 else 1.0, edge=EDGE if k else INK, linestyle=line)
        c.text(x + 0.13, 0.3, meaning, ha="left")
        x += text_width(meaning) + 0.45
    alt = (
        f"Tiled attention over n = {n} positions in tiles of {b} by {b} scores, {mode}: {computed} of the {tiles} "
        f"tiles are computed and {tiles - computed} skipped{why}. Each computed tile updates its query block's "
        f"running maximum m, sum l and output accumulator; only one tile's scores exist at a time, memory "
        f"O(block²) = {_s(b * b, 'number')} instead of O(n²) = {n * n}."
    )
    return render(c, alt)


@drawing
def query_key_value_heads(n_heads: int = 8, n_kv_heads: int = 2) -> Diagram:
    """The query heads in a row ("query-head-i", i from 0) above the key/value heads ("kv-head-g"), a line from
    the kv head g that query head i reads, i // (n_heads / n_kv_heads), up to it ("reads-i-g"). n_kv_heads =
    n_heads is multi-head attention, 1 multi-query; the title gives the cache's size relative to multi-head's."""
    h = _args.count("n_heads", n_heads, 1, 16)
    g = _args.count("n_kv_heads", n_kv_heads, 1, h)
    if h % g:
        raise ValueError(
            f"n_heads={h} is not divisible by n_kv_heads={g}: every key/value head serves the same number of "
            "query heads"
        )
    r = h // g
    name = "multi-head" if g == h else "multi-query" if g == 1 else "grouped-query"
    c = Canvas(7.0, 2.7)
    x0, pitch = 1.5, min(0.7, 5.4 / h)
    xs = [x0 + (i + 0.5) * pitch for i in range(h)]
    fraction = "" if Fraction(g, h).denominator == h else f" = {Fraction(g, h)}"
    if g == h:
        title, cache = f"each of the {_s(h, 'query head')} has its own key/value head", "the same as"
        reads = "key/value cache: one key/value head per query head; query head $i$ reads kv head $i$"
    else:
        title = f"{_s(h, 'query head')} share {_s(g, 'key/value head')}"
        cache = f"{g}/{h}{fraction} the size of"
        reads = f"key/value cache: {g}/{h}{fraction} of multi-head attention's; query head $i$ reads kv head $i$ // {r}"
    c.text(c.width / 2, c.height - 0.2, f"{name} attention: {title}", fontsize=10, weight="bold")
    c.text(c.width / 2, c.height - 0.48, reads)
    c.text(0.1, 1.8, "query heads", ha="left")
    c.text(0.1, 0.4, "key/value heads\n(cached)", ha="left")
    for i, x in enumerate(xs):
        c.box(x, 1.8, pitch - 0.08, 0.36, str(i), "attention", part="query_head", index=i, fontsize=9)
    for k in range(g):
        mid = (xs[k * r] + xs[k * r + r - 1]) / 2
        label = f"$K_{{{k}}}$, $V_{{{k}}}$" if r * pitch >= 0.8 else str(k)
        kv = c.box(mid, 0.4, r * pitch - 0.08, 0.36, label, "state", part="kv_head", index=k, fontsize=9)
        for i in range(k * r, k * r + r):
            c.arrow(
                (kv.x + (i - k * r - (r - 1) / 2) * min(0.1, kv.w / r), kv.top[1]),
                (xs[i], 1.62),
                part="reads",
                index=(i, k),
                lw=1.0,
            )
    alt = (
        f"{name.capitalize()} attention with {_s(h, 'query head')} and {_s(g, 'key/value head')}: query head i "
        f"reads key/value head i // {r}, so each key/value head serves {_s(r, 'query head')} and the key/value "
        f"cache is {cache} multi-head attention's."
    )
    return render(c, alt)


@drawing
def rotary_pairs(d_head: int = 8, positions=(0, 1, 2)) -> Diagram:
    """RoPE's rotations: one circle per pair of coordinates (2i, 2i + 1) of a d_head-wide query or key, with the
    vector at each of ``positions`` turned by the angle p θ_i of ``models.rotary.rotary_angles`` ("vector-i-p":
    pair i, position p; position 0 points right, angles counterclockwise). The first pair turns fastest."""
    d = _args.count("d_head", d_head, 4, 12)
    if d % 2:
        raise ValueError(f"d_head = {d} must be even: RoPE rotates pairs of coordinates")
    try:
        ps = [_args.count("each position", p, 0, 4096) for p in positions]
    except TypeError:  # not iterable
        raise ValueError(f"positions must be a list of 1 to 4 positions, got {positions!r}") from None
    if not 1 <= len(ps) <= 4 or len(set(ps)) < len(ps):
        raise ValueError(f"positions must be 1 to 4 different positions, got {ps}")
    pairs = d // 2
    angles = rotary_angles(torch.tensor(ps), d).tolist()  # [position][pair], radians
    thetas = rotary_angles(torch.tensor([1]), d)[0].tolist()  # position 1's angles: the frequencies θ_i
    pitch = 6.8 / pairs
    radius = min(0.55, pitch / 2 - 0.15)
    c = Canvas(7.0, 2 * radius + 1.95)
    cy = c.height - 0.7 - radius
    c.text(
        c.width / 2,
        c.height - 0.18,
        f"RoPE, d_head = {d}: pair $i$ turned by $p\\,\\theta_i$ at position $p$",
        fontsize=10,
        weight="bold",
    )
    last = ps.index(max(ps))
    for i in range(pairs):
        cx = 0.1 + (i + 0.5) * pitch
        _dial(c, cx, cy, radius, i, (ps, angles, thetas, last), (0.18, 0.42, 0.66))
    for k, p in enumerate(ps):
        x = 0.3 + 1.3 * k
        c.arrow((x, 0.25), (x + 0.35, 0.25), color=POSITIONS[k], lw=1.6)
        c.text(x + 0.45, 0.25, f"position {p}", ha="left")
    c.text(
        c.width / 2,
        c.height - 0.45,
        "$\\theta_i = 10000^{-2i/d}$: the first pairs turn fast, the last barely",
        style="italic",
    )
    turned = ", ".join(f"{math.degrees(angles[last][i]):.1f}°" for i in range(pairs))
    alt = (
        f"RoPE on a head of d_head = {d}: each of the {pairs} pairs of coordinates is a vector in its own plane, "
        f"turned by position times θ_i at position{'s' * (len(ps) > 1)} {', '.join(map(str, ps))}; at position {ps[last]} pair 0 to "
        f"pair {pairs - 1} are turned by {turned}: the first pair turns far, the last barely."
    )
    return render(c, alt)


@drawing
def sliding_window_reach(t: int = 12, window: int = 3, layers: int = 3) -> Diagram:
    """The positions whose input reaches the last position through ``layers`` layers of a causal sliding window
    of ``window``: one row per layer (the input at the bottom, "reached-l-j" / "unreached-l-j", l the layer from 0),
    row l shading what reaches the top's last position from there (``models.sliding_window.reachability``), with
    an arrow from every key a reached position attends to ("attends-l-i-j": layer l's position i reads j)."""
    t = _args.count("t", t, 2, 16)
    w = _args.count("window", window, 1, t)
    n_layers = _args.count("layers", layers, 1, 6)
    cs, row = min(0.34, 4.9 / t), min(0.75, 3.6 / n_layers)
    x0, y0 = 0.95, 1.05  # the grid's left edge, the input row's middle
    c = Canvas(7.0, y0 + n_layers * row + cs / 2 + 0.5)
    reached = [reachability(t, w, n_layers - l)[t - 1].tolist() for l in range(n_layers + 1)]
    c.text(
        0.1,
        c.height - 0.2,
        f"sliding window of {w}, {_s(n_layers, 'layer')}: the positions that reach position {t - 1} at the top",
        ha="left",
        fontsize=10,
        weight="bold",
    )
    for l in range(n_layers + 1):
        y = y0 + l * row
        c.text(x0 - 0.12, y, "input" if l == 0 else f"layer {l}", ha="right")
        c.text(x0 + t * cs + 0.1, y, _s(int(sum(reached[l])), "position"), ha="left")
        _window_layer(c, x0, y, cs, row, w, l, reached[l])
    for j in range(t):
        c.text(x0 + (j + 0.5) * cs, y0 - cs / 2 - 0.12, str(j))
    field, full = int(sum(reached[0])), receptive_field(w, n_layers)
    short = "" if field == full else f", cut to {field} here: the sequence is shorter"
    c.text(
        0.1,
        0.45,
        f"a window of {w}: each position reads " + (f"itself and the {w - 1} before it" if w > 1 else "only itself"),
        ha="left",
    )
    c.text(
        0.1,
        0.2,
        f"{_s(n_layers, 'layer')}: a receptive field of {n_layers} × ({w} − 1) + 1 = {full} positions{short}",
        ha="left",
    )
    alt = (
        f"A causal sliding window of {w} over {t} positions, stacked {_s(n_layers, 'layer')}: position {t - 1} at "
        f"the top sees {_s(min(w, t), 'position')} in the layer below, and its receptive field in the input is "
        f"{n_layers} × ({w} − 1) + 1 = {_s(full, 'position')}{short}; the input row has {_s(field, 'shaded cell')}."
    )
    return render(c, alt)
