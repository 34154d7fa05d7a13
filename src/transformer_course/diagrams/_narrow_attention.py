"""Chapter 5's diagrams laid out for a phone's column (see _render.LAYOUTS): what stood beside the drawing goes
above or under it, and the ids are those of the wide diagrams in attention.py (which checked the arguments: the
wide one is always drawn first)."""

from __future__ import annotations

from . import _args
from ._canvas import HIGHLIGHT, NARROW, Canvas
from ._render import narrow_layout
from ._shapes import plain, text_width
from .attention import SENTENCE, _root

__all__: list[str] = []


@narrow_layout("qkv_projections")
def qkv_projections(tokens=SENTENCE, d_model: int = 512, d_k: int = 64) -> Canvas:
    """As attention.qkv_projections, one block under the other: X on top, then Q, K and V, each a row of its
    projection (left) and its rows (right). One line runs from X down the left edge and into each projection."""
    toks = _args.tokens("tokens", tokens, 6)  # as the wide one reads them: a string is split into words
    n, rh = len(toks), 0.3
    group = max(n * rh + 0.4, 0.75)  # a projection's rows with their title, or its box, whichever is taller
    c = Canvas(NARROW, 0.45 + n * rh + 0.6 + 2 * group + max(n * rh, 0.55) + 0.1)
    top = c.height - 0.45
    x_left, x_w = 1.75, 1.3
    c.text(x_left + x_w / 2, top + 0.2, f"$X$  ({n}, {d_model})", fontsize=10)
    for i, token in enumerate(toks, start=1):
        y = top - (i - 0.5) * rh
        c.box(x_left + x_w / 2, y, x_w, rh, f"$x_{{{i}}}$", "input", part="x_row", index=i, lw=0.8)
        c.text(x_left - 0.08, y, plain(token), ha="right")
    x_bottom, trunk = top - n * rh, 0.15
    for g, name in enumerate("QKV"):
        low = name.lower()
        g_top = x_bottom - 0.6 - g * group  # the top of this group's rows, under their title
        yc = g_top - max(n * rh, 0.55) / 2
        w = c.box(0.85, yc, 1.05, 0.55, f"$W_{name}$\n{d_model} × {d_k}", "attention", part="projection", index=low)
        c.arrow(
            (x_left + x_w / 2, x_bottom),
            (x_left + x_w / 2, x_bottom - 0.2),
            (trunk, x_bottom - 0.2),
            (trunk, yc),
            w.left,
        )
        c.text(2.75, g_top + 0.2, f"${name}$  ({n}, {d_k})", fontsize=10)
        for i in range(1, n + 1):
            label = f"${low}_{{{i}}} = x_{{{i}}} W_{name}$"
            c.box(2.75, g_top - (i - 0.5) * rh, 1.6, rh, label, "state", part=f"{low}_row", index=i, lw=0.8)
        c.arrow(w.right, (1.95, yc))
    return c


