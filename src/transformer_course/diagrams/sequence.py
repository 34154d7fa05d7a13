"""Chapters 3 and 4: the RNN encoder-decoder and its bottleneck, teacher forcing against free running, and one
step of Bahdanau attention over a real sentence pair."""

from __future__ import annotations

from . import _args
from ._canvas import HIGHLIGHT, INK, NARROW, Canvas
from ._render import Diagram, drawing, narrow, narrow_layout, render
from ._shapes import fits, plain

__all__ = ["bahdanau_step", "encoder_decoder", "teacher_forcing"]

SOURCE = ("the", "cat", "sleeps")
TARGET = ("el", "gato", "duerme")


def _source_columns(c: Canvas, xs, toks, alpha, w: float, band, ctx, heights: tuple[float, float]):
    """Bahdanau's step above each source token: its encoder state h_j, its score e_j into the softmax band, its
    weight as a number and a bar, and a line from the bar to the context as wide as the weight (the lines fan in,
    never cross). heights: where the lines bend and where the context sits. Returns the last score's box."""
    fan_y, ctx_y = heights
    e = None
    for j, (x, t, a) in enumerate(zip(xs, toks, alpha), start=1):
        h = c.box(x, 0.95, w, 0.4, f"$h_{{{j}}}$", "state", part="encoder_state", index=j)
        e = c.box(x, 1.7, w, 0.4, f"$e_{{{j}}}$", "attention", part="score", index=j)
        c.arrow(t.top, h.bottom)
        c.arrow(h.top, e.bottom)
        c.arrow(e.top, band.at((x - band.x) / (band.w / 2), -1))
        c.text(x, 2.72, f"{a:.2f}", part="weight_value", index=j)
        height = max(0.02, 0.7 * a)
        bar = c.box(x, 2.9 + height / 2, min(w, 0.4), height, "", "attention", part="weight", index=j, lw=0.8)
        end = (ctx.x + (x - ctx.x) * 0.3, ctx_y - 0.2)
        c.arrow(bar.top, (x, fan_y), end, head=False, lw=0.4 + 5 * a, color="#7a5a2a")
    return e


@drawing
def encoder_decoder(source_tokens=SOURCE, target_tokens=TARGET) -> Diagram:
    """The RNN encoder-decoder over one sentence pair: the encoder reads the source ("encoder-step-i", i from 1),
    its last state is the single context vector ("context", highlighted: the bottleneck), the decoder's initial
    state, and the decoder writes the target from <bos> ("decoder-step-i", one more than the target: <eos>)."""
    src = _args.tokens("source_tokens", source_tokens, 8)
    tgt = _args.tokens("target_tokens", target_tokens, 8)
    if len(src) + len(tgt) + 2 > 11:
        raise ValueError(f"{len(src)} + {len(tgt)} tokens do not fit the page's width: at most 9 in all")
    inputs, outputs = ["<bos>", *tgt], [*tgt, "<eos>"]
    columns = len(src) + 1 + len(inputs)
    pitch = min(1.0, 5.9 / columns)
    w_cell, w_tok = pitch - 0.26, pitch - 0.08
    c = Canvas(0.9 + columns * pitch, 3.45)
    xs = [0.45 + pitch / 2 + i * pitch for i in range(columns)]
    slant = not fits(src + inputs, w_tok)  # the source and the decoder's inputs share the bottom line
    toks = c.tokens(xs[: len(src)], 0.35, w_tok, 0.4, src, part="source_token", slant=slant)
    ins = c.tokens(xs[len(src) + 1 :], 0.35, w_tok, 0.4, inputs, part="decoder_input", slant=slant)
    outs = c.tokens(xs[len(src) + 1 :], 2.25, w_tok, 0.4, outputs, "softmax", below=False, part="target_token")
    previous = None
    for i, t in enumerate(toks, start=1):
        cell = c.box(t.x, 1.3, w_cell, 0.6, "GRU", "recurrent", part="encoder_step", index=i)
        c.arrow(t.top, cell.bottom)
        if previous:
            c.arrow(previous.right, cell.left)
        previous = cell
    ctx = c.box(xs[len(src)], 1.3, w_cell, 0.5, "$c$", "state", part="context", edge=HIGHLIGHT, lw=2.2)
    assert previous is not None  # the last encoder step: the source has at least one token
    c.arrow(previous.right, ctx.left, color=HIGHLIGHT, lw=2)
    previous = ctx
    for i, (t, out) in enumerate(zip(ins, outs), start=1):
        cell = c.box(t.x, 1.3, w_cell, 0.6, "GRU", "recurrent", part="decoder_step", index=i)
        c.arrow(t.top, cell.bottom)
        c.arrow(cell.top, out.bottom)
        c.arrow(previous.right, cell.left, color=HIGHLIGHT if previous is ctx else INK, lw=2 if i == 1 else 1.2)
        previous = cell
    c.text((xs[0] + xs[len(src) - 1]) / 2, 3.05, "encoder", fontsize=10, weight="bold")
    c.text((xs[len(src) + 1] + xs[-1]) / 2, 3.05, "decoder", fontsize=10, weight="bold")
    c.text(ctx.x + 0.25, 2.15, "the bottleneck:\none vector $c$", ha="right", color=HIGHLIGHT)
    alt = (
        f"An RNN encoder-decoder: the encoder reads the {len(src)} source tokens ({' '.join(src)}) one by one; its "
        f"last state, a single context vector c (the bottleneck), starts the decoder, which writes "
        f"{' '.join(outputs)} in {len(inputs)} steps, each from the token before it."
    )
    return render(c, alt)


