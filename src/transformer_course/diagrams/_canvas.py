"""The drawing surface every diagram shares: one colour per kind of block, boxes, circles, arrows and labels.

A ``Canvas`` is a matplotlib figure whose single axes fills it, with data coordinates in inches (x from 0 to the
width, y from 0 to the height, origin at the bottom left), so that sizes, gaps and font sizes all read in the same
unit. Every element a test counts is drawn with ``part=`` (and ``index=``): its ``gid`` becomes the ``id`` of its
group in the SVG (``part="encoder_layer", index=3`` gives ``id="encoder-layer-3"``) and ``canvas.parts`` counts it.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path
from matplotlib.text import Text

from ._shapes import SMALL, Box, fits, plain

MAX_WIDTH = 7.0  # inches: the book's content column, so the SVG is shown at its natural size
FONT = 10  # points, labels of blocks
# A phone's copy: a 400 px phone's column is 368 px (at 96 px an inch), and its text is no smaller than the book's
# footnotes (13 px): 10 pt is 13.3 px.
NARROW = 3.75  # inches, 360 px
NARROW_SMALL = 10  # points

# One fill per kind of block, the same in every diagram (light, so black text stays readable on each).
COLOURS = {
    "input": "#ececec",  # tokens and input vectors
    "state": "#e2d9f3",  # vectors computed on the way: hidden states, contexts, Q, K, V, cache rows
    "embedding": "#f8cdd6",  # token embeddings and positional encodings
    "recurrent": "#cde8c3",  # recurrent cells, their gates and nonlinearities
    "attention": "#fcd9a8",  # attention: scores, projections W_Q, W_K, W_V, W_O, heads
    "feedforward": "#c7e0f5",  # position-wise feed-forward networks
    "norm": "#f2eea6",  # layer norms and residual additions
    "softmax": "#bde5dc",  # softmaxes and the output layer over the vocabulary
    "layer": "#f6f6f6",  # a frame around a whole layer
    "plain": "#ffffff",  # operators: sums and products
}
INK = "#303030"
HIGHLIGHT = "#c0392b"  # the one path a diagram is about: a bottleneck, the cell state, the best hypothesis
FADED = 0.3  # opacity of what was discarded (pruned hypotheses)
KINDS = tuple(COLOURS)

_PHONE: ContextVar[bool] = ContextVar("phone", default=False)


def narrow() -> bool:
    """Whether the diagram being drawn is the phone's copy (a function that draws both layouts asks)."""
    return _PHONE.get()


@contextlib.contextmanager
def phone_copy() -> Iterator[None]:
    """Draw the phone's copy: canvases at most NARROW wide, no text under NARROW_SMALL points."""
    token = _PHONE.set(True)
    try:
        yield
    finally:
        _PHONE.reset(token)


