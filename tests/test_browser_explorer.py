"""Chapter 9's attention explorer, in the built book, in headless Chromium with the network cut off, opened from a
file:// URL (as the README tells readers to open the book): chosen through its controls, the weights it shows are
the reference Transformer's (attention_maps, computed here) and the reference GRU's alignment, the keyboard moves along the tokens, nothing scrolls
the page sideways on a 400 px phone, and axe-core finds no serious or critical fault. The explorer of the sentence
typed in the next cell (explorer_live.show, its own copy of the script inline) is drawn beside it, with its weights.

The browser, the network cut-off and the book (COURSE_TEST_BOOK=_build/html to reuse a build) are
tests/test_browser.py's and conftest.py's; without Chromium or Playwright this module is skipped, and says why.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from test_browser import PHONE, browser  # noqa: F401  (browser: the fixture, Chromium with the network cut off)
from transformer_course.evaluation.attention_maps import attention_maps

PAGE = Path("solutions") / "09_evaluation.html"
BOOK = "div.attn-explorer:not(.attn-explorer-live)"  # the book's explorer, not the typed sentence's below it
LIVE = "div.attn-explorer.attn-explorer-live"  # the explorer of a sentence typed in the notebook
TYPED = "The cat sleeps on the sofa."  # the sentence of that cell
TOLERANCE = 1e-3  # the page stores thousandths: a head's weight is 0.0005 at most from the model's, so is a mean
EOS = 2
IDS = 5  # the elements with an id in one explorer: the captions of the two rows, of the beam and of its two lists


@pytest.fixture(scope="module")
def reference():
    from transformer_course.reference import load_reference

    model, data, _ = load_reference("transformer-ref")
    gru, _, _ = load_reference("bahdanau-ref", data=data)  # chapter 4's GRU with attention, the same tokenizer
    return model, data.tokenizer, gru


def open_chapter(browser, html):  # noqa: F811  (the fixture imported above)
    """Chapter 9's page from its file, once the explorer is drawn; page.errors collects its script errors."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((html / PAGE).as_uri(), wait_until="load")
    page.wait_for_selector(f"{BOOK}.attn-ready", timeout=60_000)
    page.errors = errors
    return page


@pytest.fixture(scope="module")
def chapter(book_build, browser):  # noqa: F811
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    page = open_chapter(browser, html)
    yield page, html
    page.close()


def expected_maps(reference, text):
    """Every map while the Transformer writes its greedy translation of ``text`` (kind -> (L, h, T_q, T_k)), the GRU's
    alignment as it writes its own ("gru": (1, 1, T_y, T_x)), and the source's pieces: computed here."""
    model, tokenizer, gru = reference
    src_ids = tokenizer.encode(text)
    src, limit = torch.tensor([src_ids]), int(1.5 * len(src_ids)) + 10
    out = model.generate(src, torch.ones_like(src, dtype=torch.bool), limit)[0][0].tolist()
    out = out[: out.index(EOS)] if EOS in out else out
    maps = attention_maps(model, src_ids, [model.bos_id] + out)
    tokens, alignment = gru.generate(src, torch.ones_like(src, dtype=torch.bool), limit)  # (1, L), (1, L, T_x)
    rows = tokens[0].tolist().index(EOS) + 1 if EOS in tokens[0].tolist() else tokens.shape[1]  # <eos> included
    maps["gru"] = alignment[:, None, :rows]
    piece = lambda t: tokenizer.decode([t]).replace(" ", "_")
    return maps, [piece(t) for t in src_ids]


def choose(page, text, kind, layer, head):
    """Pick a sentence (by its text), a kind, a layer and a head (None: the mean) through the explorer's controls."""
    index = page.evaluate(
        f"(text) => [...document.querySelectorAll('{BOOK} select.attn-sentence option')].findIndex(o => "
        "o.textContent.startsWith(text + ' ('))",
        text,
    )
    assert index >= 0, f"{text!r} is not offered"
    page.select_option(f"{BOOK} select.attn-sentence", str(index))
    page.select_option(f"{BOOK} select.attn-kind", kind)
    page.select_option(f"{BOOK} select.attn-layer", str(layer))
    if kind == "gru":  # one attention: no choice of head
        assert page.is_hidden(f"{BOOK} select.attn-head")
    else:
        page.select_option(f"{BOOK} select.attn-head", "mean" if head is None else str(head))


def shown(page, side, root=BOOK):
    """The pieces of one row of tokens ('q' or 'k') of an explorer and the weights they show (data-weight, and their
    aria-label)."""
    return page.evaluate(
        """([root, side]) => [...document.querySelectorAll(`${root} .attn-token[data-side="${side}"]`)].map(b => ({
             piece: b.querySelector('.attn-piece').textContent, weight: b.dataset.weight === undefined ? null :
             Number(b.dataset.weight), label: b.getAttribute('aria-label')}))""",
        [root, side],
    )


