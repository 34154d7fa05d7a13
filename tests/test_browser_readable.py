"""The small print of the built book, read in headless Chromium (issue 57's smaller items): the attention explorer's
labels are readable at 1280 px and on a 400 px phone (the GRU's row labels no smaller than SMALLEST_TEXT, one per
row; the names of the outputs on two lines at most, broken between words only), the search quotes each page's own
text (served and from a file), and a phone's search box shows no keyboard shortcut.

The browser, the book and its server are tests/test_browser.py's and conftest.py's; without Chromium or Playwright
this module is skipped, and says why. READABLE measures an explorer; tests/test_lab_explorer.py uses it in JupyterLab.
"""

from __future__ import annotations

from urllib.parse import urljoin

import pytest

from test_browser import PHONE, browser, site  # noqa: F401  (the fixtures)
from test_browser_explorer import BOOK, LIVE, open_chapter

SMALLEST_TEXT = 11.0  # px: no label smaller than the page's footnotes
LONGEST = "I came here to see if there was something I could do to help, "  # the explorer's longest (28 pieces)

# One explorer's labels: the names of its outputs (the lines each takes, its words broken over two lines), and the
# GRU's row labels when its map is shown (their font size in px, lines, how far each is from the middle of its row of
# cells, the row's height). The map's border is 1 px.
READABLE = """(root) => {
  const el = document.querySelector(root);
  const tops = (range) => new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
  const lines = (e) => { const r = document.createRange(); r.selectNodeContents(e); return tops(r).size; };
  const broken = (e) => {
    const text = e.firstChild, out = [];
    let at = 0;
    for (const word of text.textContent.split(' ')) {
      const r = document.createRange();
      r.setStart(text, at);
      r.setEnd(text, at + word.length);
      if (tops(r).size > 1) out.push(word);
      at += word.length + 1;
    }
    return out;
  };
  const names = [...el.querySelectorAll('dl.attn-outputs dt')].map((e) => ({text: e.textContent, lines: lines(e),
                                                                            broken: broken(e)}));
  const fig = el.querySelector('figure.attn-gru-map');
  if (!fig || !fig.checkVisibility()) return {names, gru: null};
  const svg = fig.querySelector('svg').getBoundingClientRect();
  const rows = Math.max(...[...fig.querySelectorAll('rect[data-q]')].map((c) => Number(c.dataset.q))) + 1;
  const row = (svg.height - 2) / rows;
  const labels = [...fig.querySelectorAll('.attn-gru-label')].map((label, q) => {
    const box = label.getBoundingClientRect(), text = label.firstElementChild;
    return {text: text.textContent, title: label.title, px: parseFloat(getComputedStyle(text).fontSize),
            lines: lines(text), cut: text.scrollWidth > text.clientWidth,
            off: Math.abs((box.top + box.bottom) / 2 - (svg.top + 1 + row * (q + 0.5)))};
  });
  return {names, gru: {rows, row, labels}};
}"""


def readable_faults(shown: dict, where: str) -> list[str]:
    """What READABLE found unreadable in one explorer."""
    faults = [f"{where}: {n['text']!r} takes {n['lines']} lines" for n in shown["names"] if n["lines"] > 2]
    faults += [f"{where}: {n['text']!r} breaks within {n['broken']}" for n in shown["names"] if n["broken"]]
    gru = shown["gru"]
    if gru is not None:
        if len(gru["labels"]) != gru["rows"]:
            faults.append(f"{where}: {len(gru['labels'])} labels for {gru['rows']} rows")
        for q, label in enumerate(gru["labels"]):
            if label["px"] < SMALLEST_TEXT or label["lines"] != 1 or label["off"] > 1.5 or gru["row"] < label["px"]:
                faults.append(f"{where}: row {q}'s label {label} in rows of {gru['row']:.1f} px")
            if label["title"] != label["text"] and not label["cut"]:
                faults.append(f"{where}: row {q}'s label {label['text']!r} is titled {label['title']!r}")
    return faults


@pytest.fixture(scope="module")
def chapter(book_build, browser):  # noqa: F811
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    page = open_chapter(browser, html)
    yield page
    page.close()


