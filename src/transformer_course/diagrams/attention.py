"""Chapter 5: queries, keys and values as projections, the steps of attention for one query, attention in matrix
form with its shapes, and the padding and causal masks."""

from __future__ import annotations

import math

from . import _args
from ._canvas import HIGHLIGHT, NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render
from ._shapes import plain

__all__ = ["attention_matrix_form", "attention_steps", "mask_diagram", "qkv_projections"]

SENTENCE = ("the", "cat", "sleeps")
ALLOWED, HIDDEN = "#5b8cc0", "#f1f1f1"  # a mask's cells: may attend, hidden (set to -inf before the softmax)


def _root(d: int) -> str:
    """sqrt(d) as the text shows it: 8 for 64, 11.31 for 128."""
    r = math.isqrt(d)
    return str(r) if r * r == d else f"{math.sqrt(d):.2f}"


@drawing
def qkv_projections(tokens=SENTENCE, d_model: int = 512, d_k: int = 64) -> Diagram:
    """Q, K and V as three projections of the same input: every row x_i of X ("x-row-i", i from 1) is multiplied
    by W_Q, W_K and W_V ("projection-q", "-k", "-v") into its own query, key and value rows ("q-row-i", ...)."""
    toks = _args.tokens("tokens", tokens, 6)
    d_model = _args.count("d_model", d_model, 1, 1 << 20)
    d_k = _args.count("d_k", d_k, 1, 1 << 20)
    n, rh, gap = len(toks), 0.26, 0.55
    group = n * rh + gap  # one output matrix with its title
    c = Canvas(6.6, 3 * group + 0.2)
    mid = c.height / 2
    x_left, x_w = 1.1, 1.3
    c.text(x_left + x_w / 2, mid + n * rh / 2 + 0.2, f"$X$  ({n}, {d_model})", fontsize=10)
    for i, token in enumerate(toks, start=1):
        y = mid + n * rh / 2 - (i - 0.5) * rh
        c.box(x_left + x_w / 2, y, x_w, rh, f"$x_{{{i}}}$", "input", part="x_row", index=i, fontsize=9, lw=0.8)
        c.text(x_left - 0.08, y, plain(token), ha="right")
    for g, name in enumerate("QKV"):
        low = name.lower()
        top = c.height - 0.1 - g * group - gap + 0.1
        yc = top - n * rh / 2
        w = c.box(3.3, yc, 1.05, 0.55, f"$W_{name}$\n{d_model} × {d_k}", "attention", part="projection", index=low)
        c.arrow((x_left + x_w, mid), w.left)
        c.text(5.05, top + 0.2, f"${name}$  ({n}, {d_k})", fontsize=10)
        for i in range(1, n + 1):
            label = f"${low}_{{{i}}} = x_{{{i}}} W_{name}$"
            c.box(5.05, top - (i - 0.5) * rh, 1.3, rh, label, "state", part=f"{low}_row", index=i, fontsize=9, lw=0.8)
        c.arrow(w.right, (4.4, yc))
    alt = (
        f"Queries, keys and values as three projections of the same input: each of the {n} rows of X "
        f"({' '.join(toks)}), of width d_model = {d_model}, is multiplied by W_Q, W_K and W_V ({d_model} x {d_k} "
        f"each) into its own query, key and value rows of width d_k = {d_k}."
    )
    return render(c, alt)


