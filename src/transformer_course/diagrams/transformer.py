"""Chapter 8: the encoder-decoder Transformer drawn from its configuration (the paper's figure 1, one box per
layer), and cross-attention with the output layer over the vocabulary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._checks import check_heads
from . import _args
from ._canvas import Canvas
from ._render import Diagram, drawing, render
from ._shapes import Box, plain
from .layers import SUBLAYERS

__all__ = ["cross_attention", "transformer_stack"]

REQUIRED = ("n_encoder_layers", "n_decoder_layers", "d_model", "n_heads", "d_ff")
# The paper's base model: what is drawn when neither a configuration nor a field is given.
PAPER = {"n_encoder_layers": 6, "n_decoder_layers": 6, "d_model": 512, "n_heads": 8, "d_ff": 2048}
# Each layer's sub-layers are those that the layer diagram draws (layers.SUBLAYERS); a strip of the stack names
# two of them with their sizes.
SIZED = {"self-attention": "self-attention, {h} heads", "feed-forward": "feed-forward {d}→{ff}→{d}"}
STRIPS = {kind: tuple((SIZED.get(name, name), colour) for name, colour in subs) for kind, subs in SUBLAYERS.items()}


def _fields(config, overrides: dict) -> dict:
    """The fields drawn: the configuration's (a TransformerConfig, or a dict of ``configs.CONFIGS``), then the
    keyword arguments given, which override them; the paper's base model without either."""
    values: dict = {}
    if config is not None:
        get = config.get if isinstance(config, Mapping) else (lambda key, default=None: getattr(config, key, default))
        if get("model", "transformer") != "transformer" or any(get(k) is None for k in REQUIRED):
            raise ValueError(f"not a Transformer configuration (it needs {', '.join(REQUIRED)}): {config!r}")
        values = {k: get(k) for k in (*REQUIRED, "norm_first", "tie_embeddings", "vocab")}
    elif all(overrides.get(k) is None for k in REQUIRED):
        values = dict(PAPER)
    values.update({k: v for k, v in overrides.items() if v is not None})
    missing = [k for k in REQUIRED if values.get(k) is None]
    if missing:
        raise ValueError(f"transformer_stack needs a configuration, or all of {', '.join(REQUIRED)}: missing {missing}")
    for key, high in (("n_encoder_layers", 12), ("n_decoder_layers", 12), ("d_model", 1 << 20), ("d_ff", 1 << 20)):
        values[key] = _args.count(key, values[key], 1, high)
    values["n_heads"] = _args.count("n_heads", values["n_heads"], 1, 1 << 10)
    check_heads(values["d_model"], values["n_heads"])
    return values


def _layer(c: Canvas, cx: float, w: float, y: float, kind: str, i: int, compact: bool, v: dict) -> tuple[Box, dict]:
    """Layer i of a stack as a frame ("encoder-layer-i") around its sub-layers, bottom to top, from y; returns
    the frame and each sub-layer's strip by name."""
    strips = STRIPS[kind]
    sh = 0.12 if compact else 0.22  # a strip's height: compact strips have no text (the legend names them)
    frame = c.box(
        cx,
        y + (len(strips) * (sh + 0.04) + 0.06) / 2,
        w,
        len(strips) * (sh + 0.04) + 0.06,
        "",
        "layer",
        part=f"{kind}_layer",
        index=i,
        frame=True,
    )
    sx, sw = cx + 0.3, w - 0.7
    found = {}
    for k, (name, colour) in enumerate(strips):
        label = "" if compact else name.format(h=v["n_heads"], d=v["d_model"], ff=v["d_ff"])
        found[name.split(" ")[0]] = c.box(
            sx, y + 0.05 + k * (sh + 0.04) + sh / 2, sw, sh, label, colour, fontsize=9, lw=0.7
        )
    c.text(frame.x - w / 2 + 0.08, y + 0.05 + sh / 2, f"layer {i}", ha="left", va="center")
    return frame, found


