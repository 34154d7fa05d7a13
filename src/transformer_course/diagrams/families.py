"""Chapter 10: the three families of Transformer at a glance, each by who may attend to whom. Encoder-only (BERT)
attends both ways and predicts a masked word; decoder-only (GPT) attends to the past only and predicts the next
token; encoder-decoder (chapter 8's) reads the source both ways and writes the target causally, attending to the
source through cross-attention."""

from __future__ import annotations

from . import _args
from ._canvas import Canvas
from ._render import Diagram, drawing, render
from ._shapes import plain, text_width
from .attention import ALLOWED, HIDDEN

__all__ = ["model_families"]

SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
SOURCE = ("the", "cat", "sleeps")
TARGET = ("el", "gato", "duerme")
MASK = "[MASK]"
CELL = 0.2  # inches, one cell of an attention pattern
LABEL = 0.5  # inches, the widest token that labels a row


def _grid(c: Canvas, x0: float, top: float, rows: int, cols: int, allowed, part: str) -> int:
    """An attention pattern from its top left corner: query positions as rows, key positions as columns; a cell
    "part-i-j" ("allowed-" or "hidden-" after the part's name) for each. Returns how many cells may attend."""
    n = 0
    for i in range(rows):
        for j in range(cols):
            ok = allowed(i, j)
            n += ok
            c.box(
                x0 + (j + 0.5) * CELL,
                top - (i + 0.5) * CELL,
                CELL - 0.03,
                CELL - 0.03,
                "",
                ALLOWED if ok else HIDDEN,
                part=f"{part}_{'allowed' if ok else 'hidden'}",
                index=(i, j),
                lw=0.5,
                edge="#9a9a9a",
            )
    return n


def _rows(c: Canvas, x: float, top: float, tokens, part: str) -> None:
    """The tokens that label a grid's rows, right-aligned at x."""
    for i, token in enumerate(tokens):
        c.text(x, top - (i + 0.5) * CELL, plain(token), ha="right", part=part, index=i)


def _predictions(c: Canvas, x: float, top: float, predicted: dict[int, str], part: str) -> None:
    """What the rows predict ("→ token"), left-aligned at x, beside the rows that predict one."""
    for i, token in predicted.items():
        c.text(x, top - (i + 0.5) * CELL, f"→ {plain(token)}", ha="left", part=part, index=i)


def _labels(name: str, value: object, least: int, most: int) -> list[str]:
    found = _args.tokens(name, value, most)
    if len(found) < least:
        raise ValueError(f"{name} has {len(found)} tokens: give at least {least}")
    for token in found:
        if text_width(plain(token)) > LABEL:
            raise ValueError(f"{name}: the token {token!r} is too long to label a row of the diagram")
    return found


def _encoder_decoder(c: Canvas, sx: float, top: float, tokens: tuple) -> tuple[int, int, int, float, float]:
    """The encoder-decoder's patterns, placed from the decoder's self-attention's left edge sx and the encoder's
    top: the encoder's grid above the cross-attention's columns (the same source positions), the decoder's two
    grids side by side, their rows the target's positions. tokens: (source, the decoder's inputs, the target).
    Returns the cells each grid lets through (encoder, decoder self, cross), the cross grid's left edge and the
    height under the decoder's grids for their names."""
    src, decoder, tgt = tokens
    s, t = len(src), len(decoder)
    xx = sx + t * CELL + 0.12  # the cross-attention, under the encoder's pattern
    dtop = top - s * CELL - 0.4
    _rows(c, xx - 0.06, top, src, "source_token")
    encoder = _grid(c, xx, top, s, s, lambda i, j: True, "encoder")
    c.text(xx + s * CELL + 0.08, top - s * CELL / 2, "encoder", ha="left")
    c.arrow(
        (xx + s * CELL / 2, top - s * CELL - 0.04),
        (xx + s * CELL / 2, dtop + 0.04),
        label="keys, values",
        label_side="left",
    )
    _rows(c, sx - 0.06, dtop, decoder, "target_token")
    self_ = _grid(c, sx, dtop, t, t, lambda i, j: j <= i, "decoder_self")
    cross = _grid(c, xx, dtop, t, s, lambda i, j: True, "decoder_cross")
    _predictions(c, xx + s * CELL + 0.06, dtop, dict(enumerate(tgt)), "target_prediction")
    return encoder, self_, cross, xx, dtop - t * CELL - 0.13


