"""Chapter 9's attention explorer on a live model, in a live JupyterLab (no extension installed or enabled): a
student types a sentence into the cell that calls ``explorer_live.show``, runs it, and the output shows the reference
Transformer's translation and its attention, drawn by the inline copy of the book's explorer.js; a weight it shows
is the one attention_maps computes here. A second explorer in another cell is drawn too (the script sets itself up
once per page): a long sentence's, with chapter 4's GRU, whose labels are readable in JupyterLab's output (its own
style sheet floated the names of the outputs into a column 44 px wide, words broken over 6 lines).

JupyterLab, the browser and its helpers are tests/test_browser.py's; without Chromium or Playwright this module is
skipped, and says why.
"""

from __future__ import annotations

import json

import pytest
import torch

from test_browser import _edit_and_run, _wait_idle, browser, jupyterlab  # noqa: F401  (browser: the fixture)
from test_browser_readable import READABLE, readable_faults
from transformer_course.evaluation.attention_maps import attention_maps

NOTEBOOK = "explore.ipynb"
FIRST = 'from transformer_course.explorer.live import show\n\nshow("The cat sleeps on the sofa.")'
TYPED = "Where is the station?"
LONG = "I came here to see if there was something I could do to help, but there doesn't seem to be anything to do."
SECOND = (  # its own imports: a test may run it alone
    "from transformer_course.explorer.live import reference_models, show\n\n"
    "model, tokenizer, gru = reference_models(gru=True)\n"
    f"show({LONG!r}, model, tokenizer, gru=gru)"
)
WITH_GRU = "div.attn-explorer.attn-ready:has(figure.attn-gru-map svg)"
TOLERANCE = 1e-3  # the output stores thousandths: a mean of the heads' is 0.0005 at most from the model's
EOS = 2


def _notebook(sources: list[str]) -> str:
    cells = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s} for s in sources
    ]
    kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return json.dumps({"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a scratch notebook of two cells, with settings and runtime files of its own."""
    root = tmp_path_factory.mktemp("lab-explorer")
    (root / NOTEBOOK).write_text(_notebook([FIRST, SECOND]))
    yield from jupyterlab(root, NOTEBOOK)


def expected_cross(text):
    """The reference Transformer's greedy translation of ``text`` and its last layer's cross-attention, mean of the
    heads (T_y, T_x): what the explorer opens on, computed here."""
    from transformer_course.reference import load_reference

    model, data, _ = load_reference("transformer-ref")
    src_ids = data.tokenizer.encode(text)
    src = torch.tensor([src_ids])
    out = model.generate(src, torch.ones_like(src, dtype=torch.bool), int(1.5 * len(src_ids)) + 10)[0][0].tolist()
    out = out[: out.index(EOS)] if EOS in out else out
    return data.tokenizer.decode(out), attention_maps(model, src_ids, [model.bos_id] + out)["cross"][-1].mean(0)


def test_a_sentence_typed_in_jupyterlab_is_translated_and_its_attention_shown(lab, browser):  # noqa: F811
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(lab, wait_until="load")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
        "&& window.jupyterapp.shell.currentWidget.content && window.jupyterapp.shell.currentWidget.content.model",
        timeout=120_000,
    )
    _wait_idle(page, timeout=120_000)
    try:
        # The student types a sentence of their own into the cell and runs it (Shift+Enter), then runs the next cell.
        _edit_and_run(page, 0, FIRST.replace("The cat sleeps on the sofa.", TYPED), runs=2)
        page.wait_for_function("() => document.querySelectorAll('div.attn-explorer.attn-ready').length === 2")
        explorer = page.locator("div.attn-explorer.attn-ready").first
        assert TYPED in explorer.locator("select.attn-sentence").inner_text()
        translation, cross = expected_cross(TYPED)
        outputs = explorer.locator("dl.attn-outputs dd").all_inner_texts()
        assert outputs[0].startswith(translation + " (log P"), outputs  # greedy, then the beam's
        assert len(outputs) == 2 and outputs[1].split(" (log P")[0].strip()
        # The heatmap: one cell per weight of the map it opens on (the last layer's cross-attention, mean of heads).
        assert explorer.locator("figure.attn-heatmap svg rect[data-q]").count() == cross.numel()
        explorer.locator('.attn-token[data-side="q"][data-index="1"]').focus()
        shown = explorer.locator('.attn-token[data-side="k"]').evaluate_all(
            "(buttons) => buttons.map(b => Number(b.dataset.weight))"
        )
        assert len(shown) == cross.shape[1]
        assert max(abs(w - e) for w, e in zip(shown, cross[1].double().tolist())) <= TOLERANCE, (shown, cross[1])
        # two explorers, element ids apart: the script set itself up once
        ids = page.evaluate("() => [...document.querySelectorAll('div.attn-explorer [id]')].map(e => e.id)")
        assert len(ids) == len(set(ids)) == 10, ids  # 5 in each: the captions of the token rows and of the beam
        assert page.evaluate("() => typeof window.attnExplorer.start") == "function"
    finally:
        page.close()
    assert not errors, errors


def test_the_live_explorers_labels_are_readable_in_jupyterlab(lab, browser):  # noqa: F811
    # The names of the outputs ("GRU with attention, greedy") take two lines at most, broken between words; the
    # GRU's row labels are SMALLEST_TEXT or larger, one per row of its map: in a wide window and a narrow one.
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(lab, wait_until="load")
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
        "&& window.jupyterapp.shell.currentWidget.content && window.jupyterapp.shell.currentWidget.content.model",
        timeout=120_000,
    )
    _wait_idle(page, timeout=120_000)
    faults = []
    try:
        _edit_and_run(page, 1, None, runs=1)
        page.wait_for_selector(WITH_GRU)
        for width in (1280, 900):
            page.set_viewport_size({"width": width, "height": 900})
            shown = page.evaluate(READABLE, WITH_GRU)
            assert [n["text"] for n in shown["names"]][2:] == ["GRU with attention, greedy"], shown["names"]
            assert shown["gru"] and shown["gru"]["rows"] > 20, shown
            faults += readable_faults(shown, f"JupyterLab at {width} px")
    finally:
        page.close()
    assert not faults, faults