@drawing
@narrow_layout("teacher_forcing")
def teacher_forcing(reference=TARGET, predictions=("el", "perro", "duerme")) -> Diagram:
    """Two panels of the same decoder. Teacher forcing (top, "tf-step-i"): each step's input is the reference's
    previous token, whatever the model predicted. Free running (bottom, "fr-step-i"): each step's input is the
    model's own previous prediction ("fed-back-i"), so one mistake (in red) is read by every later step."""
    ref = _args.tokens("reference", reference, 7)
    pred = _args.tokens("predictions", predictions, 7)
    if len(pred) != len(ref):
        raise ValueError(f"predictions has {len(pred)} tokens and reference {len(ref)}: give one prediction per step")
    n = len(ref)
    phone = narrow()  # a phone: steps closer, boxes wider for their larger text, the titles on two lines
    if phone:
        pitch = min(0.8, (NARROW - 0.65) / n)
        w_cell, w_tok = pitch - 0.16, pitch - 0.07
        c = Canvas(NARROW, 6.15)
        xs = [0.6 + (i + 0.5) * pitch for i in range(n)]
    else:
        pitch = min(1.0, 5.6 / n)
        w_cell, w_tok = pitch - 0.36, pitch - 0.3
        c = Canvas(max(5.8, 1.2 + n * pitch), 5.3)
        xs = [c.width / 2 + (i - (n - 1) / 2) * pitch for i in range(n)]
    cut = "\n" if phone else " "
    panels = (
        (
            "tf",
            2.85 if phone else 2.55,
            f"teacher forcing: the input is{cut}the reference's previous token",
            ["<bos>", *ref[:-1]],
        ),
        ("fr", 0.05, f"free running: the input is{cut}the model's own previous prediction", ["<bos>", *pred[:-1]]),
    )
    header = f"reference: {plain(' '.join(ref))};{cut}outlined in red: a prediction that differs from it"
    c.text(c.width / 2, 5.82 if phone else 5.1, header)

    def token(x, i, y, text, kind, part, wrong):  # a token's box, outlined in red when it is a wrong prediction
        edge, lw = (HIGHLIGHT, 2) if wrong else ("#303030", 1)
        return c.box(x, y, w_tok, 0.4, plain(text), kind, part=part, index=i, edge=edge, lw=lw)

    for name, y0, title, inputs in panels:
        c.text(c.width / 2, y0 + (2.35 if phone else 2.2), title, fontsize=10, weight="bold")
        start = c.box(xs[0] - pitch / 2 - 0.3, y0 + 1.05, 0.4, 0.4, "$h_0$", "state")
        previous, outs = start, []
        for i, x in enumerate(xs, start=1):
            wrong_in = name == "fr" and i > 1 and pred[i - 2] != ref[i - 2]
            t = token(x, i, y0 + 0.3, inputs[i - 1], "input", f"{name}_input", wrong_in)
            cell = c.box(x, y0 + 1.05, w_cell, 0.5, "GRU", "recurrent", part=f"{name}_step", index=i)
            out = token(x, i, y0 + 1.8, pred[i - 1], "softmax", f"{name}_output", pred[i - 1] != ref[i - 1])
            c.arrow(t.top, cell.bottom)
            c.arrow(cell.top, out.bottom)
            c.arrow(previous.right, cell.left)
            previous = cell
            outs.append((out, t))
        if name == "fr":  # each prediction, fed back: from its box's lower right to the next input's upper left
            for i, ((out, _), (_, nxt)) in enumerate(zip(outs, outs[1:]), start=1):
                c.arrow(out.at(1, -1), nxt.at(-1, 1), part="fed_back", index=i, color="#5a5a5a", lw=1.0)
    wrong = sum(p != r for p, r in zip(pred, ref))
    alt = (
        f"The same decoder over {n} steps, twice. With teacher forcing the input of each step is the reference's "
        f"previous token ({' '.join(['<bos>', *ref[:-1]])}); running free, it is the model's own previous prediction "
        f"({' '.join(['<bos>', *pred[:-1]])}), so the {wrong} wrong prediction{'s' if wrong != 1 else ''} "
        "(outlined in red) feed the steps after them."
    )
    return render(c, alt)