@drawing
def transformer_stack(
    config: object = None,  # a models.TransformerConfig (read by its field names: no import of the models here)
    *,
    n_encoder_layers: int | None = None,
    n_decoder_layers: int | None = None,
    d_model: int | None = None,
    n_heads: int | None = None,
    d_ff: int | None = None,
    norm_first: bool | None = None,
    tie_embeddings: bool | None = None,
    vocab: int | None = None,
) -> Diagram:
    """The encoder-decoder Transformer of ``config`` (a ``models.TransformerConfig``, or a dict of
    ``configs.CONFIGS``), keyword fields overriding it (the paper's base model without either), bottom to top:
    tokens, embeddings plus positional encodings ("encoder-embedding", "decoder-embedding"), one frame per layer
    ("encoder-layer-i", "decoder-layer-i", i from 1) with its sub-layers, the final layer norms of a pre-norm
    model ("encoder-norm", "decoder-norm"), the encoder's output feeding the cross-attention of every decoder layer
    ("cross-attention-i"), and the final linear layer and softmax over the vocabulary ("final-linear", "softmax")."""
    v = _fields(
        config,
        dict(
            n_encoder_layers=n_encoder_layers,
            n_decoder_layers=n_decoder_layers,
            d_model=d_model,
            n_heads=n_heads,
            d_ff=d_ff,
            norm_first=norm_first,
            tie_embeddings=tie_embeddings,
            vocab=vocab,
        ),
    )
    n_enc, n_dec, d = v["n_encoder_layers"], v["n_decoder_layers"], v["d_model"]
    pre, tied, vocab_size = bool(v.get("norm_first")), bool(v.get("tie_embeddings")), v.get("vocab") or "V"
    compact = max(n_enc, n_dec) > 4
    gap = 0.26
    c = Canvas(6.8, 20)  # the height is set once the columns are drawn
    bus_x = 3.25
    tops: dict[str, Any] = {}  # "cross": the cross-attentions' heights; per column, (its top box, the height above)
    for kind, cx, w, tokens in (("encoder", 1.6, 2.7, "source tokens"), ("decoder", 5.05, 3.0, "target, shifted")):
        length = "S" if kind == "encoder" else "T"
        tok = c.box(cx - 0.65, 0.3, 1.3, 0.36, tokens, "input", fontsize=9)
        emb = c.box(cx - 0.65, 0.95, 1.2, 0.36, "embedding", "embedding", part=f"{kind}_embedding", fontsize=9)
        total = c.circle(cx + 0.12, 0.95, "+", r=0.12, kind="norm")
        pe = c.box(cx + 0.8, 0.95, 1.0, 0.36, "pos. encoding", "embedding", part=f"{kind}_positions", fontsize=9)
        c.arrow(tok.top, emb.bottom)
        c.arrow(emb.right, total.left)
        c.arrow(pe.left, total.right)
        y = 1.55
        c.arrow(total.top, (total.x, y), label=f"(B, {length}, {d})")
        below = None
        for i in range(1, (n_enc if kind == "encoder" else n_dec) + 1):
            if below is not None:
                c.arrow(below.top, (below.x, y))
            below, strips = _layer(c, cx, w, y, kind, i, compact, v)
            y = below.top[1] + gap
            if kind == "decoder":  # the encoder's output reaches it at its cross-attention strip
                cross = strips["cross-attention"]
                c.arrow((bus_x, cross.y), cross.left, part="cross_attention", index=i, color="#7a4a10")
                tops.setdefault("cross", []).append(cross.y)
        assert below is not None  # the column's last layer: every column has at least one
        if pre:
            c.arrow(below.top, (below.x, y))
            below = c.box(cx, y + 0.14, 1.4, 0.28, "final layer norm", "norm", part=f"{kind}_norm", fontsize=9)
            y = below.top[1] + gap
        tops[kind] = (below, y)
    # The encoder's output: up, across to a line that runs beside the decoder, and into every cross-attention.
    below, y_mem = tops["encoder"]
    c.arrow(below.top, (below.x, y_mem), (bus_x, y_mem), head=False, color="#7a4a10", lw=1.4)
    c.text(bus_x - 0.1, y_mem + 0.05, f"encoder output (B, S, {d})", ha="right", va="bottom")
    ys = [*tops["cross"], y_mem]
    c.arrow((bus_x, max(ys)), (bus_x, min(ys)), head=False, color="#7a4a10", lw=1.4)
    below, y = tops["decoder"]
    c.arrow(below.top, (below.x, y))
    linear = c.box(
        5.05,
        y + 0.15,
        2.6,
        0.3,
        f"linear {d} → {vocab_size}" + (", tied" if tied else ""),
        "softmax",
        part="final_linear",
        fontsize=9,
    )
    soft = c.box(5.05, linear.top[1] + gap + 0.15, 1.4, 0.3, "softmax", "softmax", part="softmax", fontsize=9)
    c.arrow(linear.top, soft.bottom)
    c.arrow(soft.top, (5.05, soft.top[1] + 0.25))
    c.text(5.05, soft.top[1] + 0.4, f"next-token probabilities (B, T, {vocab_size})")
    height = max(soft.top[1] + 0.6, y_mem + (1.45 if compact else 0.9))  # room for the summary (and legend)
    summary = (
        f"{n_enc} encoder layer{'s' * (n_enc > 1)}, {n_dec} decoder layer{'s' * (n_dec > 1)}\n"
        f"d_model = {d}, {v['n_heads']} heads, d_ff = {v['d_ff']}\n{'pre' if pre else 'post'}-norm"
        + (", tied embeddings" if tied else "")
    )
    c.text(0.2, height - 0.15, summary, ha="left", va="top")
    if compact:
        c.text(
            0.2,
            height - 0.75,
            "bottom to top in each layer: self-attention\n(masked, in the decoder), "
            "cross-attention\n(decoder), feed-forward",
            ha="left",
            va="top",
            style="italic",
        )
    c.height = height
    c.fig.set_size_inches(6.8, height)
    c.ax.set_ylim(0, height)
    alt = (
        f"The encoder-decoder Transformer of this configuration: {n_enc} encoder layer{'s' * (n_enc > 1)} and "
        f"{n_dec} decoder layer{'s' * (n_dec > 1)} of width d_model = {d}, with {v['n_heads']} attention heads and "
        f"feed-forward width {v['d_ff']}, {'pre' if pre else 'post'}-norm. Token embeddings plus positional "
        f"encodings enter each stack; the encoder's output feeds the cross-attention of all {n_dec} decoder layers; "
        f"a linear layer to the {vocab_size}-token vocabulary and a softmax give the next-token probabilities."
    )
    return render(c, alt)