@drawing
def attention_steps(tokens=SENTENCE, query: int = 1, d_k: int = 64) -> Diagram:
    """The steps of attention for the query of token ``query`` (from 1), one column per key ("token-j"): project
    ("key-j"), score against each key ("score-j"), scale by sqrt(d_k) ("scaled-j"), softmax over the keys
    ("softmax"), multiply the values by the weights ("weighted-value-j"), sum ("output"); "step-1" to "step-6"."""
    toks = _args.tokens("tokens", tokens, 7)
    n = len(toks)
    i = _args.count("query", query, 1, n)
    d_k = _args.count("d_k", d_k, 1, 1 << 20)
    root = _root(d_k)
    pitch = min(0.95, 4.6 / n)
    w = pitch - 0.12
    c = Canvas(6.8, 5.2)
    xs = [2.15 + pitch / 2 + j * pitch for j in range(n)]
    ys = [4.35 - r * 0.64 for r in range(7)]  # tokens, then steps 1 to 6
    c.text(3.4, 4.95, f"attention for one query: the query $q = x_{{{i}}} W_Q$ of '{plain(toks[i - 1])}'", fontsize=10)
    steps = [
        "1. project every token:\n$k_j = x_j W_K$, $v_j = x_j W_V$",
        "2. score the query\nagainst each key",
        rf"3. scale by √$d_k$ = {root}",
        "4. softmax over the keys:\nweights summing to 1",
        "5. multiply each value\nby its weight",
        r"6. sum: $z = \Sigma_j \alpha_j v_j$",
    ]
    for r, text in enumerate(steps, start=1):
        c.text(0.1, ys[r], text, ha="left", part="step", index=r)
    band = c.box((xs[0] + xs[-1]) / 2, ys[4], n * pitch - 0.04, 0.4, r"softmax: $\alpha_j$", "softmax", part="softmax")
    out = c.box(band.x, ys[6], 1.2, 0.42, "$z$", "state", part="output")
    for j, (x, token) in enumerate(zip(xs, toks), start=1):
        own = j == i
        t = c.box(x, ys[0], w, 0.4, plain(token), "input", part="token", index=j, edge=HIGHLIGHT if own else "#303030")
        kv = c.box(x, ys[1], w, 0.4, f"$k_{{{j}}}, v_{{{j}}}$", "state", part="key", index=j)
        score = c.box(x, ys[2], w, 0.4, rf"$q \cdot k_{{{j}}}$", "attention", part="score", index=j)
        scaled = c.box(x, ys[3], w, 0.4, f"$s_{{{j}}} / {root}$", "attention", part="scaled", index=j)
        weighted = c.box(x, ys[5], w, 0.4, rf"$\alpha_{{{j}}} v_{{{j}}}$", "state", part="weighted_value", index=j)
        for a, b in ((t, kv), (kv, score), (score, scaled)):
            c.arrow(a.bottom, b.top)
        c.arrow(scaled.bottom, (x, ys[4] + 0.2))
        c.arrow((x, ys[4] - 0.2), weighted.top)
        c.arrow(weighted.bottom, (out.x + (x - out.x) * 0.35, ys[6] + 0.21))  # fan in: they never cross
    alt = (
        f"The six steps of attention for the query of '{toks[i - 1]}' over the {n} tokens {' '.join(toks)}: project "
        f"every token to a key and a value, score the query against each of the {n} keys, scale the scores by "
        f"the square root of d_k = {d_k} ({root}), turn them into weights with a softmax, multiply each value by "
        f"its weight, and sum into the output z."
    )
    return render(c, alt)


@drawing
def attention_matrix_form(T: int = 6, d_model: int = 512, d_k: int = 64, d_v: int = 64) -> Diagram:
    """softmax(Q K^T / sqrt(d_k)) V for all T queries at once, every matrix with its shape: X ("x"), the three
    projections ("projection-q", "-k", "-v"), Q, K, V ("matrix-q", ...), "scores", "scale", "softmax",
    "weighted-sum" and "output"."""
    t = _args.count("T", T, 1, 1 << 20)
    d_model = _args.count("d_model", d_model, 1, 1 << 20)
    d_k = _args.count("d_k", d_k, 1, 1 << 20)
    d_v = _args.count("d_v", d_v, 1, 1 << 20)
    c = Canvas(6.8, 5.3)
    c.text(3.4, 5.1, r"Attention$(Q, K, V)$ = softmax($QK^\top$ / √$d_k$) $V$", fontsize=10)
    x = c.box(2.9, 4.45, 1.5, 0.5, f"$X$\n({t}, {d_model})", "input", part="x")
    cols = {"q": 1.1, "k": 2.9, "v": 4.9}
    dims = {"q": d_k, "k": d_k, "v": d_v}
    mats = {}
    for name, cx in cols.items():
        big = name.upper()
        w = c.box(
            cx, 3.6, 1.35, 0.5, f"$W_{big}$\n({d_model}, {dims[name]})", "attention", part="projection", index=name
        )
        m = c.box(cx, 2.75, 1.1, 0.5, f"${big}$\n({t}, {dims[name]})", "state", part="matrix", index=name)
        c.arrow(x.bottom if name == "k" else x.at(-0.6 if name == "q" else 0.6, -1), w.top)
        c.arrow(w.bottom, m.top)
        mats[name] = m
    scores = c.box(2.0, 1.9, 1.2, 0.5, f"$QK^\\top$\n({t}, {t})", "attention", part="scores")
    scale = c.box(2.0, 1.15, 1.2, 0.42, f"÷ √{d_k} = {_root(d_k)}", "attention", part="scale")
    soft = c.box(2.0, 0.4, 1.5, 0.42, "softmax, each row", "softmax", part="softmax")
    av = c.box(4.9, 0.4, 1.1, 0.5, f"$AV$\n({t}, {d_v})", "attention", part="weighted_sum")
    out = c.box(6.3, 0.4, 0.85, 0.5, f"output\n({t}, {d_v})", "state", part="output")
    c.arrow(mats["q"].bottom, scores.at(-0.5, 1))
    c.arrow(mats["k"].bottom, scores.at(0.5, 1))
    c.arrow(scores.bottom, scale.top)
    c.arrow(scale.bottom, soft.top)
    c.arrow(soft.right, av.left, label=f"$A$ ({t}, {t})")
    c.arrow(mats["v"].bottom, av.top)
    c.arrow(av.right, out.left)
    alt = (
        f"Attention in matrix form for T = {t} positions: X ({t} x {d_model}) is projected into Q and K ({t} x {d_k}) "
        f"and V ({t} x {d_v}); Q times K transposed gives a {t} x {t} matrix of scores, divided by the square root "
        f"of {d_k}, a softmax over each row gives the weights A, and A times V is the output ({t} x {d_v})."
    )
    return render(c, alt)