@pytest.mark.parametrize(
    ("text", "kind", "layer", "head", "side", "index"),
    [
        ("I'm home, Mom!", "cross", 1, None, "q", 4),  # an output piece: what it reads in the source, mean of heads
        ("I'm home, Mom!", "decoder", 0, 2, "q", 5),  # one head of the masked self-attention
        ("Tom is a dwarf.", "encoder", 1, 0, "k", 3),  # a source piece: who reads it (a column)
        ("The animal didn't cross the street because it was too wide.", "encoder", 1, 3, "q", 8),  # 'it'
        ("I like tulips.", "gru", 0, None, "q", 3),  # chapter 4's GRU: its alignment, one attention
    ],
)
def test_the_page_shows_the_models_weights(chapter, reference, text, kind, layer, head, side, index):
    page, _ = chapter
    choose(page, text, kind, layer, head)
    page.focus(f'{BOOK} .attn-token[data-side="{side}"][data-index="{index}"]')
    maps, source = expected_maps(reference, text)
    weights = maps[kind][layer]  # (h, T_q, T_k)
    weights = (weights.mean(0) if head is None else weights[head]).double()
    expected = weights[index] if side == "q" else weights[:, index]
    other = shown(page, "k" if side == "q" else "q")
    assert len(other) == len(expected)
    assert max(abs(t["weight"] - w) for t, w in zip(other, expected.tolist())) <= TOLERANCE
    # the screen reader's text carries each weight, to three decimals
    assert all(t["label"].endswith(f"weight {t['weight']:.3f}") for t in other)
    if kind != "decoder":
        assert [t["piece"] for t in (other if side == "q" else shown(page, "k"))] == source
    assert all(t["weight"] is None for t in shown(page, side))  # the row of the focused token is not shaded
    assert not page.errors, page.errors


def test_the_explorer_of_a_typed_sentence_is_drawn_beside_the_books(chapter, reference):
    # The cell after the book's explorer calls explorer_live.show, whose output carries a copy of explorer.js: on the
    # page, which loads explorer.js already, the script sets itself up once and draws both, their element ids apart.
    page, _ = chapter
    assert page.locator("div.attn-explorer").count() == 2 and page.locator(f"{LIVE}.attn-ready").count() == 1
    ids = page.evaluate("() => [...document.querySelectorAll('div.attn-explorer [id]')].map(e => e.id)")
    assert len(ids) == len(set(ids)) == 2 * IDS, ids
    assert TYPED in page.text_content(f"{LIVE} select.attn-sentence")
    page.focus(f'{LIVE} .attn-token[data-side="q"][data-index="1"]')  # what it opens on: the last layer's cross
    maps, source = expected_maps(reference, TYPED)
    expected = maps["cross"][-1].mean(0)[1].double()
    other = shown(page, "k", LIVE)
    assert [t["piece"] for t in other] == source
    assert max(abs(t["weight"] - w) for t, w in zip(other, expected.tolist())) <= TOLERANCE
    assert not page.errors, page.errors


def test_the_keyboard_moves_along_the_tokens(chapter):
    page, _ = chapter
    choose(page, "I like tulips.", "cross", 1, None)
    active = "() => [document.activeElement.dataset.side, document.activeElement.dataset.index]"
    page.focus(f'{BOOK} .attn-token[data-side="q"][data-index="0"]')
    page.keyboard.press("ArrowRight")
    assert page.evaluate(active) == ["q", "1"]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(active) == ["q", "1"]
    page.keyboard.press("End")
    n = len(shown(page, "q"))
    assert page.evaluate(active) == ["q", str(n - 1)]
    page.keyboard.press("Tab")  # one stop per row: Tab leaves the row for the other
    assert page.evaluate(active)[0] == "k"
    status = page.text_content(f"{BOOK} .attn-status")
    assert "is read most by" in status, status


def beam_settings(page):
    """The beam's size and alpha, as the title of the beam's steps says them."""
    import re

    title = page.text_content(f"{BOOK} .attn-beam .attn-caption")
    found = re.match(r"The beam \(K = (\d+), \u03b1 = ([0-9.]+)\), step by step: (\d+) steps", title)
    assert found, title
    return {"beam_size": int(found[1]), "alpha": float(found[2]), "steps": int(found[3])}