@drawing
def cross_attention(
    source_tokens=("the", "cat", "sleeps"), target_tokens=("<bos>", "el", "gato"), d_model: int = 512, vocab: int = 8000
) -> Diagram:
    """Cross-attention, bottom to top: the decoder's states ("decoder-row-i", one per target position, i from 1)
    give the queries ("query-projection"), the encoder's output ("memory-row-j") the keys and values
    ("key-projection", "value-projection"); the attention ("cross-attention") gives each target position a mix of
    source positions, and after the layers above, the final linear layer ("final-linear") and softmax
    ("softmax") turn each position's state into probabilities over the vocabulary ("probabilities")."""
    src = _args.tokens("source_tokens", source_tokens, 8)
    tgt = _args.tokens("target_tokens", target_tokens, 8)
    d = _args.count("d_model", d_model, 1, 1 << 20)
    v = _args.count("vocab", vocab, 1, 1 << 24)
    rh = 0.26
    rows_top = 0.42 + max(len(src), len(tgt)) * rh
    c = Canvas(6.8, rows_top + 4.5)
    for name, tokens, x, side in (("memory", src, 1.55, -1), ("decoder", tgt, 5.25, 1)):
        top = 0.42 + len(tokens) * rh
        for i, token in enumerate(tokens, start=1):
            y = top - (i - 0.5) * rh
            c.box(
                x,
                y,
                1.3,
                rh,
                f"{'$h_' if name == 'memory' else '$s_'}{{{i}}}$",
                "state",
                part=f"{name}_row",
                index=i,
                fontsize=9,
                lw=0.8,
            )
            c.text(x + side * 0.73, y, plain(token), ha="left" if side > 0 else "right")
    c.text(1.55, 0.15, f"encoder output ({len(src)}, {d})")
    c.text(5.25, 0.15, f"decoder states ({len(tgt)}, {d})")
    y = rows_top + 0.8
    k = c.box(0.95, y, 1.1, 0.42, "$W_K$: keys", "attention", part="key_projection")
    val = c.box(2.2, y, 1.1, 0.42, "$W_V$: values", "attention", part="value_projection")
    q = c.box(5.25, y, 1.3, 0.42, "$W_Q$: queries", "attention", part="query_projection")
    for b, rows in ((k, src), (val, src), (q, tgt)):
        c.arrow((b.x, 0.42 + len(rows) * rh), b.bottom)
    att = c.box(3.4, y + 0.95, 2.6, 0.5, r"softmax($QK^\top$ / √$d_k$) $V$", "attention", part="cross_attention")
    c.arrow(k.top, att.at(-0.75, -1))
    c.arrow(val.top, att.at(-0.3, -1))
    c.arrow(q.top, att.at(0.6, -1))
    linear = c.box(3.4, att.y + 1.25, 2.6, 0.4, f"linear {d} → {v}", "softmax", part="final_linear")
    c.arrow(att.top, linear.bottom, label="then the feed-forward and the layers above")
    soft = c.box(3.4, linear.y + 0.7, 2.6, 0.4, f"softmax over the {v} tokens", "softmax", part="softmax")
    c.arrow(linear.top, soft.bottom, label=f"logits ({len(tgt)}, {v})")
    c.arrow(soft.top, (3.4, soft.y + 0.5))
    c.text(
        3.4,
        soft.y + 0.62,
        f"the next token's probabilities at each of the {len(tgt)} target positions",
        part="probabilities",
    )
    alt = (
        f"Cross-attention: the decoder's states for the {len(tgt)} target positions ({' '.join(tgt)}) are projected "
        f"into queries, the encoder's output for the {len(src)} source tokens ({' '.join(src)}) into keys and values; "
        f"each query mixes the values of the source positions it matches, and after the layers above, a linear "
        f"layer from {d} to the {v}-token vocabulary and a softmax give each target position the next token's "
        "probabilities."
    )
    return render(c, alt)