@drawing
def model_families(sentence=SENTENCE, masked: int = 2, source_tokens=SOURCE, target_tokens=TARGET) -> Diagram:
    """Three columns, one per family, each with its attention pattern (rows: the positions that read, queries;
    columns: the positions read, keys). Encoder-only, BERT ("bert-allowed-i-j", ...): ``sentence`` with word
    ``masked`` (from 0) replaced by [MASK], every position sees every position, and the masked one predicts the
    word. Decoder-only, GPT ("gpt-allowed-i-j", "gpt-hidden-i-j"): the sentence less its last word, each position
    sees itself and the past, and predicts the next word. Encoder-decoder: the encoder's full pattern over the
    source ("encoder-allowed-i-j"), the decoder's causal one over <bos> and the target ("decoder-self-..."), and
    its cross-attention, every target position to every source position ("decoder-cross-...")."""
    words = _labels("sentence", sentence, 2, 6)
    masked = _args.count("masked", masked, 0, len(words) - 1)
    src = _labels("source_tokens", source_tokens, 1, 3)
    tgt = _labels("target_tokens", target_tokens, 1, 3)
    bert = [MASK if i == masked else w for i, w in enumerate(words)]
    gpt = words[:-1]
    decoder = ["<bos>", *tgt[:-1]]

    s, t = len(src), len(decoder)
    block = (s + t) * CELL + 0.65  # the encoder-decoder's patterns, the arrow between them and their names
    tall = max(block, len(bert) * CELL)
    c = Canvas(7.0, tall + 1.85)
    top = c.height - 0.95  # the top edge of the tallest attention patterns
    # Each column's left edge (its row labels), from the widths of what it holds.
    widths = (
        LABEL + 0.08 + len(bert) * CELL + 0.5,
        LABEL + 0.08 + len(gpt) * CELL + 0.55,
        LABEL + 0.08 + (len(tgt) + len(src)) * CELL + 0.12 + 0.75,
    )
    gap = (c.width - sum(widths)) / 4
    lefts = [gap, 2 * gap + widths[0], 3 * gap + widths[0] + widths[1]]
    heads = (
        ("encoder-only: BERT", "bidirectional self-attention", "predicts the masked word"),
        ("decoder-only: GPT", "causal self-attention", "predicts the next token"),
        ("encoder-decoder: chapter 8", "encoder reads, decoder writes", "translates the source"),
    )
    for left, width, (title, attention, task) in zip(lefts, widths, heads):
        cx = left + width / 2
        c.text(cx, c.height - 0.2, title, fontsize=10, weight="bold")
        c.text(cx, c.height - 0.45, attention)
        c.text(cx, c.height - 0.68, task, style="italic")

    # Encoder-only: every position sees every position; the masked one predicts its word.
    gx, gtop = lefts[0] + LABEL + 0.08, top - (tall - len(bert) * CELL) / 2
    _rows(c, gx - 0.06, gtop, bert, "bert_token")
    full = _grid(c, gx, gtop, len(bert), len(bert), lambda i, j: True, "bert")
    _predictions(c, gx + len(bert) * CELL + 0.06, gtop, {masked: words[masked]}, "bert_prediction")

    # Decoder-only: each position sees itself and the past, and predicts the next word.
    gx, gtop = lefts[1] + LABEL + 0.08, top - (tall - len(gpt) * CELL) / 2
    _rows(c, gx - 0.06, gtop, gpt, "gpt_token")
    causal = _grid(c, gx, gtop, len(gpt), len(gpt), lambda i, j: j <= i, "gpt")
    _predictions(c, gx + len(gpt) * CELL + 0.06, gtop, dict(enumerate(words[1:])), "gpt_prediction")

    # Encoder-decoder: the encoder's full pattern above the cross-attention's columns (the same source positions),
    # and the decoder's two patterns side by side, their rows the target's positions.
    top -= (tall - block) / 2
    sx = lefts[2] + LABEL + 0.08  # the decoder's self-attention
    encoder, self_, cross, xx, under = _encoder_decoder(c, sx, top, (src, decoder, tgt))
    c.text(sx + t * CELL / 2, under, "causal")
    c.text(xx + s * CELL / 2, under, "cross")

    # What the patterns say, under them, and what their colours mean.
    captions = (
        "every position sees\nevery position",
        "each position sees\nonly the past",
        "encoder: the whole source;\ndecoder: its past + the source",
    )
    for left, width, caption in zip(lefts, widths, captions):
        c.text(left + width / 2, 0.58, caption)
    y = 0.2
    c.box(0.3, y, 0.16, 0.16, kind=ALLOWED, lw=0.5, edge="#9a9a9a")
    c.text(0.43, y, "may attend", ha="left")
    c.box(1.55, y, 0.16, 0.16, kind=HIDDEN, lw=0.5, edge="#9a9a9a")
    c.text(1.68, y, "hidden (a later position)", ha="left")
    c.text(c.width - 0.1, y, "rows: the positions that read; columns: those read", ha="right")

    alt = (
        "The three families of Transformer, each with its attention pattern (rows: the positions that read, "
        f"columns: those read). Encoder-only, like BERT: bidirectional self-attention over '{' '.join(bert)}', "
        f"every position sees every position ({full} of {len(bert) ** 2} cells), and the masked position predicts "
        f"'{words[masked]}'. Decoder-only, like GPT: causal self-attention over '{' '.join(gpt)}', each position "
        f"sees only itself and the past ({causal} of {len(gpt) ** 2} cells) and predicts the next token, "
        f"'{' '.join(words[1:])}'. Encoder-decoder, the original Transformer of chapter 8: the encoder reads the "
        f"source '{' '.join(src)}' bidirectionally ({encoder} of {s * s} cells); the decoder writes the target "
        f"'{' '.join(tgt)}' causally ({self_} of {t * t} cells) and, through cross-attention, every target "
        f"position sees every source position ({cross} of {t * s} cells)."
    )
    return render(c, alt)
