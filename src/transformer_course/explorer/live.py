"""Chapter 9's attention explorer on a live model, for JupyterLab: ``show(text)`` translates one English sentence
with the reference Transformer (or a model given, such as the student's own from chapter 8), greedy and by beam
search, and returns the explorer for it as an HTML output (``explorer.explorer_data`` for that one sentence).

JupyterLab runs the scripts of a trusted HTML output, and an output made in the session is trusted, so the output
carries the book's own book/_static/explorer.js and explorer.css inline: no extension to install or enable, nothing
fetched. In the built book the page loads explorer.js already; the inline copy then only asks it to draw (the script
sets itself up once per page). A notebook opened with stored, untrusted outputs shows a line saying to run the cell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from IPython.display import HTML

from .._checks import Model
from ..decoding.search import max_output_length
from ..repository import course_root
from . import pages as explorer

__all__ = ["assets", "live_html", "reference_models", "sentence_data", "show"]

NOTE = "typed in the notebook"  # the sentence's note in the explorer's menu
_REFERENCE: dict[str, Any] = {}  # the reference models, loaded once per kernel


def reference_models(gru: bool = False) -> tuple:
    """(the reference Transformer, the course's tokenizer, and chapter 4's reference GRU with attention when
    ``gru`` else None), loaded from the weights stored with the course once per kernel, as chapter 9 loads them."""
    from ..reference import load_reference

    if "model" not in _REFERENCE:
        model, data, _ = load_reference("transformer-ref")
        _REFERENCE.update(model=model, data=data)
    if gru and "gru" not in _REFERENCE:
        _REFERENCE["gru"] = load_reference("bahdanau-ref", data=_REFERENCE["data"])[0]
    return _REFERENCE["model"], _REFERENCE["data"].tokenizer, _REFERENCE.get("gru") if gru else None


def _checked_ids(model: Model, tokenizer, text: Any) -> list[int]:
    """The sentence's pieces, after checking that it is a sentence the model can translate."""
    if not isinstance(text, str):
        raise TypeError(f"the sentence must be a string (str), got {type(text).__name__}: {text!r}")
    if not text.strip():
        raise ValueError('the sentence is empty: type an English sentence, e.g. "The cat sleeps on the sofa."')
    ids = tokenizer.encode(text)
    if not ids:
        raise ValueError(f"the tokenizer finds no piece in {text!r}: type an English sentence")
    longest = getattr(model, "max_len", None)
    if longest is not None and max(len(ids), max_output_length(len(ids)) + 1) > longest:
        raise ValueError(
            f"the sentence is too long: {len(ids)} pieces, and the model reads at most {longest} positions "
            f"(its translation may take {max_output_length(len(ids))}): type a shorter one"
        )
    return ids


def sentence_data(
    text: str, model: Model | None = None, tokenizer=None, gru: Model | None = None, beam_size: int = 4, alpha=0.6
) -> dict:
    """``explorer.explorer_data`` for one sentence: every map while the model writes its greedy translation, in
    thousandths, and its greedy and beam outputs with their scores; with ``gru``, that model's translation and
    alignment too. Without ``model``, the reference Transformer; without ``tokenizer``, the course's."""
    if model is None or tokenizer is None:
        reference, course_tokenizer, _ = reference_models()
        model = reference if model is None else model
        tokenizer = course_tokenizer if tokenizer is None else tokenizer
    _checked_ids(model, tokenizer, text)
    for name, given in (("model", model), ("gru", gru)):
        device = next(given.parameters()).device if given is not None else None
        if device is not None and device.type != "cpu":
            raise ValueError(f"the {name} is on {device}: the explorer runs on the CPU, pass {name}.cpu()")
    return explorer.explorer_data(model, tokenizer, [(text, NOTE)], beam_size=beam_size, alpha=alpha, gru=gru)


def assets(root: Path | None = None) -> tuple[str, str]:
    """explorer.js and explorer.css, the book's own (book/_static in the course folder), as text to put inline."""
    static = (course_root() if root is None else Path(root)) / "book" / "_static"
    script, style = ((static / name).read_text(encoding="utf-8") for name in ("explorer.js", "explorer.css"))
    # inline, a "</script" or "</style" would end the element early: the files have none, and must keep it so
    if "</script" in script.lower() or "</style" in style.lower():
        raise ValueError("explorer.js or explorer.css holds '</script' or '</style': they cannot be put inline")
    return script, style


def live_html(data: dict, root: Path | None = None) -> str:
    """The explorer's HTML for one output that draws itself: the data, then the script and its style, inline."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    script, style = assets(root)
    return (
        '<div class="attn-explorer attn-explorer-live">\n'
        '<p class="attn-explorer-fallback">The attention explorer for this sentence is drawn by a script in this '
        "output: run the cell to draw it (JupyterLab runs the scripts of outputs made in the session, or of a "
        "trusted notebook).</p>\n"
        f'<script type="application/json" class="attn-explorer-data">{payload}</script>\n'
        "</div>\n"
        f"<style>\n{style}</style>\n"
        f"<script>\n{script}</script>"
    )


def show(
    text: str, model: Model | None = None, tokenizer=None, gru: Model | None = None, beam_size: int = 4, alpha=0.6
) -> HTML:
    """The attention explorer for one sentence, translated now: an HTML output that JupyterLab (and the built book)
    draws, with the model's greedy and beam translations and every attention map while it writes the greedy one.

    ``model``: the reference Transformer if None, or a model of chapter 8's kind (your own, trained in its exercise);
    ``tokenizer``: the course's if None; ``gru``: chapter 4's model, to compare its alignment (None: left out)."""
    return HTML(live_html(sentence_data(text, model, tokenizer, gru, beam_size, alpha)))
