"""Chapter 8's diagrams laid out for a phone's column (see _render.LAYOUTS): the two stacks side by side in narrower
columns, their sub-layers named under the drawing; cross-attention's rows closer, long labels on two lines. The ids
are those of the wide diagrams in transformer.py (which checked the arguments: the wide one is always drawn first)."""

from __future__ import annotations

from typing import Any

from . import _args
from ._canvas import NARROW, Canvas
from ._render import narrow_layout
from ._shapes import plain, text_width
from .transformer import _fields, _layer

__all__: list[str] = []

MEMORY = "#7a4a10"  # the encoder output's line, as the wide diagram's


@narrow_layout("transformer_stack")
def transformer_stack(config: object = None, **fields) -> Canvas:
    """As transformer.transformer_stack, the layers always drawn compact (strips without text, as the wide one draws
    more than four layers): a column 1.6 in wide has no room for a sub-layer's name and size, so a note under the
    drawing names the strips and the summary gives the sizes. Each column's input is tokens, then the embedding,
    then its sum with the positional encoding beside it; the summary is wrapped above the encoder."""
    v = _fields(config, fields)
    n_enc, n_dec, d = v["n_encoder_layers"], v["n_decoder_layers"], v["d_model"]
    pre, tied, vocab_size = bool(v.get("norm_first")), bool(v.get("tie_embeddings")), v.get("vocab") or "V"
    gap, note_h = 0.26, 0.75  # between layers; the note under the drawing
    c = Canvas(NARROW, 30)  # the height is set once the columns are drawn
    bus_x = 1.72
    tops: dict[str, Any] = {}
    columns = (("encoder", 0.825, 1.55, "source tokens"), ("decoder", 2.78, 1.84, "target, shifted"))
    for kind, cx, w, tokens in columns:
        length = "S" if kind == "encoder" else "T"
        base = note_h
        tok = c.box(cx, base + 0.25, w - 0.1, 0.34, tokens, "input")
        emb = c.box(cx - 0.25, base + 0.8, 0.95, 0.34, "embedding", "embedding", part=f"{kind}_embedding")
        total = c.circle(cx - 0.25, base + 1.4, "+", r=0.12, kind="norm")
        pe = c.box(cx + 0.38, base + 1.4, 0.78, 0.46, "pos.\nencoding", "embedding", part=f"{kind}_positions")
        c.arrow((emb.x, tok.top[1]), emb.bottom)
        c.arrow(emb.top, total.bottom)
        c.arrow(pe.left, total.right)
        y = base + 2.05
        c.arrow(total.top, (total.x, y), label=f"(B, {length}, {d})")
        below = None
        for i in range(1, (n_enc if kind == "encoder" else n_dec) + 1):
            if below is not None:
                c.arrow(below.top, (below.x, y))
            below, strips = _layer(c, cx, w, y, kind, i, True, v)
            y = below.top[1] + gap
            if kind == "decoder":
                cross = strips["cross-attention"]
                c.arrow((bus_x, cross.y), cross.left, part="cross_attention", index=i, color=MEMORY)
                tops.setdefault("cross", []).append(cross.y)
        assert below is not None
        if pre:
            c.arrow(below.top, (below.x, y))
            below = c.box(cx, y + 0.15, 1.4, 0.3, "final layer norm", "norm", part=f"{kind}_norm")
            y = below.top[1] + gap
        tops[kind] = (below, y)
    below, y_mem = tops["encoder"]
    c.arrow(below.top, (below.x, y_mem), (bus_x, y_mem), head=False, color=MEMORY, lw=1.4)
    c.text(bus_x - 0.1, y_mem + 0.05, f"encoder output\n(B, S, {d})", ha="right", va="bottom")
    ys = [*tops["cross"], y_mem]
    c.arrow((bus_x, max(ys)), (bus_x, min(ys)), head=False, color=MEMORY, lw=1.4)
    below, y = tops["decoder"]
    c.arrow(below.top, (below.x, y))
    label = f"linear {d} → {vocab_size}" + (", tied" if tied else "")
    label = label.replace(", ", "\n") if text_width(label, 10) > 1.6 else label
    lines = label.count("\n") + 1
    linear = c.box(2.78, y + 0.15 * lines, 1.75, 0.3 * lines, label, "softmax", part="final_linear")
    soft = c.box(2.78, linear.top[1] + gap + 0.15, 1.2, 0.3, "softmax", "softmax", part="softmax")
    c.arrow(linear.top, soft.bottom)
    c.arrow(soft.top, (2.78, soft.top[1] + 0.25))
    c.text(2.78, soft.top[1] + 0.48, f"next-token probabilities\n(B, T, {vocab_size})")
    summary = (
        f"{n_enc} encoder layer{'s' * (n_enc > 1)},\n{n_dec} decoder layer{'s' * (n_dec > 1)}\n"
        f"d_model = {d},\n{v['n_heads']} heads, d_ff = {v['d_ff']}\n{'pre' if pre else 'post'}-norm"
        + (",\ntied embeddings" if tied else "")
    )
    height = max(soft.top[1] + 0.75, y_mem + 0.55 + 0.2 * (summary.count("\n") + 1) + 0.2)
    c.text(0.08, height - 0.1, summary, ha="left", va="top")
    c.text(
        0.08,
        note_h - 0.08,
        "bottom to top in each layer: self-attention (masked,\nin the decoder), cross-attention (decoder),\n"
        "feed-forward",
        ha="left",
        va="top",
        style="italic",
    )
    c.height = height
    c.fig.set_size_inches(NARROW, height)
    c.ax.set_ylim(0, height)
    return c


