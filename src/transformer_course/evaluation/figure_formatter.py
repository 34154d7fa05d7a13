"""The kernel's PNG formatter for the book's plots: each output carries the plot as the notebook lays it out and,
in the output's metadata, its copy laid out for a phone (evaluation/narrow_figures.py), both in 256 colours.

``install()`` replaces the kernel's PNG formatter for matplotlib figures; the phone copy goes in
``metadata["image/png"]["transformer_course/narrow"]``, which Jupyter and nbval ignore. Only `make execute`
installs it (authoring/execute.py runs it before the first cell), so a student's kernel draws each figure once.
"""

from __future__ import annotations

import base64
import io

from matplotlib.figure import Figure

from .narrow_figures import narrow_png, png_width

KEY = "transformer_course/narrow"


def compact_png(png: bytes) -> bytes:
    """``png`` in 256 colours, losslessly compressed: a third of matplotlib's file for the book's plots, which
    look the same (flat colours, and colour maps of 256 entries). What pays for the phone copies in the
    repository's 50 MiB. Kept as it was where that is not smaller."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    buffer = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        buffer, format="PNG", optimize=True
    )
    return buffer.getvalue() if len(buffer.getvalue()) < len(png) else png


def _png_with_narrow(fig: Figure) -> tuple[str, dict] | str:
    """The kernel's PNG of ``fig`` (as the inline backend draws it), and the phone's copy in its metadata, both in
    256 colours."""
    from IPython.core.pylabtools import print_figure

    wide = base64.b64encode(compact_png(print_figure(fig, "png", bbox_inches="tight"))).decode("ascii")
    narrow = narrow_png(fig)
    if narrow is None:
        return wide
    narrow = compact_png(narrow)
    return wide, {KEY: base64.b64encode(narrow).decode("ascii"), "transformer_course/narrow_width": png_width(narrow)}


def install() -> None:
    """In a running IPython kernel: every matplotlib figure shown from now on carries its phone copy."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("install() works in an IPython kernel only")
    import matplotlib.pyplot as plt

    # Loading the inline backend registers its own PNG formatter (matplotlib_inline's configure_inline_support):
    # load it first, then replace that formatter.
    plt.switch_backend(plt.get_backend())
    shell.display_formatter.formatters["image/png"].for_type(Figure, _png_with_narrow)