@pytest.mark.parametrize("width", [1280, PHONE])
def test_the_explorers_labels_are_readable(chapter, width):
    # Was: the GRU's row labels, text in its map's units, 7.3 px for the longest sentence at either width; below.
    page = chapter
    page.set_viewport_size({"width": width, "height": 900})
    try:
        faults, rows = [], 0
        for text in (LONGEST, "I like tulips.", "Stop!"):
            index = page.evaluate(
                f"(t) => [...document.querySelectorAll('{BOOK} select.attn-sentence option')]"
                ".findIndex(o => o.textContent.startsWith(t))",
                text,
            )
            page.select_option(f"{BOOK} select.attn-sentence", str(index))
            shown = page.evaluate(READABLE, BOOK)
            assert shown["gru"] is not None and len(shown["names"]) == 3, shown  # greedy, beam, the GRU's
            rows += shown["gru"]["rows"]
            faults += readable_faults(shown, f"{width} px, {text!r}")
        faults += readable_faults(page.evaluate(READABLE, LIVE), f"{width} px, the typed sentence")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    assert rows > 30 and not faults, faults
    assert not page.errors, page.errors


def _summaries(page, url: str) -> list[tuple[str, str]]:
    """The search page's results for url's query: (the page's address, its summary), once five have theirs."""
    page.goto(url, wait_until="load")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#search-results li')].slice(0, 5).filter(li => li.querySelector('p'))"
        ".length === 5",
        timeout=60_000,
    )
    return page.evaluate(
        "() => [...document.querySelectorAll('#search-results li')].filter(li => li.querySelector('p')).map(li => "
        "[li.querySelector('a').getAttribute('href').split('#')[0], li.querySelector('p').textContent])"
    )


def test_search_summaries_quote_the_page_not_the_theme(site, browser):  # noqa: F811
    # Was: ".ipynb .pdf Positional encoding Contents Setup Self-attention does not know ..." (from a file) and
    # "....pdf" and blank lines (served). Now every summary is a piece of its page's article (book/_ext's text of it,
    # an oracle apart from course.js's reading when served), and the chapter named by the query starts with its title.
    import json

    html, base = site
    text = json.loads(
        (html / "_static" / "course-search-text.js")
        .read_text(encoding="utf-8")
        .removeprefix("window.COURSE_PAGE_TEXT = ")
        .rstrip()
        .removesuffix(";")
    )
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    faults, seen = [], 0
    for how, url in (("served", base), ("from a file", html.as_uri() + "/")):
        for name, summary in _summaries(page, urljoin(url, "search.html?q=positional")):
            seen += 1
            quoted = " ".join(summary.split()).removeprefix("...").removesuffix("...")
            if quoted not in text[name]:
                faults.append(f"{how}, {name}: {quoted[:80]!r}")
            if name == "solutions/07_positional_encoding.html" and not quoted.startswith("Positional encoding "):
                faults.append(f"{how}: chapter 7's summary starts {quoted[:60]!r}")
    page.close()
    assert seen >= 10 and not faults, faults
    assert not errors, errors  # Sphinx warned of a section its query could not find in the page


SEARCH_BOX = """() => ({
  box: document.querySelector('.search-button__search-container form').innerText.trim(),
  hints: [...document.querySelectorAll('.search-button__kbd-shortcut')].filter(e => e.checkVisibility())
    .map(e => e.textContent),
  names: [...document.querySelectorAll('button.search-button-field')].map(b => b.getAttribute('aria-label'))})"""


def test_a_phone_search_box_shows_no_keyboard_shortcut(site, browser):  # noqa: F811
    # Was: on a phone the search box showed "Ctrl+K", of no use without a keyboard. A wide screen keeps it (the box
    # and the sidebar's button), and the button's name says what it shows, after a resize too.
    _, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": PHONE, "height": 900})
    page.goto(base + "solutions/07_positional_encoding.html", wait_until="load")
    page.locator("button.search-button__button:visible").first.click()  # the header's magnifying glass
    page.wait_for_selector(".search-button__search-container form", state="visible")
    phone = page.evaluate(SEARCH_BOX)
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_timeout(300)
    page.locator("button.search-button-field:visible").click()  # the sidebar's "Search Ctrl+K"
    page.wait_for_selector(".search-button__search-container form", state="visible")
    wide = page.evaluate(SEARCH_BOX)
    page.close()
    assert phone["box"] == "" and phone["hints"] == [] and phone["names"] == ["Search"], phone
    assert "Ctrl" in wide["box"] and len(wide["hints"]) == 2 and wide["names"] == ["Search Ctrl+K"], wide