@drawing
@narrow_layout("mask_diagram")
def mask_diagram(kind: str = "padding", T: int = 6, length: int = 4) -> Diagram:
    """A mask as a grid, query positions i as rows and key positions j as columns (from 0, as in the code): a
    cell "allowed-i-j" where query i may attend to key j, "hidden-i-j" where it may not. ``kind="padding"``
    hides the keys from ``length`` on (the padding of a sentence of ``length`` tokens in a batch padded to T);
    ``kind="causal"`` hides every key after the query (j > i)."""
    kind = _args.choice("kind", kind, ("padding", "causal"))
    t = _args.count("T", T, 1, 16)
    n = _args.count("length", length, 1, t) if kind == "padding" else t
    phone = narrow()  # a phone: the legend under the grid
    cs = min(0.42, (2.6 if phone else 2.9) / t)
    x0, top = 0.95, 0.2 + t * cs + (1.05 if phone else 0)
    c = Canvas(NARROW if phone else x0 + t * cs + 2.3, top + 0.95)
    title = f"padding mask: {n} real tokens of {t}" if kind == "padding" else "causal mask: query i sees keys j ≤ i"
    c.text(x0 + t * cs / 2, top + 0.75, title, fontsize=10, weight="bold")
    c.text(x0 + t * cs / 2, top + 0.45, "key position $j$")
    c.text(0.35, top - t * cs / 2, "query position $i$", rotation=90)
    allowed = 0
    for i in range(t):
        y = top - (i + 0.5) * cs
        c.text(x0 - 0.12, y, str(i), ha="right")
        for j in range(t):
            x = x0 + (j + 0.5) * cs
            if i == 0:
                pad = kind == "padding" and j >= n and cs >= 0.3
                c.text(x, top + 0.15, "pad" if pad else str(j), color="#7a7a7a" if pad else "#303030")
            ok = j < n if kind == "padding" else j <= i
            allowed += ok
            c.box(
                x,
                y,
                cs - 0.04,
                cs - 0.04,
                "",
                ALLOWED if ok else HIDDEN,
                part="allowed" if ok else "hidden",
                index=(i, j),
                lw=0.6,
                edge="#9a9a9a",
            )
    legend_x, legend_y = (0.95, 0.8) if phone else (x0 + t * cs + 0.3, top - 0.3)
    c.legend(legend_x, legend_y, [(ALLOWED, "may attend"), (HIDDEN, "hidden: set to −∞\nbefore the softmax")], dy=0.45)
    why = (
        (f"keys {n} to {t - 1} are padding and hidden from every query" if n < t else "no key is padding")
        if kind == "padding"
        else "each query i sees keys 0 to i only, never a later one"
    )
    alt = (
        f"A {kind} mask over {t} positions drawn as a {t} by {t} grid, query positions as rows and key positions as "
        f"columns: {why}; {allowed} of the {t * t} cells may attend."
    )
    return render(c, alt)
