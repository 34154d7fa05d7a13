"""Every figure in the book has real alt text: a description of what it shows, written in the notebook.

A figure is a code cell's image output (a plot's PNG, or a diagram's SVG). Its alt text is the cell's metadata
``{"mystnb": {"image": {"alt": "..."}}}``, which myst-nb puts on the <img> of the built page (without it the
alt text is the image's file name). tests/test_browser.py checks the built pages themselves.

Every chapter is held to it: ALT_TEXT_CHAPTERS is read from the solution notebooks, so a new chapter is checked
from its first commit.
"""

import json
import re

import pytest

from conftest import ROOT

# One entry per solution notebook (a chapter may have two).
ALT_TEXT_CHAPTERS = tuple(sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")))
MIN_WORDS = 12  # a sentence that says what the figure shows, not a label


def _notebook(chapter: str):
    path = ROOT / "solutions" / f"{chapter}.ipynb"
    return path, json.loads(path.read_text(encoding="utf-8"))


def figure_cells(nb: dict):
    for cell in nb["cells"]:
        images = [o for o in cell.get("outputs", []) if {"image/png", "image/svg+xml"} & set(o.get("data", {}))]
        if cell["cell_type"] == "code" and images:  # plots (PNG) and the code-drawn diagrams (SVG)
            yield cell


def alt_text(cell: dict):
    return (cell["metadata"].get("mystnb") or {}).get("image", {}).get("alt")


def alt_text_problem(alt) -> str | None:
    if not isinstance(alt, str) or not alt.strip():
        return "has no alt text (cell metadata mystnb.image.alt)"
    if re.search(r"\.(png|svg|jpe?g)\b|/_images/|^[\w./-]+$", alt.strip()):
        return f"has a file name for alt text: {alt!r}"
    if len(alt.split()) < MIN_WORDS:
        return f"has an alt text too short to describe the figure ({len(alt.split())} words): {alt!r}"
    return None


@pytest.mark.parametrize("chapter", ALT_TEXT_CHAPTERS)
def test_every_figure_has_alt_text(chapter):
    path, nb = _notebook(chapter)
    problems = [
        f"cell {cell.get('id')} {problem}" for cell in figure_cells(nb) if (problem := alt_text_problem(alt_text(cell)))
    ]
    assert not problems, f"{path.name}: " + "; ".join(problems)
    alts = [alt_text(cell) for cell in figure_cells(nb)]
    assert len(set(alts)) == len(alts), f"{path.name}: two figures share an alt text"


def test_the_check_recognises_a_file_name_and_a_label():
    assert "no alt text" in alt_text_problem(None)
    assert "file name" in alt_text_problem("../_images/0c495dc4b72a.png")
    assert "too short" in alt_text_problem("A heatmap.")
    assert alt_text_problem("Heatmap of the attention weights of six words, queries down and keys across.") is None