@narrow_layout("cross_attention")
def cross_attention(
    source_tokens=("the", "cat", "sleeps"), target_tokens=("<bos>", "el", "gato"), d_model: int = 512, vocab: int = 8000
) -> Canvas:
    """As transformer.cross_attention, the encoder's rows and the decoder's closer together, the shapes under them
    and the labels of the arrows on two lines."""
    # As the wide one reads them: a string is split into words.
    src, tgt = _args.tokens("source_tokens", source_tokens, 8), _args.tokens("target_tokens", target_tokens, 8)
    d, v = d_model, vocab
    rh, base = 0.28, 0.6
    rows_top = base + max(len(src), len(tgt)) * rh
    c = Canvas(NARROW, rows_top + 5.0)
    for name, tokens, x, side in (("memory", src, 1.0, -1), ("decoder", tgt, 2.65, 1)):
        top = base + len(tokens) * rh
        for i, token in enumerate(tokens, start=1):
            y = top - (i - 0.5) * rh
            label = f"{'$h_' if name == 'memory' else '$s_'}{{{i}}}$"
            c.box(x, y, 0.8, rh, label, "state", part=f"{name}_row", index=i, lw=0.8)
            c.text(x + side * 0.48, y, plain(token), ha="left" if side > 0 else "right")
    c.text(1.0, 0.25, f"encoder output\n({len(src)}, {d})")
    c.text(2.65, 0.25, f"decoder states\n({len(tgt)}, {d})")
    y = rows_top + 0.8
    k = c.box(0.5, y, 0.8, 0.42, "$W_K$: keys", "attention", part="key_projection")
    val = c.box(1.45, y, 0.95, 0.42, "$W_V$: values", "attention", part="value_projection")
    q = c.box(2.75, y, 1.1, 0.42, "$W_Q$: queries", "attention", part="query_projection")
    c.arrow((0.8, base + len(src) * rh), k.bottom)
    c.arrow((1.2, base + len(src) * rh), val.bottom)
    c.arrow((2.65, base + len(tgt) * rh), (2.65, q.bottom[1]))
    att = c.box(1.75, y + 0.95, 2.4, 0.5, r"softmax($QK^\top$ / √$d_k$) $V$", "attention", part="cross_attention")
    c.arrow(k.top, att.at(-0.75, -1))
    c.arrow(val.top, att.at(-0.2, -1))
    c.arrow(q.top, att.at(0.75, -1))
    linear = c.box(1.75, att.y + 1.35, 2.4, 0.4, f"linear {d} → {v}", "softmax", part="final_linear")
    c.arrow(att.top, linear.bottom, label="then the feed-forward\nand the layers above")
    soft = c.box(1.75, linear.y + 0.75, 2.4, 0.4, f"softmax over the {v} tokens", "softmax", part="softmax")
    c.arrow(linear.top, soft.bottom, label=f"logits ({len(tgt)}, {v})")
    c.arrow(soft.top, (1.75, soft.y + 0.45))
    c.text(
        1.75,
        soft.y + 0.75,
        f"the next token's probabilities at\neach of the {len(tgt)} target positions",
        part="probabilities",
    )
    return c
