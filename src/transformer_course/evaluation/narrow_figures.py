"""Every plot of the book drawn twice: as the notebook lays it out, and again for a phone's column.

On a 400 px phone the book's column is 368 px wide, and a plot of 570 to 1,190 px shrunk into it has labels of 5 to
9 px. Shrinking the image cannot help, so the same figure is laid out again at the column's width with its text at
the same size: side-by-side panels stacked in one column (small multiples two a row), legends that stood beside
a panel moved inside it. The book shows one or the other by the page's width (course.css; the page's renderer is
authoring/narrow_outputs.py).

The phone's copy travels with the notebook's output, in its metadata (evaluation/figure_formatter.py).
"""

from __future__ import annotations

import io
import pickle
import struct
import textwrap
import warnings
from typing import cast

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec, SubplotSpec
from matplotlib.layout_engine import ConstrainedLayoutEngine

NARROW_PX = 360  # the widest phone copy, in CSS pixels: a 400 px phone's column is 368 px
DPI = 100  # the inline backend's: text keeps the size it has in the notebook (10 pt = 14 px)
SMALL_PANEL_IN = 2.4  # a panel narrower than this (small multiples) shares a row with another on a phone


def png_width(png: bytes) -> int:
    """The width in pixels written in a PNG's header (its IHDR chunk)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG image")
    return int(struct.unpack(">I", png[16:20])[0])


def _renderer(fig: Figure):
    """The figure's renderer: its canvas is Agg's (``narrow_png`` gives its copy one)."""
    return cast(FigureCanvasAgg, fig.canvas).get_renderer()


def _render(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the layout engine's notes ("not applied"): the width check is the judge
        warnings.simplefilter("ignore")
        fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
    return buffer.getvalue()


def _panels(fig: Figure) -> list[list] | None:
    """The figure's panels: its axes grouped by the cell of the figure's grid they sit in (a colour bar made
    beside its axes shares that cell), in reading order; None for a figure not laid out on a grid. An empty cell
    of the grid (axis off, nothing drawn) is left out: on a phone it would be a gap."""
    groups: dict[tuple, list] = {}
    for ax in fig.axes:
        if not ax.axison and not (ax.images or ax.lines or ax.patches or ax.collections or ax.texts):
            ax.remove()
            continue
        spec = ax.get_subplotspec()
        if spec is None:
            if _is_bar(ax):
                continue  # a colour bar placed by the layout engine travels with its axes
            return None  # placed by hand (add_axes): this figure keeps its layout
        top = spec.get_topmost_subplotspec()
        key = (id(top.get_gridspec()), top.rowspan.start, top.colspan.start, top.rowspan.stop, top.colspan.stop)
        groups.setdefault(key, []).append(ax)
    return [groups[key] for key in sorted(groups, key=lambda k: (k[1], k[2]))]


def _move(axes: list, cell: SubplotSpec) -> list:
    """Put one panel in ``cell`` of the new grid. A colour bar made in a grid inside the panel's cell
    (make_axes_gridspec, what plt.colorbar does without a layout engine) is removed: the layout engine draws it
    again beside its axes (``_bars_again``), which it cannot do for a grid inside a grid. Returns those bars."""
    bars = []
    for ax in axes:
        bar = getattr(ax, "_colorbar", None)
        if bar is None:
            continue
        label = bar.ax.get_ylabel() if bar.orientation == "vertical" else bar.ax.get_xlabel()
        owner = next(a for a in axes if ax in getattr(a, "_colorbars", ()))
        bars.append((bar.mappable, owner, bar.orientation, label))
        owner._colorbars.remove(ax)
        ax.remove()
    for ax in axes:
        if not _is_bar(ax):
            ax.set_subplotspec(cell)
    return bars


def _bars_again(fig: Figure, bars: list) -> None:
    for mappable, owner, orientation, label in bars:
        fig.colorbar(mappable, ax=owner, orientation=orientation, label=label or None)


def _legend_parts(legend) -> dict:
    return {
        "handles": legend.legend_handles,
        "labels": [text.get_text() for text in legend.texts],
        "title": legend.get_title().get_text() or None,
        "fontsize": legend.texts[0].get_fontsize() if legend.texts else None,
    }


def _legends_for_phone(fig: Figure, panels: list[list]) -> float:
    """Legends that fit a phone. A legend of two entries or more on a one-panel plot, or of three or more on one
    panel of several, would cover half of a phone-sized plot: it goes below the figure (constrained layout's
    "outside" placement), two entries a row where the labels are short. Any other legend anchored outside its
    axes (beside or below the plot) goes inside, where the plot has room, in one column. A legend is made again
    for that: its layout is fixed when it is made. Returns the height the legend below needs, in inches."""
    legends = [(ax, ax.get_legend()) for axes in panels for ax in axes if ax.get_legend() is not None]
    big = [ax for ax, legend in legends if len(legend.texts) >= (2 if len(panels) == 1 else 3)]
    needed = 0.0
    for ax, legend in legends:
        parts = _legend_parts(legend)
        if len(big) == 1 and ax is big[0]:
            legend.remove()
            columns = 2 if max(map(len, parts["labels"])) <= 18 else 1
            fig.legend(**parts, loc="outside lower center", ncols=columns)
            needed += 0.25 * (-(-len(parts["labels"]) // columns) + (parts["title"] is not None)) + 0.2
        elif legend.get_bbox_to_anchor() is not ax.bbox or legend._ncols > 1:
            legend.remove()
            ax.legend(**parts, loc="best", ncols=1)
    return needed


def _is_bar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _shape(fig: Figure, axes: list) -> tuple[float, float, float, float]:
    """A panel's width in the notebook's figure, and what its height on a phone follows from, all in inches:
    (width, height over drawn width, width not drawn on, height of its labels). An image drawn with equal aspect
    (an attention map) has its data's shape, and its colour bar and y axis's labels take width from it; a plot has
    its cell's shape within limits (a flat strip or a tall column reads badly on a phone)."""
    top = axes[0].get_subplotspec().get_topmost_subplotspec()
    grid = top.get_gridspec()
    fig_w, fig_h = fig.get_size_inches()
    width = fig_w / grid.ncols * len(top.colspan)
    main = next((ax for ax in axes if not _is_bar(ax)), axes[0])
    bar = 0.6 * any(_is_bar(ax) for ax in axes)
    labels = 0.7 if main.axison else 0.3  # a title and the x axis's labels, or a title alone
    if main.get_aspect() != "auto" and main.images:
        (x0, x1), (y0, y1) = main.get_xlim(), main.get_ylim()
        ratio = min(max(abs(y1 - y0) / abs(x1 - x0) * float(main.get_aspect()), 0.3), 1.6)
        return width, ratio, bar + (0.8 if main.axison else 0.0), labels
    height = fig_h / grid.nrows * len(top.rowspan)
    return width, min(max(height / width, 0.62), 0.9), bar, labels


