"""Issue 57, item 6: every plot of the book also laid out for a phone's column (evaluation/narrow_figures.py), stored
with the notebook's output by `make execute` and shown by the book on a narrow screen (authoring/narrow_outputs.py).

The browser's side, every chapter page at 400 px, is tests/test_browser_phone.py.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from transformer_course.authoring.narrow_outputs import NarrowFigures
from transformer_course.evaluation import narrow_figures
from transformer_course.evaluation.figure_formatter import KEY
from transformer_course.evaluation.narrow_figures import NARROW_PX, narrow_png, png_width
from transformer_course.evaluation.plots import attention_heatmap


def _side_by_side():
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 3.0))
    for i, ax in enumerate(axes):
        ax.plot(np.arange(50), np.arange(50) ** (i + 1), label=f"curve {i}")
        ax.set_title("a title long enough to be wider than a phone's column when set in ten points")
        ax.set_xlabel("step")
        ax.legend()
    return fig


def _maps_with_colour_bars():
    fig, axes = plt.subplots(2, 2, figsize=(12, 10))
    words = [f"w{i}" for i in range(12)]
    for ax in axes.flat:
        attention_heatmap(torch.rand(12, 12).softmax(-1), words, words, ax=ax, title="a map")
    fig.tight_layout()
    return fig


def _legend_beside():
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for i in range(4):
        ax.plot(np.arange(10) * i, label=f"series {i}")
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def _constrained_with_bars():
    fig, axes = plt.subplots(2, 1, figsize=(8.8, 7.2), layout="constrained")
    for ax in axes:
        fig.colorbar(ax.imshow(np.random.default_rng(0).random((20, 64)), aspect="auto"), ax=ax, label="value")
    return fig


def _small_multiples():
    fig, axes = plt.subplots(4, 5, figsize=(11, 3.6))
    for ax in axes.flat:
        ax.imshow(np.random.default_rng(1).random((8, 8)))
        ax.set_axis_off()
    fig.tight_layout()
    return fig


def _categories():
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.bar([f"{i}-{i + 3}\n({100 * i} sent.)" for i in range(1, 6)], [5, 4, 3, 2, 1])
    return fig


FIGURES = {
    "side by side": _side_by_side,
    "maps with colour bars": _maps_with_colour_bars,
    "a legend beside the plot": _legend_beside,
    "constrained layout, colour bars": _constrained_with_bars,
    "small multiples": _small_multiples,
    "long category labels": _categories,
}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("name", FIGURES)
def test_a_phone_copy_fits_the_column_and_leaves_the_figure_as_it_was(name):
    fig = FIGURES[name]()
    size = tuple(fig.get_size_inches())
    positions = [tuple(ax.get_position().bounds) for ax in fig.axes]
    open_before = plt.get_fignums()
    png = narrow_png(fig)
    assert png is not None, f"{name}: no phone copy"
    assert png_width(png) <= NARROW_PX * 1.1, png_width(png)
    image = Image.open(io.BytesIO(png))
    assert image.width == png_width(png) and image.height > 100
    # the notebook's own figure is untouched (the copy is another figure), and the copy is not left open to show
    assert tuple(fig.get_size_inches()) == size
    assert [tuple(ax.get_position().bounds) for ax in fig.axes] == positions
    assert plt.get_fignums() == open_before


def test_side_by_side_panels_are_stacked_and_small_multiples_go_two_a_row():
    wide = Image.open(io.BytesIO(narrow_png(_side_by_side())))
    assert wide.height > wide.width  # two panels of 3 in high, one above the other
    multiples = Image.open(io.BytesIO(narrow_png(_small_multiples())))
    # 20 panels two a row: ten rows, each about half the column wide and as high as its image
    assert 4 * multiples.width < multiples.height < 12 * multiples.width


def test_a_figure_placed_by_hand_keeps_its_one_layout():
    fig = plt.figure(figsize=(8, 3))
    fig.add_axes((0.1, 0.1, 0.8, 0.8)).plot([1, 2])
    assert narrow_png(fig) is None


def test_the_kernel_stores_the_phone_copy_in_the_outputs_metadata(tmp_path):
    # what `make execute` does (authoring/execute.py runs install() before the first cell)
    nbformat = pytest.importorskip("nbformat")
    from transformer_course.authoring.execute import _run

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import matplotlib.pyplot as plt"),
            nbformat.v4.new_code_cell("fig, axes = plt.subplots(1, 2, figsize=(9, 3)); plt.show()"),
            nbformat.v4.new_code_cell("print(get_ipython().execution_count)"),
        ]
    )
    _run(nb, tmp_path, 120)
    figure = nb.cells[1].outputs[0]
    assert "image/png" in figure["data"]
    narrow = base64.b64decode(figure["metadata"]["image/png"][KEY])
    assert png_width(narrow) <= NARROW_PX * 1.1 < png_width(base64.b64decode(figure["data"]["image/png"]))
    # the preamble ran outside the notebook's history: its first cell is still execution 1
    assert nb.cells[0].execution_count == 1


class _Renderer:
    """The part of MyST-NB's NbElementRenderer the plugin uses."""

    def render_image(self, data):
        return [{"classes": [], "content": data.content}]


def test_the_book_renders_both_copies_with_the_classes_course_css_chooses_by():
    from myst_nb.core.render import MimeData

    data = MimeData("image/png", "WIDE", output_metadata={"image/png": {KEY: "NARROW"}})
    nodes = NarrowFigures.handle_mime(_Renderer(), data, False)
    assert [(n["content"], n["classes"]) for n in nodes] == [("WIDE", ["course-wide"]), ("NARROW", ["course-narrow"])]
    # an output without a copy, an inline one, or another type: left to MyST-NB
    assert NarrowFigures.handle_mime(_Renderer(), MimeData("image/png", "WIDE"), False) is None
    assert NarrowFigures.handle_mime(_Renderer(), data, True) is None
    assert NarrowFigures.handle_mime(_Renderer(), MimeData("text/plain", "x"), False) is None


def test_long_titles_wrap_outside_mathematics():
    text = "the gradient $\\partial h_T / \\partial x_t$ over a long distance through time"
    lines = narrow_figures._wrap(text, 20).split("\n")
    assert len(lines) > 2 and all(line.count("$") % 2 == 0 for line in lines)
