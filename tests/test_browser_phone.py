"""Issue 57, item 6: the chapters on a 400 px phone, in Chromium.

Every plot and every code-drawn diagram of every chapter page is shown as its phone copy (plots:
evaluation/narrow_figures.py, stored by `make execute`; diagrams: diagrams/_narrow_*.py and the diagrams that draw
both layouts, stored by `make execute` or authoring/diagram_outputs.py; both rendered by authoring/narrow_outputs.py):
whole within the column, at 90 % of its size or more. A plot's text keeps the size it has in the notebook; a diagram's
is no smaller than the book's footnotes (a footnote mark's size, measured in the page). At 1280 px the notebook's own
layout is shown and no phone copy. A table printed as text keeps its lines on a phone and scrolls sideways as a whole
(course.js), reachable with the keyboard.

Every code-drawn diagram has a phone layout (tests/test_diagrams_narrow.py holds the package to it), so at 400 px no
figure of any chapter page is wider than the viewport.

The browser, the network cut-off and the book (COURSE_TEST_BOOK=_build/html to reuse a build) are
tests/test_browser.py's fixtures.
"""

from __future__ import annotations

from urllib.parse import urljoin

from test_browser import PHONE, _open, _pages, browser, site  # noqa: F401  (fixtures)

PLOTS = """() => [...document.querySelectorAll('div.cell_output img, div.cell_output svg')]
  .filter(i => i.tagName === 'IMG' || !i.closest('mjx-container, button')).map(i => {
    const box = i.closest('div.cell_output');
    const column = box.getBoundingClientRect();
    const shown = i.getBoundingClientRect();
    return {src: i.getAttribute('src') || 'an inline svg', cls: i.getAttribute('class') || '',
            natural: i.naturalWidth || shown.width, width: shown.width,
            right: shown.right, left: shown.left, columnRight: column.right, columnLeft: column.left,
            visible: getComputedStyle(i).display !== 'none'};
  })"""

TABLES = """() => [...document.querySelectorAll('div.cell_output pre.course-table-text')].map(p => {
    const style = getComputedStyle(p);
    const lines = p.textContent.replace(/\\n$/, '').split('\\n').length;
    const height = p.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    return {lines, height, lineHeight: parseFloat(style.lineHeight),
            whiteSpace: style.whiteSpace, scrolls: p.scrollWidth > p.clientWidth + 1, tabIndex: p.tabIndex,
            label: p.getAttribute('aria-label'), text: p.textContent.slice(0, 40)};
  })"""


# The smallest text of each diagram shown on a phone: per text element its largest font size (a math sub- or
# superscript is 70 % of it), in the SVG's units, times the width shown over the viewBox's; and a footnote mark's size.
DIAGRAM_TEXT = """async () => {
  const mark = document.createElement('a');
  mark.className = 'footnote-reference brackets';
  mark.textContent = '1';
  document.querySelector('article p').appendChild(mark);
  const footnote = parseFloat(getComputedStyle(mark).fontSize);
  mark.remove();
  const out = [];
  for (const img of document.querySelectorAll('div.cell_output img.course-narrow[src$=".svg"]')) {
    if (getComputedStyle(img).display === 'none') continue;
    const svg = new DOMParser().parseFromString(await (await fetch(img.src)).text(), 'image/svg+xml');
    const box = svg.documentElement.getAttribute('viewBox').split(' ').map(parseFloat);
    const sizes = [...svg.querySelectorAll('text')].map(t => Math.max(
      ...[t, ...t.querySelectorAll('tspan')].map(e => parseFloat((e.getAttribute('style') || '')
        .match(/font(?:-size)?: ?([\\d.]+)px/)?.[1] || 0))));
    out.push({src: img.getAttribute('src'), px: Math.min(...sizes) * img.getBoundingClientRect().width / box[2]});
  }
  return {footnote, diagrams: out};
}"""