def hypotheses_shown(page):
    """The beam's lists as the page shows them: live (pieces, log P) and finished (pieces, score), and the chosen."""
    return page.evaluate(
        f"""() => {{
          const read = (list, key) => [...document.querySelectorAll(`{BOOK} ol.${{list}} li[data-pieces]`)].map(
            (li) => [JSON.parse(li.dataset.pieces), Number(li.dataset[key])]);
          const chosen = document.querySelector('{BOOK} .attn-chosen').dataset.pieces;
          return {{live: read('attn-live', 'logp'), done: read('attn-done', 'score'),
                   chosen: chosen === undefined ? null : JSON.parse(chosen)}};
        }}"""
    )


@pytest.mark.parametrize("text", ["I'm home, Mom!", "Tom is a dwarf."])
def test_the_keyboard_steps_through_the_beam_and_it_is_the_packages(chapter, reference, text):
    from transformer_course.decoding.search import beam_search
    from transformer_course.explorer.beam import beam_steps, hypotheses

    page, _ = chapter
    choose(page, text, "cross", 1, None)
    model, tokenizer, _ = reference
    data = beam_settings(page)
    src_ids = tokenizer.encode(text)
    limit = int(1.5 * len(src_ids)) + 10
    # in float64, as explorer_data computes what the page stores (explorer.py says why)
    trace = beam_steps(copy.deepcopy(model).double(), src_ids, data["beam_size"], limit, data["alpha"])
    piece = lambda t: "<eos>" if t == EOS else tokenizer.decode([t]).replace(" ", "_")
    n = len(trace.steps)
    assert data["steps"] == n
    page.focus(f"{BOOK} input.attn-step-range")  # the step's slider, labelled "Step"
    assert page.evaluate("() => document.activeElement.closest('label').textContent") == "Step"
    page.keyboard.press("Home")
    for step in range(1, n + 1):
        if step > 1:
            page.keyboard.press("ArrowRight")
        assert page.get_attribute(f"{BOOK} input.attn-step-range", "aria-valuetext") == f"step {step} of {n}"
        assert page.text_content(f"{BOOK} .attn-beam-status").startswith(f"Step {step} of {n}:")
        live, finished = hypotheses(trace, step)
        on_page = hypotheses_shown(page)
        assert [p for p, _ in on_page["live"]] == [[piece(t) for t in tokens] for tokens, _ in live]
        assert all(abs(a - b) <= 5e-4 + 1e-9 for (_, a), (_, b) in zip(on_page["live"], live))
        assert [p for p, _ in on_page["done"]] == [[piece(t) for t in tokens] for tokens, _ in finished]
        assert all(abs(a - b) <= 5e-4 + 1e-9 for (_, a), (_, b) in zip(on_page["done"], finished))
        assert (on_page["chosen"] is None) == (step < n)
    # the last step names the chosen output: beam_search's, which the page shows above with its score
    src = torch.tensor([src_ids])
    result = beam_search(model, src, torch.ones_like(src, dtype=torch.bool), data["beam_size"], limit, data["alpha"])
    chosen = [p for p in on_page["chosen"] if p != "<eos>"]
    assert chosen == [piece(t) for t in result.tokens[0]]
    beam_line = page.text_content(f"{BOOK} dl.attn-outputs dd:nth-of-type(2)")
    assert beam_line.startswith(tokenizer.decode(result.tokens[0]) + " (log P")
    assert beam_line.endswith(f"score {result.scores[0]:.2f})")
    assert f"(score {result.scores[0]:.2f})".replace("-", "\u2212") in page.text_content(f"{BOOK} .attn-chosen")
    page.keyboard.press("ArrowRight")  # at the last step it stays there
    assert page.text_content(f"{BOOK} .attn-beam-status").startswith(f"Step {n} of {n}:")
    page.focus(f"{BOOK} button.attn-step-prev")  # the buttons step too, and keep the focus
    page.keyboard.press("Enter")
    assert page.text_content(f"{BOOK} .attn-beam-status").startswith(f"Step {n - 1} of {n}:")
    assert page.evaluate("() => document.activeElement.textContent") == "Previous step"
    assert not page.errors, page.errors


def gru_map(page):
    """The GRU's heatmap beside the Transformer's: its weights (T_y, T_x) from its cells, its row labels, and where
    the two maps are (bounding boxes)."""
    return page.evaluate(
        f"""() => {{
          const fig = document.querySelector('{BOOK} figure.attn-gru-map');
          if (!fig.checkVisibility()) return {{visible: false}};
          const cells = [...fig.querySelectorAll('rect[data-k]')];
          const rows = Math.max(...cells.map((c) => Number(c.dataset.q))) + 1;
          const weights = Array.from({{length: rows}}, () => []);
          for (const c of cells) weights[Number(c.dataset.q)][Number(c.dataset.k)] = Number(c.dataset.weight);
          const box = (e) => {{ const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }};
          return {{weights, labels: [...fig.querySelectorAll('.attn-gru-label')].map((t) => t.title),
                   gru: box(fig.querySelector('svg')),
                   main: box(document.querySelector('{BOOK} figure.attn-heatmap:not(.attn-gru-map) svg')),
                   visible: true}};
        }}"""
    )