class Canvas:
    """A figure of ``width`` x ``height`` inches to draw one diagram on (see the module's docstring)."""

    def __init__(self, width: float, height: float) -> None:
        self.phone = narrow()
        most = NARROW if self.phone else MAX_WIDTH
        if width > most + 1e-9:  # a programming error of a diagram, not a user's: callers size themselves
            raise AssertionError(f"a diagram of {width:.2f} in is wider than the column's {most} in")
        self.small = NARROW_SMALL if self.phone else SMALL  # points: the smallest text drawn
        self.width, self.height = width, height
        # A bare Figure, not pyplot's: the notebook's inline backend never sees it, so the cell shows the SVG
        # only, not a PNG copy too, and nothing stays open to close.
        self.fig = Figure(figsize=(width, height))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()
        self.parts: Counter[str] = Counter()
        self.boxes: list[tuple[Box, Text | None, bool]] = []  # (box, its label or None, is a frame around others)
        self.texts: list[Text] = []  # free texts, not the labels of boxes
        self.paths: list[tuple[list[tuple[float, float]], Text | None]] = []  # (points, its label or None)
        self._ids: set[str] = set()

    def size(self, points: float) -> float:
        """A font size as drawn: on a phone, no smaller than NARROW_SMALL."""
        return max(points, self.small)

    def _tag(self, artist, part: str | None, index: object) -> None:
        if part is None:
            return
        if isinstance(index, tuple):
            index = "-".join(map(str, index))
        gid = part.replace("_", "-") + ("" if index is None else f"-{index}")
        if gid in self._ids:
            raise AssertionError(f"two elements of one diagram have the id {gid!r}")
        self._ids.add(gid)
        artist.set_gid(gid)
        self.parts[part] += 1

    def box(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        label: str = "",
        kind: str = "input",
        *,
        part: str | None = None,
        index: object = None,
        fontsize: float = FONT,
        edge: str = INK,
        lw: float = 1.0,
        alpha: float = 1.0,
        frame: bool = False,
        linestyle: str = "-",
    ) -> Box:
        """A rounded box centred at (x, y), filled with its kind's colour, with a centred label. A ``frame`` holds
        other boxes (a layer around its sub-layers): the layout checks let those overlap it."""
        r = min(0.06, h / 4, w / 4)  # the rounding, kept inside the given size
        patch = FancyBboxPatch(
            (x - w / 2 + r, y - h / 2 + r),
            w - 2 * r,
            h - 2 * r,
            boxstyle=f"round,pad={r}",
            facecolor=COLOURS.get(kind, kind),  # a kind, or a colour of its own (a mask's cells)
            edgecolor=edge,
            linewidth=lw,
            alpha=alpha,
            linestyle=linestyle,
            zorder=1 if frame else 3,
        )
        self.ax.add_patch(patch)
        self._tag(patch, part, index)
        text = None
        if label:
            text = self.ax.text(
                x, y, label, ha="center", va="center", fontsize=self.size(fontsize), color=INK, zorder=4
            )
            text.set_alpha(alpha)
        b = Box(x, y, w, h)
        self.boxes.append((b, text, frame))
        return b

    def circle(
        self,
        x: float,
        y: float,
        symbol: str,
        r: float = 0.13,
        kind: str = "plain",
        *,
        part: str | None = None,
        index: object = None,
    ) -> Box:
        """An operator (a sum or an elementwise product) as a small circle with its symbol."""
        patch = Circle((x, y), r, facecolor=COLOURS[kind], edgecolor=INK, linewidth=1.0, zorder=3)
        self.ax.add_patch(patch)
        self._tag(patch, part, index)
        self.ax.text(x, y, symbol, ha="center", va="center", fontsize=self.size(FONT + 1), color=INK, zorder=4)
        # The layout checks see the square inside the circle: an arrow meeting it at a slant is not "through" it.
        self.boxes.append((Box(x, y, 1.4 * r, 1.4 * r), None, False))
        return Box(x, y, 2 * r, 2 * r)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        *,
        ha: str = "center",
        va: str = "center",
        fontsize: float = SMALL,
        color: str = INK,
        weight: str = "normal",
        style: str = "normal",
        alpha: float = 1.0,
        rotation: float = 0,
        part: str | None = None,
        index: object = None,
    ):
        """A free label (a title, a shape, a note): checked not to overlap boxes, other labels or arrows."""
        t = self.ax.text(
            x,
            y,
            s,
            ha=ha,
            va=va,
            fontsize=self.size(fontsize),
            color=color,
            weight=weight,
            style=style,
            rotation=rotation,
        )
        t.set_alpha(alpha)
        t.set_zorder(4)
        self._tag(t, part, index)
        self.texts.append(t)
        return t

    def arrow(
        self,
        *points: tuple[float, float],
        part: str | None = None,
        index: object = None,
        label: str | None = None,
        label_side: str = "right",
        label_segment: int | None = None,
        color: str = INK,
        lw: float = 1.2,
        head: bool = True,
        alpha: float = 1.0,
        linestyle: str = "-",
    ) -> None:
        """An arrow through ``points`` (a straight arrow for two, a polyline for more), its head at the last.
        ``label`` (a tensor's shape, a name) goes beside the middle of its longest segment (or of segment number
        ``label_segment``): to the right of a vertical one (``label_side="left"``: the other side), above a
        horizontal one."""
        pts = [(float(x), float(y)) for x, y in points]
        codes = [Path.MOVETO] + [Path.LINETO] * (len(pts) - 1)
        patch = FancyArrowPatch(
            path=Path(pts, codes),
            arrowstyle="-|>" if head else "-",
            mutation_scale=10,
            color=color,
            linewidth=lw,
            alpha=alpha,
            linestyle=linestyle,
            zorder=2,
        )
        self.ax.add_patch(patch)
        self._tag(patch, part, index)
        text = None
        if label:
            segments = list(zip(pts, pts[1:]))
            longest = max(segments, key=lambda s: abs(s[1][0] - s[0][0]) + abs(s[1][1] - s[0][1]))
            (x0, y0), (x1, y1) = longest if label_segment is None else segments[label_segment]
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            if abs(x1 - x0) < abs(y1 - y0):  # vertical: the label beside it
                side = 1 if label_side == "right" else -1
                text = self.ax.text(
                    mx + 0.07 * side, my, label, ha="left" if side > 0 else "right", va="center", fontsize=self.small
                )
            else:  # horizontal: the label above it
                text = self.ax.text(mx, my + 0.05, label, ha="center", va="bottom", fontsize=self.small)
            text.set_color(INK)
            text.set_zorder(4)
            self.texts.append(text)
        self.paths.append((pts, text))

    def tokens(
        self,
        xs: list[float],
        y: float,
        w: float,
        h: float,
        tokens: list[str],
        kind: str = "input",
        *,
        below: bool = True,
        part: str,
        first: int = 1,
        slant: bool | None = None,
    ) -> list[Box]:
        """A row of tokens in boxes of w x h centred at (xs[i], y) ("part-i", i from ``first``). If one is too long
        for its box, the whole row is written at a slant instead, without boxes: hanging from where the boxes'
        tops would be (``below``: inputs, read by the arrows above them) or standing on their bottoms (outputs).
        ``slant`` decides it for rows that share a line."""
        boxes = [Box(x, y, w, h) for x in xs]
        if slant is None:
            slant = not fits(tokens, w, self.small)
        if not slant:
            return [
                self.box(x, y, w, h, plain(t), kind, part=part, index=i)
                for i, (x, t) in enumerate(zip(xs, tokens), first)
            ]
        for i, (x, t) in enumerate(zip(xs, tokens), first):
            if below:
                self.text(x + 0.05, y + h / 2 - 0.04, plain(t), ha="right", va="top", rotation=35, part=part, index=i)
            else:
                self.text(x - 0.05, y - h / 2 + 0.04, plain(t), ha="left", va="bottom", rotation=35, part=part, index=i)
        return boxes

    def legend(self, x: float, y: float, entries: list[tuple[str, str]], *, dy: float = 0.26) -> None:
        """Swatches from (x, y) downwards: ``entries`` are (kind, what it means)."""
        for i, (kind, meaning) in enumerate(entries):
            self.box(x + 0.1, y - i * dy, 0.2, 0.16, kind=kind)
            self.text(x + 0.28, y - i * dy, meaning, ha="left")