def _chapters(html):
    return [p for p in _pages(html) if p.parent.name == "solutions"]


def test_every_plot_is_its_phone_copy_whole_in_the_column_and_the_notebooks_on_a_wide_screen(site, browser):  # noqa: F811
    html, base = site
    page = browser.new_page()
    problems, phone_plots, wide_plots = [], 0, 0
    for width in (PHONE, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        for path in _chapters(html):
            name = path.relative_to(html).as_posix()
            _open(page, urljoin(base, name))
            for plot in page.evaluate(PLOTS):
                if not plot["visible"]:
                    continue
                where = f"{width} px, {name}, {plot['src']}"
                if plot["src"] == "an inline svg":  # a figure an output draws itself: it must fit, that is all
                    if plot["left"] < plot["columnLeft"] - 1 or plot["right"] > plot["columnRight"] + 1:
                        problems.append(f"{where}: {plot['width']:.0f} px wide, wider than its column")
                    continue
                if width == PHONE:
                    phone_plots += 1
                    if "course-narrow" not in plot["cls"]:
                        problems.append(f"{where}: no phone copy shown")
                    if plot["left"] < plot["columnLeft"] - 1 or plot["right"] > plot["columnRight"] + 1:
                        problems.append(f"{where}: {plot['width']:.0f} px wide, wider than its column")
                    if plot["natural"] / plot["width"] > 1.1 + 0.01:
                        problems.append(f"{where}: shrunk {plot['natural'] / plot['width']:.2f} times")
                else:
                    wide_plots += 1
                    if "course-narrow" in plot["cls"]:
                        problems.append(f"{where}: the phone copy shows on a wide screen")
    page.close()
    assert phone_plots > 60 and wide_plots == phone_plots, (phone_plots, wide_plots)
    assert not problems, f"{len(problems)}: " + "; ".join(problems[:15])


def test_a_diagrams_text_on_a_phone_is_no_smaller_than_a_footnote(site, browser):  # noqa: F811
    html, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": PHONE, "height": 900})
    small, measured, footnote = [], [], 0.0
    for path in _chapters(html):
        name = path.relative_to(html).as_posix()
        _open(page, urljoin(base, name))
        found = page.evaluate(DIAGRAM_TEXT)
        footnote = found["footnote"]
        measured += [d["px"] for d in found["diagrams"]]
        small += [f"{name}, {d['src']}: {d['px']:.1f} px" for d in found["diagrams"] if d["px"] < footnote - 0.01]
    page.close()
    assert footnote >= 12 and len(measured) >= 10, (footnote, measured)
    assert not small, f"text smaller than a footnote's {footnote} px: " + "; ".join(small)


def test_a_printed_table_keeps_its_lines_on_a_phone_and_scrolls_as_a_whole(site, browser):  # noqa: F811
    # Chapter 1's timing table (sequence length, two times, their ratio) and chapter 8b's tables: on a phone their
    # lines do not wrap (as many rendered lines as text lines), and where they are wider than the column the block
    # scrolls sideways, focusable and named for a screen reader. At 1280 px nothing of this applies.
    _, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": PHONE, "height": 900})
    found = []
    for chapter in ("01_rnn", "08_transformer_vs_gru"):
        _open(page, base + f"solutions/{chapter}.html")
        tables = page.evaluate(TABLES)
        assert tables, f"{chapter}: no printed table recognised"
        found += tables
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE
    for t in found:
        assert t["whiteSpace"] == "pre", t
        assert abs(t["height"] - t["lines"] * t["lineHeight"]) < t["lineHeight"], t  # no line wrapped
        if t["scrolls"]:
            assert t["tabIndex"] == 0 and t["label"] == "printed table, scrolls sideways", t
    assert any(t["scrolls"] for t in found)
    page.set_viewport_size({"width": 1280, "height": 900})
    _open(page, base + "solutions/01_rnn.html")
    assert page.evaluate(TABLES) == []
    page.close()
