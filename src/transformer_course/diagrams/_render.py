"""A canvas rendered to SVG text that is the same, byte for byte, on every run, and the ``Diagram`` that holds it.

Notebooks are checked by comparing their SVG outputs as text between runs, so nothing in the SVG may vary: the
ids matplotlib derives from hashes use a fixed salt, the date is left out, text stays text (``svg.fonttype`` none:
no glyph outlines whose ids would depend on the fonts' files), and every diagram is drawn under matplotlib's
default settings plus ours, whatever a notebook set before. Rendering also checks the layout: labels that leave
their box or the figure, labels that overlap, arrows through boxes or labels; ``Diagram.problems`` lists them.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from itertools import combinations

from matplotlib import rc_context, style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from ._canvas import Canvas, narrow, phone_copy
from ._shapes import Box

RC = {
    "svg.hashsalt": "transformer-course-diagrams",
    "svg.fonttype": "none",
    # Measured with DejaVu Sans (matplotlib's own font); a browser without it falls back to its own sans-serif.
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "mathtext.fontset": "dejavusans",
    "text.usetex": False,
}
# Where a diagram's phone copy travels with the notebook's output: metadata["image/svg+xml"][KEY], the key the
# plots' copies use (evaluation/figure_formatter.py), which the book's plugin reads (authoring/narrow_outputs.py).
KEY = "transformer_course/narrow"
# The phone's layout of each diagram: its name -> a function of the same arguments that draws a Canvas (the
# _narrow_*.py modules), or the diagram's own function where it draws both layouts (it asks ``narrow()``).
LAYOUTS: dict[str, Callable[..., Canvas]] = {}


class Diagram:
    """A rendered diagram: ``svg`` (its text), ``alt`` (what it shows, in words), ``parts`` (what was drawn, counted:
    {"encoder_layer": 6, ...}), its size in inches and the layout ``problems`` found (empty when it is clean).

    ``narrow`` is the same diagram laid out for a phone's column (at most 3.75 in, 360 px: panels stacked, rows
    wrapped, text of 10 pt or more), with the same ids and alt text; it is drawn when first asked for.

    A notebook cell that ends with a diagram shows the SVG (``_repr_mimebundle_``), its phone copy in the output's
    metadata, which Jupyter and nbval ignore and the book shows below 600 px."""

    def __init__(self, svg: str, alt: str, parts: dict[str, int], size: tuple[float, float], problems: list[str]):
        self.svg = svg
        self.alt = alt
        self.parts = parts
        self.width, self.height = size
        self.problems = tuple(problems)
        self._narrow: Callable[[], Diagram] | Diagram | None = None  # set by @drawing: draws the phone's copy

    @property
    def narrow(self) -> Diagram | None:
        """The phone's copy (None for a copy that is one already, or a diagram with no phone layout)."""
        made = self._narrow
        if made is None or isinstance(made, Diagram):
            return made
        self._narrow = made()  # drawn once, when first asked for
        return self._narrow

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"image/svg+xml": self.svg, "text/plain": repr(self)}
        narrow = self.narrow
        return data, ({"image/svg+xml": {KEY: narrow.svg}} if narrow is not None else {})

    def __repr__(self) -> str:  # a notebook's text/plain output: the alt text
        return f"<Diagram: {self.alt}>"

    def save(self, path) -> None:
        """Write the SVG to a file (for the book's static pages)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)


__all__ = ["KEY", "LAYOUTS", "Diagram", "drawing", "narrow", "narrow_layout", "render"]


def narrow_layout(name: str):
    """Register the decorated function as the phone's layout of the diagram ``name`` (see LAYOUTS)."""

    def register(layout: Callable[..., Canvas]) -> Callable[..., Canvas]:
        LAYOUTS[name] = layout
        return layout

    return register


