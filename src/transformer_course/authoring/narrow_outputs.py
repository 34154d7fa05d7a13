"""The book's renderer for figures that carry a copy laid out for a phone: plots (evaluation/narrow_figures.py, stored
by evaluation/figure_formatter.py) and the code-drawn diagrams (an SVG, its copy drawn by diagrams/_narrow_*.py and
stored by ``Diagram._repr_mimebundle_``).

MyST-NB renders an output's PNG or SVG as one image. This plugin (the entry point "myst_nb.mime_renderers" in
pyproject.toml) renders both of such a figure: the notebook's with the class ``course-wide``, the phone's with
``course-narrow``, each an image file of its own (so the two SVGs' ids never meet in one document) with the cell's
alt text; book/_static/course.css shows one of them by the page's width. An output without a phone copy is left to
MyST-NB (the plugin returns None).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..evaluation.figure_formatter import KEY


class NarrowFigures:
    """A MyST-NB mime renderer plugin (myst_nb.core.render.MimeRenderPlugin)."""

    mime_priority_overrides: tuple = ()

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list | None:
        if inline or data.mime_type not in ("image/png", "image/svg+xml"):
            return None
        narrow = data.output_metadata.get(data.mime_type, {}).get(KEY)
        if not narrow:
            return None
        wide = renderer.render_image(data)
        phone = renderer.render_image(dataclasses.replace(data, content=narrow, output_metadata={}))
        for node in wide:
            node["classes"].append("course-wide")
        for node in phone:
            node["classes"].append("course-narrow")
        return wide + phone