def test_the_grus_alignment_is_drawn_beside_the_transformers(chapter, reference):
    page, _ = chapter
    model, tokenizer, gru = reference
    for text, kind in (("I like tulips.", "cross"), ("Tom is a dwarf.", "encoder")):
        choose(page, text, kind, 1, None)
        maps, _ = expected_maps(reference, text)
        expected = maps["gru"][0, 0].double()  # (T_y, T_x)
        shown = gru_map(page)
        assert shown["visible"]
        assert torch.tensor(shown["weights"]).shape == expected.shape
        assert (torch.tensor(shown["weights"], dtype=torch.float64) - expected).abs().max() <= TOLERANCE
        src = torch.tensor([tokenizer.encode(text)])
        out = gru.generate(src, torch.ones_like(src, dtype=torch.bool), int(1.5 * src.shape[1]) + 10)[0][0].tolist()
        written = out[: out.index(EOS) + 1] if EOS in out else out
        piece = lambda t: "<eos>" if t == EOS else tokenizer.decode([t]).replace(" ", "_")
        assert shown["labels"] == [piece(t) for t in written]  # its own rows, labelled
        left, top, right, bottom = shown["gru"]
        assert left >= shown["main"][2] and top < shown["main"][3]  # beside the Transformer's, at 1280 px
    page.set_viewport_size({"width": PHONE, "height": 900})
    try:
        shown = gru_map(page)
        assert shown["gru"][1] >= shown["main"][3]  # on a phone, under it
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    choose(page, "I like tulips.", "gru", 0, None)  # the GRU alone: no second map
    assert not gru_map(page)["visible"]
    assert not page.errors, page.errors


def test_nothing_scrolls_sideways_on_a_phone(chapter):
    page, _ = chapter
    page.set_viewport_size({"width": PHONE, "height": 900})
    try:
        for text in ("Stop!", "I came here to see if there was something I could do to help, "):
            index = page.evaluate(
                f"(t) => [...document.querySelectorAll('{BOOK} select.attn-sentence option')].findIndex(o => "
                "o.textContent.startsWith(t))",
                text,
            )
            page.select_option(f"{BOOK} select.attn-sentence", str(index))
            layout = page.evaluate(
                """(root) => {
              const box = document.querySelector(root).getBoundingClientRect();
              return {page: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth,
                      right: box.right, widest: Math.max(...[...document.querySelectorAll('div.attn-explorer *')]
                      .map(e => e.getBoundingClientRect().right))};
            }""",
                BOOK,
            )
            assert layout["page"] <= layout["viewport"], layout
            assert layout["widest"] <= layout["right"] + 1 <= layout["viewport"] + 1, layout
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


@pytest.mark.parametrize("width", [1280, PHONE])
def test_no_serious_accessibility_fault_in_the_explorer(chapter, browser, width):  # noqa: F811
    axe = pytest.importorskip("axe_playwright_python", reason="the dev extra's axe-playwright-python: `make venv`")
    # a page of its own: axe reads the page's style sheets, which a page opened from a file may not (a logged error)
    page = open_chapter(browser, chapter[1])
    page.set_viewport_size({"width": width, "height": 900})
    try:
        choose(page, "I'm home, Mom!", "cross", 1, None)
        page.focus(f'{BOOK} .attn-token[data-side="q"][data-index="2"]')  # shaded tokens: their colours are checked too
        page.add_script_tag(content=(Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8"))
        result = page.evaluate(
            "() => axe.run({include: [['div.attn-explorer']]}, {resultTypes: ['violations']})"
        )  # every rule, colour contrast included, on the explorer (test_browser.py runs axe on the whole page)
        faults = [
            f"{v['impact']} {v['id']} ({len(v['nodes'])}x, e.g. {v['nodes'][0]['target']})"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert not faults, faults
        assert page.evaluate("() => document.querySelectorAll('div.attn-explorer button').length") > 10
    finally:
        page.close()


def test_the_page_is_offline_light_and_fetches_nothing(chapter, browser):  # noqa: F811
    page, html = chapter
    size = (html / PAGE).stat().st_size
    assert size < 2_000_000, f"chapter 9's page weighs {size / 1e6:.2f} MB"
    assert (html / "_static" / "explorer.js").is_file() and (html / "_static" / "explorer.css").is_file()
    assert (
        page.evaluate("() => performance.getEntriesByType('resource').filter(r => /\\.json/.test(r.name)).length") == 0
    )
    assert not browser.offline_requests, browser.offline_requests[:5]
    assert not page.errors, page.errors
