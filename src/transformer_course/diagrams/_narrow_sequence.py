"""Chapters 3 and 4's diagrams laid out for a phone's column (see _render.LAYOUTS): the encoder above the decoder,
Bahdanau's decoder step above its attention, and the ids of the wide diagrams in sequence.py (which checked the
arguments: the wide one is always drawn first)."""

from __future__ import annotations

from . import _args
from ._canvas import HIGHLIGHT, INK, NARROW, Canvas
from ._render import narrow_layout
from ._shapes import fits, plain
from .sequence import SOURCE, TARGET, _source_columns

__all__: list[str] = []


@narrow_layout("encoder_decoder")
def encoder_decoder(source_tokens=SOURCE, target_tokens=TARGET) -> Canvas:
    """As sequence.encoder_decoder, in two rows: the encoder and its context c on top, the decoder under it. The
    highlighted path from c runs down between the rows and into the decoder's first step from the left, so the
    bottleneck is still one line; the titles and the note on c share the top line."""
    # As the wide one reads them: a string is split into words.
    src, tgt = _args.tokens("source_tokens", source_tokens, 8), _args.tokens("target_tokens", target_tokens, 8)
    inputs, outputs = ["<bos>", *tgt], [*tgt, "<eos>"]
    pitch = min(0.75, (NARROW - 0.3) / max(len(src) + 1, len(inputs)))
    w_cell, w_tok = pitch - 0.14, pitch - 0.03
    c = Canvas(NARROW, 4.35)
    xs = [0.3 + (i + 0.5) * pitch for i in range(max(len(src) + 1, len(inputs)))]
    gap = 2.3  # the line between the rows that the context's path runs along
    enc_y, dec_y = 3.5, 1.0
    toks = c.tokens(xs[: len(src)], 2.8, w_tok, 0.36, src, part="source_token", slant=not fits(src, w_tok))
    ins = c.tokens(xs[: len(inputs)], 0.3, w_tok, 0.36, inputs, part="decoder_input")
    outs = c.tokens(xs[: len(inputs)], 1.7, w_tok, 0.36, outputs, "softmax", below=False, part="target_token")
    previous = None
    for i, t in enumerate(toks, start=1):
        cell = c.box(t.x, enc_y, w_cell, 0.5, "GRU", "recurrent", part="encoder_step", index=i)
        c.arrow(t.top, cell.bottom)
        if previous:
            c.arrow(previous.right, cell.left)
        previous = cell
    ctx = c.box(xs[len(src)], enc_y, w_cell, 0.44, "$c$", "state", part="context", edge=HIGHLIGHT, lw=2.2)
    assert previous is not None
    c.arrow(previous.right, ctx.left, color=HIGHLIGHT, lw=2)
    first = xs[0] - pitch / 2 - 0.1  # left of the decoder's first column: the path comes down here
    previous = None
    for i, (t, out) in enumerate(zip(ins, outs), start=1):
        cell = c.box(t.x, dec_y, w_cell, 0.5, "GRU", "recurrent", part="decoder_step", index=i)
        c.arrow(t.top, cell.bottom)
        c.arrow(cell.top, out.bottom)
        if previous is None:
            c.arrow(ctx.bottom, (ctx.x, gap), (first, gap), (first, dec_y), cell.left, color=HIGHLIGHT, lw=2)
        else:
            c.arrow(previous.right, cell.left, color=INK)
        previous = cell
    c.text(0.1, 4.1, "encoder", ha="left", fontsize=10, weight="bold")
    c.text(c.width - 0.05, 4.1, "the bottleneck: one vector $c$", ha="right", color=HIGHLIGHT)
    c.text(c.width - 0.05, gap - 0.2, "decoder", ha="right", fontsize=10, weight="bold")
    return c


@narrow_layout("bahdanau_step")
def bahdanau_step(source_tokens=SOURCE, target_prefix=("el",), weights=None) -> Canvas:
    """As sequence.bahdanau_step, with the decoder's side above the context rather than beside it: the GRU reads
    the context from below, the previous token from the left and s_{t-1} from the right, whose path down the right
    edge reaches the last score. The formula takes two lines, the notes on the left of the bars three."""
    src = _args.tokens("source_tokens", source_tokens, 8)
    prefix = target_prefix.split() if isinstance(target_prefix, str) else list(target_prefix)
    s = len(src)
    given = weights is not None
    alpha = [float(a) for a in weights] if given else [1 / s] * s
    pitch = min(0.7, 2.45 / s)
    xs = [0.9 + pitch / 2 + j * pitch for j in range(s)]
    w = pitch - 0.1
    c = Canvas(NARROW, 6.75)
    c.text(
        c.width / 2,
        6.4,
        r"$e_j = v^\top \tanh(W s_{t-1} + U h_j)$"
        + "\n"
        + r"$\alpha = \mathrm{softmax}(e)$,   $c_t = \Sigma_j \alpha_j h_j$",
    )
    label = f"softmax over the {s} positions"
    label = label if 0.09 * len(label) < s * pitch - 0.1 else "softmax"
    band = c.box((xs[0] + xs[-1]) / 2, 2.35, s * pitch - 0.04, 0.36, label, "softmax", part="softmax")
    fan_y, ctx_y, cell_y = 3.7, 4.3, 5.05
    ctx = c.box(band.x, ctx_y, 1.25, 0.4, r"context $c_t$", "state", part="context")
    toks = c.tokens(xs, 0.3, pitch - 0.04, 0.36, src, part="source_token")
    e = _source_columns(c, xs, toks, alpha, w, band, ctx, (fan_y, ctx_y))
    assert e is not None
    cell = c.box(ctx.x, cell_y, 0.7, 0.4, "GRU", "recurrent", part="decoder_cell")
    c.arrow(ctx.top, cell.bottom)
    s_prev = c.box(3.35, cell_y, 0.6, 0.4, "$s_{t-1}$", "state", part="decoder_state", index="previous")
    c.arrow(s_prev.bottom, (s_prev.x, 1.7), e.right)
    c.arrow(s_prev.left, cell.right)
    c.text(c.width - 0.05, cell_y + 0.55, "the previous\nstate, to update", ha="right")
    s_new = c.box(cell.x, cell_y + 0.7, 0.5, 0.36, "$s_t$", "state", part="decoder_state", index="next")
    c.arrow(cell.top, s_new.bottom)
    previous = prefix[-1] if prefix else "<bos>"
    y_prev = c.box(0.45, cell_y, 0.8, 0.36, plain(previous), "input", part="previous_token")
    c.arrow(y_prev.right, cell.left)
    shown = ["<bos>", *prefix]
    shown = shown if len(shown) <= 3 else ["…", *shown[-2:]]
    c.text(0.05, cell_y + 0.55, "so far:\n" + plain(" ".join(shown)), ha="left")
    c.text(xs[0] - pitch / 2 - 0.05, 2.72, "weights\n" + r"$\alpha_j$", ha="right")
    if not given:
        c.text(xs[0] - pitch / 2 - 0.05, 3.4, "(none\ngiven:\nuniform)", ha="right", style="italic")
    return c