def drawing(function):
    """Draw under fixed settings: matplotlib's defaults and ours, so a notebook's own rcParams change nothing. The
    Diagram's phone copy is drawn from the same arguments when asked for: by ``LAYOUTS[name]`` where one is
    registered, otherwise by the function itself, which asks ``narrow()``."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with style.context("default"), rc_context(RC):
            diagram = function(*args, **kwargs)

        def phone() -> Diagram:
            # RC's keys are rcParams' names (matplotlib's stubs want them typed as its literal names)
            with style.context("default"), rc_context(RC), phone_copy():  # type: ignore[arg-type]
                drawn = LAYOUTS.get(function.__name__, function)(*args, **kwargs)
                return drawn if isinstance(drawn, Diagram) else render(drawn, diagram.alt)

        if function.__name__ in LAYOUTS:
            diagram._narrow = phone
        return diagram

    return wrapper


def render(canvas: Canvas, alt: str) -> Diagram:
    """The canvas as a Diagram. Labels too wide for their box are set smaller first, down to the canvas's smallest
    size (SMALL points; NARROW_SMALL on a phone)."""
    alt = " ".join(alt.split())
    extent = _extents(canvas)
    # A label's size is in points, as Canvas sets it (matplotlib's stubs allow a name such as "large" too).
    for box, label, _ in canvas.boxes:
        while (
            label is not None
            and label.get_fontsize() > canvas.small  # type: ignore[operator]
            and not _inside(extent(label), box.rect, 0.04)
        ):
            label.set_fontsize(label.get_fontsize() - 0.5)  # type: ignore[operator]
    problems = _problems(canvas, extent)
    buffer = io.StringIO()
    # The title is the alt text: screen readers read it from an SVG shown inline.
    metadata = {"Date": None, "Creator": "transformer_course.diagrams", "Title": alt}
    canvas.fig.savefig(buffer, format="svg", metadata=metadata)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :].replace("<svg ", '<svg role="img" ', 1)  # no XML prologue: it is shown inline
    return Diagram(svg, alt, dict(canvas.parts), (canvas.width, canvas.height), problems)


def _extents(canvas: Canvas):
    """A function giving a text's bounding box in the canvas's inches, as (x0, y0, x1, y1)."""
    renderer = FigureCanvasAgg(canvas.fig).get_renderer()
    to_inches = canvas.ax.transData.inverted()

    def extent(text) -> tuple[float, float, float, float]:
        bb = text.get_window_extent(renderer)
        (x0, y0), (x1, y1) = to_inches.transform([(bb.x0, bb.y0), (bb.x1, bb.y1)])
        return (x0, y0, x1, y1)

    return extent


def _inside(inner, outer, margin: float) -> bool:
    return (
        inner[0] >= outer[0] + margin
        and inner[2] <= outer[2] - margin
        and inner[1] >= outer[1] + margin / 2
        and inner[3] <= outer[3] - margin / 2
    )


def _shrunk(rect, by: float):
    return (rect[0] + by, rect[1] + by, rect[2] - by, rect[3] - by)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(p, q, rect) -> bool:
    """Whether the segment p-q passes through the rectangle (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = rect
    if x0 >= x1 or y0 >= y1:
        return False
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for pk, qk in ((-dx, p[0] - x0), (dx, x1 - p[0]), (-dy, p[1] - y0), (dy, y1 - p[1])):
        if pk == 0:
            if qk < 0:
                return False
        elif pk < 0:
            t0 = max(t0, qk / pk)
        else:
            t1 = min(t1, qk / pk)
        if t0 > t1:
            return False
    return True


def _problems(canvas: Canvas, extent) -> list[str]:
    found = []
    a: Text | Box  # two texts, then two boxes
    b: Text | Box
    labels = [(label, box) for box, label, _ in canvas.boxes if label is not None]
    texts = [(t, extent(t)) for t in [label for label, _ in labels] + canvas.texts if t.get_text()]
    solid = [box for box, _, frame in canvas.boxes if not frame]
    for label, box in labels:
        if not _inside(extent(label), box.rect, 0.02):
            found.append(f"label {label.get_text()!r} does not fit its box")
    for t, e in texts:
        if not _inside(e, (0, 0, canvas.width, canvas.height), 0):
            found.append(f"text {t.get_text()!r} is cut off by the figure's edge")
    for (a, ea), (b, eb) in combinations(texts, 2):
        if _overlap(_shrunk(ea, 0.01), _shrunk(eb, 0.01)):
            found.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap")
    for t in canvas.texts:
        if t.get_text() and any(_overlap(_shrunk(extent(t), 0.01), box.rect) for box in solid):
            found.append(f"text {t.get_text()!r} overlaps a box")
    for a, b in combinations(solid, 2):
        if _overlap(_shrunk(a.rect, 0.01), _shrunk(b.rect, 0.01)):
            found.append(f"boxes at ({a.x:.2f}, {a.y:.2f}) and ({b.x:.2f}, {b.y:.2f}) overlap")
    for points, own in canvas.paths:
        for p, q in zip(points, points[1:]):
            for t, e in texts:
                if t is not own and _crosses(p, q, _shrunk(e, 0.01)):
                    found.append(f"an arrow from {p} crosses the text {t.get_text()!r}")
            for box in solid:
                if _crosses(p, q, _shrunk(box.rect, 0.03)):
                    found.append(f"an arrow from {p} to {q} crosses the box at ({box.x:.2f}, {box.y:.2f})")
    return found