def _wrap(text: str, chars: int) -> str:
    """``text`` in lines of at most ``chars`` characters, never breaking inside $...$ (mathtext)."""
    parts = text.split("$")
    for i in range(1, len(parts), 2):  # the odd parts are mathematics: their spaces do not break
        parts[i] = parts[i].replace(" ", "\0")
    lines = textwrap.wrap("$".join(parts), max(chars, 8), break_long_words=False)
    return "\n".join(lines).replace("\0", " ")


def _wrap_texts(fig: Figure, most: int) -> bool:
    """Titles wider than their axes (which a colour bar beside them would cover), and axis labels and legend
    entries wider than the phone's column, in two or more lines. The figure must have been drawn. Returns whether
    it changed any."""
    changed = False
    renderer = _renderer(fig)
    suptitle = getattr(fig, "_suptitle", None)  # matplotlib keeps the artist private (get_suptitle: its text)
    texts = [(suptitle, 0.9 * most)] if suptitle is not None else []
    for ax in fig.axes:
        room = max(ax.get_window_extent(renderer).width * 1.05, 0.5 * most)
        sides = [getattr(ax, name) for name in ("_left_title", "_right_title")]  # set_title(loc="left"), "right"
        texts += [(ax.title, room), *((side, room) for side in sides), (ax.xaxis.label, 0.9 * most)]
    for legend in [ax.get_legend() for ax in fig.axes] + fig.legends:
        if legend is not None:
            texts += [(text, 0.8 * most) for text in (legend.get_title(), *legend.get_texts())]
    for text, limit in texts:
        content = text.get_text()
        width = text.get_window_extent(renderer).width
        if "\n" in content or width <= limit:
            continue
        text.set_text(_wrap(content, int(len(content) * limit / width)))
        changed = True
    return changed


def _unclash_ticks(fig: Figure) -> bool:
    """x tick labels that overlap in the narrower panel (a bar chart's categories) are turned to 45 degrees. The
    figure must have been drawn. Returns whether it turned any."""
    renderer = _renderer(fig)
    changed = False
    for ax in fig.axes:
        labels = [label for label in ax.get_xticklabels() if label.get_visible() and label.get_text()]
        boxes = sorted((label.get_window_extent(renderer) for label in labels), key=lambda box: box.x0)
        if any(left.x1 > right.x0 for left, right in zip(boxes, boxes[1:])):
            for label in labels:
                label.set_rotation(45)
                label.set_horizontalalignment("right")
                label.set_rotation_mode("anchor")
            changed = True
    return changed


