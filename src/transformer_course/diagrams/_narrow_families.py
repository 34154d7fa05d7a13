"""Chapter 10's three families laid out for a phone's column (see _render.LAYOUTS): the three columns of the wide
diagram stacked, each its title lines, its patterns and its caption; the key under all three, on two lines. The ids
are those of families.model_families, which checked the arguments."""

from __future__ import annotations

from ._canvas import NARROW, Canvas
from ._render import narrow_layout
from .attention import ALLOWED, HIDDEN
from .families import CELL, LABEL, MASK, SENTENCE, SOURCE, TARGET, _encoder_decoder, _grid, _labels, _predictions, _rows

__all__: list[str] = []

HEAD = 0.78  # a panel's three title lines
FOOT = 0.5  # a panel's caption, two lines
KEY = 0.62  # the key under the panels


@narrow_layout("model_families")
def model_families(sentence=SENTENCE, masked: int = 2, source_tokens=SOURCE, target_tokens=TARGET) -> Canvas:
    """As families.model_families, one family under the other, each pattern left-aligned under its title."""
    words = _labels("sentence", sentence, 2, 6)  # as the wide one reads them: a string is split into words
    src, tgt = _labels("source_tokens", source_tokens, 1, 3), _labels("target_tokens", target_tokens, 1, 3)
    bert = [MASK if i == masked else w for i, w in enumerate(words)]
    gpt = words[:-1]
    decoder = ["<bos>", *tgt[:-1]]
    s, t = len(src), len(decoder)
    grids = (len(bert) * CELL, len(gpt) * CELL, (s + t) * CELL + 0.65)  # each panel's patterns, their height
    c = Canvas(NARROW, KEY + sum(HEAD + g + FOOT + 0.15 for g in grids))
    heads = (
        ("encoder-only: BERT", "bidirectional self-attention", "predicts the masked word"),
        ("decoder-only: GPT", "causal self-attention", "predicts the next token"),
        ("encoder-decoder: chapter 8", "encoder reads, decoder writes", "translates the source"),
    )
    captions = (
        "every position sees every position",
        "each position sees only the past",
        "encoder: the whole source;\ndecoder: its past + the source",
    )
    gx = 0.1 + LABEL + 0.08  # every pattern's left edge: the row labels before it
    y = c.height
    tops = []
    for (title, attention, task), caption, g in zip(heads, captions, grids):
        c.text(0.08, y - 0.15, title, ha="left", fontsize=10, weight="bold")
        c.text(0.08, y - 0.4, attention, ha="left")
        c.text(0.08, y - 0.62, task, ha="left", style="italic")
        tops.append(y - HEAD)
        c.text(0.08, y - HEAD - g - 0.25, caption, ha="left", va="center")
        y -= HEAD + g + FOOT + 0.15

    _rows(c, gx - 0.06, tops[0], bert, "bert_token")
    _grid(c, gx, tops[0], len(bert), len(bert), lambda i, j: True, "bert")
    _predictions(c, gx + len(bert) * CELL + 0.06, tops[0], {masked: words[masked]}, "bert_prediction")

    _rows(c, gx - 0.06, tops[1], gpt, "gpt_token")
    _grid(c, gx, tops[1], len(gpt), len(gpt), lambda i, j: j <= i, "gpt")
    _predictions(c, gx + len(gpt) * CELL + 0.06, tops[1], dict(enumerate(words[1:])), "gpt_prediction")

    # As the wide one: the encoder's pattern above the cross-attention's columns, the decoder's two side by side.
    top, sx = tops[2], gx
    *_, xx, under = _encoder_decoder(c, sx, top, (src, decoder, tgt))
    c.text(sx + t * CELL / 2, under, "causal")
    c.text(xx + s * CELL / 2, under, "cross")

    c.box(0.18, 0.42, 0.16, 0.16, kind=ALLOWED, lw=0.5, edge="#9a9a9a")
    c.text(0.31, 0.42, "may attend", ha="left")
    c.box(1.45, 0.42, 0.16, 0.16, kind=HIDDEN, lw=0.5, edge="#9a9a9a")
    c.text(1.58, 0.42, "hidden (a later position)", ha="left")
    c.text(0.08, 0.15, "rows: the positions that read; columns: those read", ha="left")
    return c