@narrow_layout("attention_steps")
def attention_steps(tokens=SENTENCE, query: int = 1, d_k: int = 64) -> Canvas:
    """As attention.attention_steps, the columns across the whole width: each row is numbered in a narrow margin
    and the numbered steps are spelled out under the drawing, where the wide one had them beside it. A scaled score
    too long for its box at 10 pt takes two lines."""
    toks = _args.tokens("tokens", tokens, 7)
    n, i = len(toks), query
    root = _root(d_k)
    pitch = min(0.95, (NARROW - 0.4) / n)
    w = pitch - 0.1
    steps = [
        "1. project every token: $k_j = x_j W_K$, $v_j = x_j W_V$",
        "2. score the query against each key",
        rf"3. scale by √$d_k$ = {root}",
        "4. softmax over the keys: weights summing to 1",
        "5. multiply each value by its weight",
        r"6. sum: $z = \Sigma_j \alpha_j v_j$",
    ]
    key = 0.28 * len(steps) + 0.15  # the numbered steps under the drawing, one line each
    c = Canvas(NARROW, key + 7 * 0.66 + 0.75)
    left = 0.35 + (NARROW - 0.4 - n * pitch) / 2  # the columns centred right of the margin
    xs = [left + pitch / 2 + j * pitch for j in range(n)]
    ys = [c.height - 0.95 - r * 0.66 for r in range(7)]  # tokens, then steps 1 to 6
    c.text(
        c.width / 2,
        c.height - 0.32,
        f"attention for one query:\nthe query $q = x_{{{i}}} W_Q$ of '{plain(toks[i - 1])}'",
        fontsize=10,
    )
    for r in range(1, 7):
        c.text(0.05, ys[r], f"{r}.", ha="left", color="#6a6a6a")
    for r, text in enumerate(steps, start=1):
        c.text(0.05, key - 0.28 * r + 0.05, text, ha="left", part="step", index=r)
    band = c.box((xs[0] + xs[-1]) / 2, ys[4], n * pitch - 0.04, 0.4, r"softmax: $\alpha_j$", "softmax", part="softmax")
    out = c.box(band.x, ys[6], 1.0, 0.42, "$z$", "state", part="output")
    two = text_width(f"s{n} / {root}", 10) > w - 0.12  # the scaled score on two lines
    for j, (x, token) in enumerate(zip(xs, toks), start=1):
        own = j == i
        t = c.box(x, ys[0], w, 0.4, plain(token), "input", part="token", index=j, edge=HIGHLIGHT if own else "#303030")
        kv = c.box(x, ys[1], w, 0.4, f"$k_{{{j}}}, v_{{{j}}}$", "state", part="key", index=j)
        score = c.box(x, ys[2], w, 0.4, rf"$q \cdot k_{{{j}}}$", "attention", part="score", index=j)
        label = f"$s_{{{j}}}$\n$/ {root}$" if two else f"$s_{{{j}}} / {root}$"
        scaled = c.box(x, ys[3], w, 0.5 if two else 0.4, label, "attention", part="scaled", index=j)
        weighted = c.box(x, ys[5], w, 0.4, rf"$\alpha_{{{j}}} v_{{{j}}}$", "state", part="weighted_value", index=j)
        for a, b in ((t, kv), (kv, score), (score, scaled)):
            c.arrow(a.bottom, b.top)
        c.arrow(scaled.bottom, (x, ys[4] + 0.2))
        c.arrow((x, ys[4] - 0.2), weighted.top)
        c.arrow(weighted.bottom, (out.x + (x - out.x) * 0.35, ys[6] + 0.21))
    return c


@narrow_layout("attention_matrix_form")
def attention_matrix_form(T: int = 6, d_model: int = 512, d_k: int = 64, d_v: int = 64) -> Canvas:
    """As attention.attention_matrix_form, the three projections in narrower columns; the output goes under AV
    (at the right), not beside it."""
    t = T
    c = Canvas(NARROW, 6.2)
    c.text(c.width / 2, 5.95, r"Attention$(Q, K, V)$ = softmax($QK^\top$ / √$d_k$) $V$", fontsize=10)
    x = c.box(1.85, 5.3, 1.4, 0.5, f"$X$\n({t}, {d_model})", "input", part="x")
    cols = {"q": 0.6, "k": 1.85, "v": 3.12}
    dims = {"q": d_k, "k": d_k, "v": d_v}
    mats = {}
    for name, cx in cols.items():
        big = name.upper()
        label = f"$W_{big}$\n({d_model}, {dims[name]})"
        w = c.box(cx, 4.35, 1.1, 0.5, label, "attention", part="projection", index=name)
        m = c.box(cx, 3.5, 1.0, 0.5, f"${big}$\n({t}, {dims[name]})", "state", part="matrix", index=name)
        c.arrow(x.bottom if name == "k" else x.at(-0.6 if name == "q" else 0.6, -1), w.top)
        c.arrow(w.bottom, m.top)
        mats[name] = m
    mid = (cols["q"] + cols["k"]) / 2
    scores = c.box(mid, 2.6, 1.1, 0.5, f"$QK^\\top$\n({t}, {t})", "attention", part="scores")
    scale = c.box(mid, 1.85, 1.25, 0.42, f"÷ √{d_k} = {_root(d_k)}", "attention", part="scale")
    soft = c.box(mid, 1.1, 1.4, 0.42, "softmax, each row", "softmax", part="softmax")
    av = c.box(cols["v"], 1.1, 0.95, 0.5, f"$AV$\n({t}, {d_v})", "attention", part="weighted_sum")
    out = c.box(cols["v"], 0.35, 1.1, 0.5, f"output\n({t}, {d_v})", "state", part="output")
    c.arrow(mats["q"].bottom, scores.at(-0.5, 1))
    c.arrow(mats["k"].bottom, scores.at(0.5, 1))
    c.arrow(scores.bottom, scale.top)
    c.arrow(scale.bottom, soft.top)
    c.arrow(soft.right, av.left, label=f"$A$ ({t}, {t})")
    c.arrow(mats["v"].bottom, av.top)
    c.arrow(av.bottom, out.top)
    return c
