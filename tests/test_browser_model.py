"""The reference Transformer in the built book's page (issue 52), in headless Chromium with the network cut off, opened
from a file:// URL: ``window.courseModel.translate`` cuts a sentence into the course tokenizer's pieces and translates
it, greedy and with chapter 9's beam search, to the same tokens as PyTorch on the same (float16-rounded) weights,
computed here; its attention maps are PyTorch's within 1e-4; the page's box shows the translation of a typed sentence
and says why it refuses input. tests/benchmarks/browser_model.py compares more sentences, against the stored weights
too, and measures the page's weight and speed.

The browser, the network cut-off and the book (COURSE_TEST_BOOK=_build/html to reuse a build) are
tests/test_browser.py's and conftest.py's; without Chromium or Playwright this module is skipped, and says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from test_browser import PHONE, browser  # noqa: F401  (browser: the fixture, Chromium with the network cut off)
from transformer_course.evaluation.attention_maps import attention_maps
from transformer_course.reference import browser as contract

TRY = Path("book") / "try.html"
CHAPTER = Path("solutions") / "09_evaluation.html"
SAMPLE = Path(contract.__file__).parent / "transformer-ref-sample.json"
# Inputs a reader might type that the test set has none of: one character, numbers, an emoji, Spanish, made-up words,
# a typed special token, odd spaces, accents the vocabulary cuts into bytes, and 200 characters.
UNUSUAL = [
    "a",
    "I have 3 cats and 12 dogs, born in 2019.",
    "I love pizza \U0001f355!",
    "¿Dónde está la estación de tren?",
    "The zorblax flumphed the quiggly snargle.",
    "Tom <eos> went home.",
    "  Tom   is\there. ",
    "Zoë visited Kraków and Ærøskøbing.",
    (
        "Tom said that he would come back to the old house by the river tomorrow morning, because his sister wanted "
        "to see the garden again before the winter, and we all agreed that it was a very good idea."
    )[:200],
]
# Test sentences where rounding the weights to float16 changes PyTorch's output (greedy or beam 4): near ties, where the
# page must follow the float16 model to the token (tests/benchmarks/browser_model.py --whole-test-set finds them).
NEAR_TIES = [
    "She attributed her success to good luck.",
    "We lost sight of them over half an hour ago.",
    "He lay in agony until the doctor arrived.",
    "Mary mixed the ingredients to make a cake.",
]
# Input refused on both sides, each with its reason.
REFUSED = ["", " \n\t ", "x" * (contract.MAX_CHARS + 1), "\U0001f600" * 40]


def sentences() -> list[str]:
    """Every third sentence of the stored sample of the test set (short to long), the near ties, the unusual ones."""
    return json.loads(SAMPLE.read_text())["sources"][::3] + NEAR_TIES + UNUSUAL


@pytest.fixture(scope="module")
def reference():
    """PyTorch's model on the page's weights (float16, computed in float32) and the tokenizer."""
    model, tokenizer = contract.load_translator("transformer-ref", "float16")
    return model, tokenizer


@pytest.fixture(scope="module")
def try_page(book_build, browser):  # noqa: F811
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((html / TRY).as_uri(), wait_until="load")
    page.wait_for_selector("div.course-model.cm-loaded", timeout=60_000)
    page.errors = errors
    yield page, html
    page.close()


def translate_all(page, texts, beam, details=False):
    """The page's answers, in one call: {pieces, output} or {refused: message}."""
    return page.evaluate(
        """async ([texts, beam, details]) => {
             const out = [];
             for (const text of texts) {
               try { out.push(await window.courseModel.translate(text, {beam, details})); }
               catch (error) { out.push({refused: error.message, isRefusal: error.refused === true}); }
             }
             return out;
           }""",
        [texts, beam, details],
    )


@pytest.mark.parametrize("beam", [1, 4])
def test_the_page_translates_as_pytorch_does(try_page, reference, beam):
    page, _ = try_page
    model, tokenizer = reference
    texts = sentences()
    assert len(texts) >= 20
    shown = translate_all(page, texts, beam)
    expected = [contract.translate(model, tokenizer, text, beam) for text in texts]
    differing = [(t, s, e) for t, s, e in zip(texts, shown, expected) if s != e]
    assert not differing, differing[:3]
    assert page.evaluate("() => window.courseModel.where") == "worker"  # off the main thread: the page never freezes
    assert not page.errors, page.errors


def test_the_page_refuses_what_python_refuses_with_the_same_reason(try_page, reference):
    page, _ = try_page
    _, tokenizer = reference
    shown = translate_all(page, REFUSED, 1)
    for text, answer in zip(REFUSED, shown):
        with pytest.raises(contract.InputRefused) as refused:
            contract.check_input(text, tokenizer)
        assert answer == {"refused": str(refused.value), "isRefusal": True}, text[:20]


@pytest.mark.parametrize("text", ["Tom is a dwarf.", "I like tulips.", "I love pizza \U0001f355!"])
def test_the_attention_maps_are_pytorchs(try_page, reference, text):
    page, _ = try_page
    model, tokenizer = reference
    (answer,) = translate_all(page, [text], 1, details=True)
    ids = tokenizer.encode(text)
    assert answer["ids"] == ids
    maps = attention_maps(model, ids, [model.bos_id] + answer["tokens"])  # kind -> (L, h, T_q, T_k)
    for kind, expected in maps.items():
        got = answer["maps"][kind]  # [layer][head][query] = weights of the keys up to the query (decoder) or all
        assert len(got) == expected.shape[0] and len(got[0]) == expected.shape[1], kind
        for layer, heads in enumerate(got):
            for head, rows in enumerate(heads):
                assert len(rows) == expected.shape[2], (kind, layer, head)
                for q, row in enumerate(rows):
                    want = expected[layer, head, q, : len(row)]
                    assert torch.allclose(torch.tensor(row, dtype=torch.float64), want.double(), atol=1e-4, rtol=0)
                    assert float(expected[layer, head, q, len(row) :].abs().sum()) == 0  # the masked future