@drawing
def bahdanau_step(source_tokens=SOURCE, target_prefix=("el",), weights=None) -> Diagram:
    """One decoder step of Bahdanau attention: the previous decoder state s_{t-1} scores every encoder state h_j
    ("encoder-state-j" and "score-j", j from 1), a softmax turns the scores into weights ("weight-j": bars as tall
    as ``weights``, e.g. a trained model's attention row; uniform if not given), the weighted sum of the h_j is
    the context ("context"), and the GRU ("decoder-cell") reads the context and the previous token into s_t."""
    src = _args.tokens("source_tokens", source_tokens, 8)
    if isinstance(target_prefix, str):
        target_prefix = target_prefix.split()
    prefix = list(target_prefix)
    if not all(isinstance(t, str) and t.strip() for t in prefix):
        raise ValueError(f"target_prefix must be a list of non-empty token strings, got {target_prefix!r}")
    given = weights is not None
    alpha = _args.distribution("weights", weights, len(src)) if given else [1 / len(src)] * len(src)
    s = len(src)
    pitch = min(0.8, 3.5 / s)
    xs = [1.85 + pitch / 2 + j * pitch for j in range(s)]
    w = pitch - 0.12
    c = Canvas(6.8, 5.85)
    c.text(
        3.4,
        5.6,
        r"$e_j = v^\top \tanh(W s_{t-1} + U h_j)$,   $\alpha = \mathrm{softmax}(e)$,   $c_t = \Sigma_j \alpha_j h_j$",
    )
    label = f"softmax over the {s} positions"
    label = label if 0.075 * len(label) < s * pitch - 0.1 else "softmax"
    band = c.box((xs[0] + xs[-1]) / 2, 2.35, s * pitch - 0.04, 0.36, label, "softmax", part="softmax")
    fan_y, ctx_y = 3.7, 4.3
    ctx = c.box(band.x, ctx_y, 1.9, 0.4, r"context $c_t$", "state", part="context")
    toks = c.tokens(xs, 0.3, pitch - 0.06, 0.36, src, part="source_token")
    _source_columns(c, xs, toks, alpha, w, band, ctx, (fan_y, ctx_y))
    s_prev = c.box(0.55, ctx_y, 0.7, 0.4, "$s_{t-1}$", "state", part="decoder_state", index="previous")
    c.arrow(s_prev.bottom, (0.55, 1.7), (xs[0] - w / 2, 1.7))
    cell = c.box(6.1, ctx_y, 1.0, 0.4, "GRU", "recurrent", part="decoder_cell")
    c.arrow(ctx.right, cell.left)
    c.arrow(s_prev.top, (0.55, 4.95), (5.8, 4.95), (5.8, ctx_y + 0.2), label="the previous state, to update")
    s_new = c.box(6.38, 5.15, 0.6, 0.36, "$s_t$", "state", part="decoder_state", index="next")
    c.arrow((6.38, ctx_y + 0.2), s_new.bottom)
    previous = prefix[-1] if prefix else "<bos>"
    y_prev = c.box(6.1, 3.45, 0.9, 0.36, plain(previous), "input", part="previous_token")
    c.arrow(y_prev.top, cell.bottom)
    shown = ["<bos>", *prefix]
    shown = shown if len(shown) <= 3 else ["…", *shown[-2:]]
    c.text(6.1, 2.95, "so far:\n" + plain(" ".join(shown)))
    c.text(xs[0] - pitch / 2 - 0.05, 2.72, r"weights $\alpha_j$", ha="right")
    if not given:
        c.text(xs[0] - pitch / 2 - 0.05, 3.2, "(none given:\nuniform)", ha="right", style="italic")
    row = ", ".join(f"{t} {a:.2f}" for t, a in zip(src, alpha))
    alt = (
        f"One decoder step of Bahdanau attention over the source '{' '.join(src)}', after '{' '.join(shown)}': the "
        f"previous state s_(t-1) scores each of the {s} encoder states, a softmax turns the scores into weights "
        f"({row}{'' if given else ', uniform: none given'}), the weighted sum of the encoder states is the context, "
        f"and the GRU reads the context and the previous token '{previous}' into the new state s_t."
    )
    return render(c, alt)