def _places(panels: list[list], columns: int) -> list[tuple[int, int]]:
    """(row, column) of each panel on the phone: in reading order, a row of the notebook's grid starting a row of
    its own (small multiples keep their rows: one example's steps stay together)."""
    places: list[tuple[int, int]] = []
    row, column, last = -1, columns, None
    for axes in panels:
        start = axes[0].get_subplotspec().get_topmost_subplotspec().rowspan.start
        if start != last or column == columns:
            row, column = row + 1, 0
        places.append((row, column))
        column, last = column + 1, start
    return places


def _regrid(fig: Figure, panels: list[list], places: list[tuple[int, int]], columns: int) -> GridSpec:
    """Move the panels onto a grid of ``columns`` columns, at ``places``."""
    grid = GridSpec(places[-1][0] + 1, columns, figure=fig)
    bars = [bar for axes, (r, c) in zip(panels, places, strict=True) for bar in _move(axes, grid[r, c])]
    if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        # constrained layout spaces titles, labels and colour bars (tight_layout's placement overlapped them); a
        # colour bar placed by hand that it cannot take over raises ValueError, and that figure keeps its layout
        fig.set_layout_engine("constrained")
    _bars_again(fig, bars)
    return grid


def _resize(fig: Figure, grid: GridSpec, shapes: list, places: list, width: float, extra: float) -> None:
    """Size the figure ``width`` inches wide, each row as tall as its panels need (``_shape``), and ``extra``
    inches more for a legend below."""
    panel_w = width / grid.ncols
    rows = [0.0] * grid.nrows
    for (_, ratio, margin, labels), (r, _) in zip(shapes, places, strict=True):
        rows[r] = max(rows[r], (panel_w - margin) * ratio + labels)
    grid.set_height_ratios(rows)
    fig.set_size_inches(width, sum(rows) + extra)


def _crowded_numbers(fig: Figure) -> bool:
    """Numbers written in the cells of a map (attention_heatmap's) that no longer fit their cells are taken out: the
    colours still show the weights. Returns whether it took any out."""
    renderer, changed = _renderer(fig), False
    for ax in fig.axes:
        data = ax.images[0].get_array() if ax.images else None
        if data is None or not ax.texts:
            continue
        cell = ax.get_window_extent(renderer).width / data.shape[1]
        if any(t.get_visible() and t.get_window_extent(renderer).width > 0.95 * cell for t in ax.texts):
            for text in ax.texts:
                text.set_visible(False)
            changed = True
    return changed


def narrow_png(fig: Figure, most: int = NARROW_PX) -> bytes | None:
    """The figure laid out again at most ``most`` pixels wide, as a PNG; None where it cannot be (a figure placed by
    hand, one that cannot be copied, or one whose text does not fit that width). The figure itself is untouched."""
    if not fig.axes:
        return None
    try:
        copy = pickle.loads(pickle.dumps(fig))
    except Exception:  # noqa: BLE001  (a figure holding something unpicklable: it keeps its one layout)
        return None
    FigureCanvasAgg(copy)  # a canvas that draws off screen whatever the backend, and measures text
    try:
        panels = _panels(copy)
        if panels is None:
            return None
        shapes = [_shape(copy, axes) for axes in panels]
        columns = 2 if len(panels) > 2 and max(shape[0] for shape in shapes) < SMALL_PANEL_IN else 1
        places = _places(panels, columns)
        try:
            grid = _regrid(copy, panels, places, columns)
        except ValueError:
            return None
        extra = _legends_for_phone(copy, panels)
        width = (most - 15) / DPI  # constrained layout's padding and the tight crop add about 10 px
        for attempt in range(4):
            _resize(copy, grid, shapes, places, width, extra)
            png = _render(copy)
            # laid out and drawn now, labels and titles have their places and sizes
            if _unclash_ticks(copy) | _crowded_numbers(copy) | (attempt == 0 and _wrap_texts(copy, most)):
                png = _render(copy)
            if png_width(png) <= most:
                return png
            # tick labels and colour bars do not shrink with the figure: give them the excess, and more
            width = max(width - 1.5 * (png_width(png) - most) / DPI, 2.0)
        # a few pixels over: the page shrinks it that little (text at 90 % of its size or more)
        return png if png_width(png) <= most * 1.1 else None
    finally:
        import matplotlib.pyplot as plt

        plt.close(copy)  # a copy of a pyplot figure registers itself with pyplot: never show it