def test_a_typed_sentence_is_translated_and_explored_in_the_box(try_page, reference):
    page, _ = try_page
    model, tokenizer = reference
    text = "My brother bought a new car yesterday."
    page.fill("div.course-model textarea", text)
    page.check("div.course-model input.cm-beam-4")
    page.click("div.course-model button.cm-go")
    page.wait_for_selector("div.course-model .attn-explorer-typed.attn-ready", timeout=60_000)
    expected = contract.translate(model, tokenizer, text, 4)
    assert page.text_content("div.course-model dd.cm-output") == expected["output"]
    pieces = page.eval_on_selector_all("div.course-model .cm-piece", "spans => spans.map(s => s.textContent)")
    assert pieces == [tokenizer.decode([i]).replace(" ", "_") for i in tokenizer.encode(text)]
    greedy = contract.translate(model, tokenizer, text, 1)["output"]
    outputs = page.eval_on_selector_all("div.course-model .attn-outputs dd", "dds => dds.map(d => d.textContent)")
    assert outputs[0].startswith(greedy + " (log P") and outputs[1].startswith(expected["output"] + " (log P")
    # nothing typed: a message, and the page still answers
    page.fill("div.course-model textarea", "")
    page.click("div.course-model button.cm-go")
    page.wait_for_function("() => document.querySelector('div.course-model .cm-status').textContent.includes('type')")
    assert page.is_hidden("div.course-model dl.cm-result")
    # a character the vocabulary cuts into bytes: the box says so
    page.fill("div.course-model textarea", "I love pizza \U0001f355!")
    page.click("div.course-model button.cm-go")
    page.wait_for_selector("div.course-model dd.cm-split", timeout=60_000)
    assert "\U0001f355" in page.text_content("div.course-model dd.cm-split")
    page.set_viewport_size({"width": PHONE, "height": 900})
    wide = page.evaluate("() => document.documentElement.scrollWidth > document.documentElement.clientWidth")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert not wide, "the box scrolls the page sideways on a phone"
    assert not page.errors, page.errors


def test_chapter_9_has_the_box_after_its_explorer_and_loads_the_weights_only_when_asked(book_build, browser):  # noqa: F811
    _, html = book_build
    page = browser.new_page()
    try:
        page.goto((html / CHAPTER).as_uri(), wait_until="load")
        page.wait_for_selector("div.course-model.cm-ready")
        after = page.evaluate(
            "() => document.querySelector('div.attn-explorer').compareDocumentPosition("
            "document.querySelector('div.course-model')) & Node.DOCUMENT_POSITION_FOLLOWING"
        )
        assert after
        assert page.evaluate("() => window.COURSE_MODEL_DATA === undefined")  # 13 MB, not loaded by a mere visit
        answer = page.evaluate("() => window.courseModel.translate('Tom is a dwarf.', {beam: 4})")
        assert answer["pieces"] == ["Tom", "Ġis", "Ġa", "Ġd", "w", "ar", "f", "."]
    finally:
        page.close()


@pytest.mark.parametrize("width", [1280, PHONE])
def test_no_serious_accessibility_fault_on_the_try_page(book_build, browser, width):  # noqa: F811
    axe = pytest.importorskip("axe_playwright_python", reason="the dev extra's axe-playwright-python: `make venv`")
    _, html = book_build
    page = browser.new_page()  # a page of its own: axe reads the style sheets, which the module's page has in use
    page.set_viewport_size({"width": width, "height": 900})
    try:
        page.goto((html / TRY).as_uri(), wait_until="load")
        page.click("div.course-model button.cm-go")  # the example sentence: the box with its answer and its explorer
        page.wait_for_selector("div.course-model .attn-explorer-typed.attn-ready", timeout=60_000)
        page.add_script_tag(content=(Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8"))
        result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")  # colour contrast included
        faults = [
            f"{v['impact']} {v['id']} ({len(v['nodes'])}x, e.g. {v['nodes'][0]['target']})"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert not faults, faults
        wide = page.evaluate("() => document.documentElement.scrollWidth > document.documentElement.clientWidth")
        assert not wide, f"the page scrolls sideways at {width} px"
    finally:
        page.close()


def test_without_a_worker_the_page_translates_on_its_main_thread_and_stays_responsive(book_build, browser, reference):  # noqa: F811
    _, html = book_build
    model, tokenizer = reference
    text = UNUSUAL[-1]  # 200 characters: the longest search of the module
    page = browser.new_page()
    page.add_init_script("window.Worker = undefined;")  # as where a browser refuses a Worker from a Blob URL
    try:
        page.goto((html / TRY).as_uri(), wait_until="load")
        answer = page.evaluate(
            """async (text) => {
                 let ticks = 0;
                 const timer = setInterval(() => ticks++, 10);  // runs only while the page's thread is free
                 const started = performance.now();
                 const result = await window.courseModel.translate(text, {beam: 4});
                 clearInterval(timer);
                 return {result, ticks, ms: performance.now() - started, where: window.courseModel.where};
               }""",
            text,
        )
        assert answer["where"] == "main thread"
        assert answer["result"] == contract.translate(model, tokenizer, text, 4)
        assert answer["ticks"] >= answer["ms"] / 200, answer  # the page answered at least five times a second
    finally:
        page.close()
