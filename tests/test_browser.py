"""End to end, in a real browser: the reader's book and the student's notebook in JupyterLab.

Headless Chromium from the system's packages (`apt-get install chromium`), driven by Playwright for
Python (the `dev` extra, which `make venv` installs); nothing is downloaded at run time. Without either,
every test here is skipped and says why.

- The book (conftest.py's `book_build`, the same build as tests/test_book.py): every internal link and
  image resolves; with the network cut off, every equation renders (MathJax ships with the book) and no
  page raises a script error; figures have real alt text; at 1280 px no code cell of chapter 5 scrolls
  sideways; at 400 px (a phone) the ☰ button opens the navigation and a chapter can be reached from it.
- The student (a copy of notebooks/05_self_attention.ipynb in a live JupyterLab): Kernel > Restart Kernel
  and Run All Cells reaches the last cell; exercise 5.1 solved passes its self-check; broken (a
  SyntaxError) its self-check says the cell did not run instead of passing the reference; and Restart
  and Run All with the broken exercise still reaches the end, the later cells using the reference.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from test_figures import ALT_TEXT_CHAPTERS, alt_text_problem
from test_release import CODE_COLUMN

CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
INSTALL = "install it with `make chromium` (Debian/Ubuntu: apt-get install chromium), then `make venv` for Playwright"
if CHROMIUM is None:
    pytest.skip(f"the browser test needs Chromium: {INSTALL}", allow_module_level=True)
try:
    from playwright.sync_api import sync_playwright
except ImportError:
    pytest.skip(f"the browser test needs Playwright for Python (the dev extra): {INSTALL}", allow_module_level=True)

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
LOCAL = ("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def browser():
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=ARGS, headless=True, viewport={"width": 1280, "height": 900}
        )
        offline = []

        def cut_off(route):  # the network is off: only this machine answers (a server of its own, or its files)
            url = urlsplit(route.request.url)
            if url.scheme != "file" and url.hostname not in LOCAL:
                offline.append(route.request.url)
                return route.abort("internetdisconnected")
            return route.continue_()

        context.route("**/*", cut_off)
        context.set_default_timeout(120_000)  # a busy CI machine is slow to load a page, not wrong
        context.offline_requests = offline
        yield context
        context.close()


# --- the reader ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(book_build):
    """The built book, served on this machine over HTTP, as a reader's web server would."""
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield html, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.images, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])


@functools.cache
def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _pages(html: Path) -> list[Path]:
    return sorted(p for p in html.rglob("*.html") if "_static" not in p.parts)


def test_every_internal_link_and_image_resolves(site):
    html, _ = site
    broken = []
    for page in _pages(html):
        parsed = _parse(page)
        for ref in parsed.links + parsed.images:
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith(("mailto:", "//")):
                continue  # external: not this test's business (and not reachable offline)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(html)}: {ref} (no such file)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in _parse(target).ids:
                broken.append(f"{page.relative_to(html)}: {ref} (no element with id {parts.fragment!r})")
    assert not broken, f"{len(broken)} broken: " + "; ".join(broken[:20])


def _wait_for_math(page) -> None:
    """Until MathJax has typeset the page (a page without equations does not load it)."""
    page.wait_for_function(
        "() => !document.querySelector('.math') || "
        "(window.MathJax && window.MathJax.startup && window.MathJax.startup.promise)",
        timeout=60_000,
    )
    page.evaluate(
        "() => window.MathJax && window.MathJax.startup ? window.MathJax.startup.promise.then(() => true) : true"
    )


def test_equations_render_offline_and_pages_run_without_script_errors(site, browser):
    html, base = site
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    total = 0
    for path in _pages(html):
        if path.name in ("search.html", "genindex.html"):
            continue
        page.goto(urljoin(base, path.relative_to(html).as_posix()), wait_until="load")
        _wait_for_math(page)
        math = page.evaluate("""() => {
            const all = [...document.querySelectorAll('.math')];
            return {total: all.length,
                    rendered: all.filter(e => e.querySelector('mjx-container')).length,
                    errors: document.querySelectorAll('mjx-merror').length};
        }""")
        total += math["total"]
        assert math["rendered"] == math["total"] and math["errors"] == 0, f"{path.name}: {math}"
    page.close()
    assert total > 500, f"only {total} equations in the whole book?"
    assert not errors, errors
    assert not any("mathjax" in url.lower() for url in browser.offline_requests), browser.offline_requests


def test_figures_have_alt_text(site):
    html, _ = site
    problems = []
    for chapter in ALT_TEXT_CHAPTERS:
        path = html / "solutions" / f"{chapter}.html"
        for src in re.findall(r"<img\b[^>]*>", path.read_text(encoding="utf-8")):
            alt = re.search(r'\balt="([^"]*)"', src)
            problem = alt_text_problem(alt.group(1) if alt else None)
            if problem:
                problems.append(f"{path.name}: an image {problem}")
    assert not problems, problems


@pytest.mark.parametrize("page_name, at_least", [("05_self_attention", 3), ("08_transformer", 5)])
def test_the_diagrams_show_at_their_natural_size(site, browser, page_name, at_least):
    # The code-drawn diagrams are SVG images: each must load, say what it shows, and fit the column unshrunk (the
    # phone's copy, hidden at this width, takes no part: tests/test_browser_phone.py reads it).
    html, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + f"solutions/{page_name}.html", wait_until="load")
    diagrams = page.evaluate("""() => [...document.querySelectorAll('article img[src$=".svg"]')]
      .filter(img => getComputedStyle(img).display !== 'none').map(img => {
        img.scrollIntoView();
        return {loaded: img.complete && img.naturalWidth > 0, natural: img.naturalWidth,
                shown: img.getBoundingClientRect().width, alt: img.getAttribute('alt')};
    })""")
    page.locator('article img[src$=".svg"]').first.scroll_into_view_if_needed()
    shots = Path(os.environ.get("BROWSER_SCREENSHOTS", tempfile.gettempdir()))
    page.screenshot(path=str(shots / f"diagram-{page_name}.png"))
    page.close()
    assert len(diagrams) >= at_least, diagrams
    for d in diagrams:
        assert d["loaded"] and d["shown"] >= 0.95 * d["natural"], d
        assert alt_text_problem(d["alt"]) is None, d


def test_reading_width_at_1280_px(site, browser):
    html, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + "solutions/05_self_attention.html", wait_until="load")
    layout = page.evaluate("""() => {
        const pres = [...document.querySelectorAll('article pre')];
        const search = [...document.querySelectorAll('input[type=search], .search-button-field, .search-button')]
            .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0);
        return {text: document.querySelector('article p').getBoundingClientRect().width,
                blocks: pres.length,
                scrolling: pres.filter(p => p.scrollWidth > p.clientWidth + 1).length,
                search: search.length};
    }""")
    page.screenshot(path=str(Path(os.environ.get("BROWSER_SCREENSHOTS", tempfile.gettempdir())) / "book-1280.png"))
    page.close()
    assert layout["text"] >= 760, layout
    assert layout["blocks"] >= 40 and layout["scrolling"] == 0, layout
    assert layout["search"] == 1, layout


def test_the_menu_button_opens_the_navigation_on_a_phone(site, browser):
    _, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": 400, "height": 800})
    page.goto(base + "solutions/05_self_attention.html", wait_until="load")
    # exactly the chapter's link: the known-mistakes page of chapter 6 names the chapter too
    link = page.locator(".bd-sidebar-primary").get_by_role("link", name="Multi-head attention", exact=True)
    assert not link.is_visible() or link.bounding_box()["x"] < 0
    page.locator("button.primary-toggle:visible").first.click()
    page.wait_for_timeout(500)  # the drawer slides in
    box = link.bounding_box()
    assert link.is_visible() and box and 0 <= box["x"] < 400, f"the navigation did not open: {box}"
    page.screenshot(path=str(Path(os.environ.get("BROWSER_SCREENSHOTS", tempfile.gettempdir())) / "book-400-menu.png"))
    link.click()
    page.wait_for_url(re.compile(r"06_multihead_attention\.html"))
    page.close()


# --- the reader's page at every width (issue: nothing cut off, labels readable, search from a file, accessibility) ---

PHONE = 400
# The figures' shrink limits on a phone (book/_static/course.js): a diagram is shown at its size, a plot at 80 %.
MAX_SHRINK = {"svg": 1.0, "png": 1.25}
LEAST_MATH = 0.8  # course.js: how much smaller a display equation may be drawn on a phone
SMALLEST_LABEL = 8.0  # px: the smallest text of a code-drawn diagram, on a phone, in chapters 5, 8 and 9

LAYOUT = """() => {
  const over = (e, slack = 1) => e.scrollWidth > e.clientWidth + slack;
  const equations = [...document.querySelectorAll('mjx-container[display="true"]')].map(c => {
    const svg = c.querySelector('svg');
    return {width: Math.round(svg ? svg.getBoundingClientRect().width : 0), box: Math.round(c.clientWidth),
            scale: parseFloat(getComputedStyle(c).fontSize) / parseFloat(getComputedStyle(c.parentElement).fontSize),
            text: ((c.closest('.math') || c).textContent || '').trim().slice(0, 50)};
  });
  // a table printed as text scrolls as a whole on a phone, focusable (course.js; tests/test_browser_phone.py)
  const code = [...document.querySelectorAll('article pre')]
    .filter(p => over(p) && !(p.classList.contains('course-table-text') && p.tabIndex === 0))
    .map(p => p.textContent.trim().slice(0, 50));
  // a plot's copy for the other width (course.css hides it) takes no part
  const figures = [...document.querySelectorAll('div.cell_output img, div.output img')]
    .filter(i => i.naturalWidth > 0 && getComputedStyle(i).display !== 'none').map(i => {
      const box = i.parentElement;
      return {src: i.getAttribute('src'), natural: i.naturalWidth, shown: i.getBoundingClientRect().width,
              scrolls: ['auto', 'scroll'].includes(getComputedStyle(box).overflowX) || !over(box)};
    });
  // How many characters a line of a code cell holds before it wraps (wrapped lines restart at column 0).
  let columns = null;
  const cell = document.querySelector('div.cell_input pre');
  if (cell) {
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(200);
    cell.appendChild(probe);
    const style = getComputedStyle(cell);
    const inner = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    columns = Math.floor(inner / (probe.getBoundingClientRect().width / 200));
    probe.remove();
  }
  return {page: document.documentElement.scrollWidth, viewport: window.innerWidth, equations, code, figures, columns};
}"""


def _open(page, url: str) -> None:
    page.goto(url, wait_until="load")
    _wait_for_math(page)
    page.wait_for_function("() => [...document.images].every(i => i.complete)")


def test_nothing_is_cut_off_at_1280_px_or_on_a_phone(site, browser):
    # Every display equation fits its column: at 1280 px at its own size, on a phone at LEAST_MATH of it or more
    # (long ones are stacked over lines where they are written; course.js draws a wide one smaller on a phone).
    # No code block scrolls sideways (but for a table printed as text on a phone, which scrolls as a whole and can
    # be reached with the keyboard), and a code cell's line holds CODE_COLUMN characters at 1280 px (no notebook's
    # code line is longer: test_release), so that no line of code wraps. On a 400 px phone the page itself never
    # scrolls sideways: a figure wider than the column scrolls inside its own box, and keeps at least 1 / MAX_SHRINK
    # of its size. Every page of the book.
    html, base = site
    page = browser.new_page()
    problems, equations, figures = [], 0, 0
    for width in (1280, PHONE):
        page.set_viewport_size({"width": width, "height": 900})
        for path in _pages(html):
            if path.name in ("search.html", "genindex.html", "index.html"):
                continue
            name = path.relative_to(html).as_posix()
            _open(page, urljoin(base, name))
            layout = page.evaluate(LAYOUT)
            if layout["page"] > layout["viewport"]:
                problems.append(f"{width} px, {name}: the page scrolls sideways ({layout['page']} px)")
            problems += [f"{width} px, {name}: code block scrolls: {c!r}" for c in layout["code"]]
            if width == 1280 and layout["columns"] is not None and layout["columns"] < CODE_COLUMN:
                # test_release checks that no code line of a notebook is longer than CODE_COLUMN characters
                problems.append(f"1280 px, {name}: a code cell's line holds {layout['columns']} characters")
            for e in layout["equations"]:
                equations += 1
                if e["width"] > e["box"] + 1:
                    problems.append(f"{width} px, {name}: equation {e['width']} px in {e['box']} px: {e['text']!r}")
                if e["scale"] < LEAST_MATH - 0.01:
                    problems.append(
                        f"{width} px, {name}: equation drawn at {e['scale']:.2f} of its size: {e['text']!r}"
                    )
            for f in layout["figures"]:
                figures += 1
                kind = "svg" if f["src"].endswith(".svg") else "png"
                if width == PHONE and f["natural"] / f["shown"] > MAX_SHRINK[kind] + 0.01:
                    problems.append(f"{name}: a figure shrunk {f['natural'] / f['shown']:.2f} times on a phone")
                if not f["scrolls"]:
                    problems.append(f"{width} px, {name}: a figure overflows a box that does not scroll")
    page.close()
    assert equations > 60 and figures > 100, (equations, figures)  # the pages were read (at both widths)
    assert not problems, f"{len(problems)}: " + "; ".join(problems[:15])


@pytest.mark.parametrize("chapter", ["05_self_attention", "08_transformer", "09_evaluation"])
def test_labels_are_readable_on_a_phone_and_chapter_9s_maps_are_shown_whole(site, browser, chapter):
    # On a phone: the smallest text of every code-drawn diagram (its SVG font sizes, in the units of its viewBox,
    # times the shown width over the viewBox's) is at least SMALLEST_LABEL px. At 1280 px the attention maps of
    # chapter 9 are shown at their own size, whose labels the notebook sizes at 9 px or more (it asserts so).
    _, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": PHONE, "height": 900})
    _open(page, base + f"solutions/{chapter}.html")
    labels = page.evaluate("""async () => {
      const out = [];
      for (const img of document.querySelectorAll('div.cell_output img[src$=".svg"], div.output img[src$=".svg"]')) {
        if (getComputedStyle(img).display === 'none') continue;  // the wide copy of a diagram drawn for a phone
        const text = await (await fetch(img.src)).text();
        const viewBox = text.match(/viewBox="[\\d.]+ [\\d.]+ ([\\d.]+)/);
        const sizes = [...text.matchAll(/font-size: ?([\\d.]+)px/g)].map(m => parseFloat(m[1]));
        if (viewBox && sizes.length)
          out.push({src: img.getAttribute('src'), px: Math.min(...sizes) * img.getBoundingClientRect().width /
                    parseFloat(viewBox[1])});
      }
      return out;
    }""")
    page.set_viewport_size({"width": 1280, "height": 900})
    _open(page, base + f"solutions/{chapter}.html")
    shrunk = page.evaluate(
        "() => [...document.querySelectorAll('div.cell_output img')]"
        ".filter(i => i.naturalWidth > 0 && getComputedStyle(i).display !== 'none')"
        ".filter(i => i.naturalWidth / i.getBoundingClientRect().width > 1.01).length"
    )
    page.close()
    if chapter != "09_evaluation":
        assert labels, "no diagram found"
    small = [f"{label['src']}: {label['px']:.1f} px" for label in labels if label["px"] < SMALLEST_LABEL]
    assert not small, small
    if chapter == "09_evaluation":
        assert shrunk == 0, f"{shrunk} of chapter 9's figures are shrunk at 1280 px"


# Pages that hold every kind of element the book has: prose, tables and lists, code cells and their outputs, figures,
# the search page. axe's colour-contrast rule reads every element's colours (the syntax highlighting's thousands of
# spans): 10 s on a chapter, so it runs on these; every other rule runs on every page.
CONTRAST_PAGES = (
    "book/preface.html",
    "book/exercises.html",
    "book/instructor.html",
    "book/instructor/grade.html",
    "search.html",
    "solutions/05_self_attention.html",
    "solutions/09_evaluation.html",
)


def test_no_serious_accessibility_fault_on_any_page(site, browser):
    # axe-core (the copy that axe-playwright-python ships, pinned with the dev extra), run in the page: no serious
    # or critical violation, on every page at 1280 px (colour contrast on CONTRAST_PAGES) and on those pages on a
    # phone, where the navigation, the wide figures and tables are laid out otherwise (in boxes that scroll).
    axe = pytest.importorskip("axe_playwright_python", reason="the dev extra's axe-playwright-python: `make venv`")
    script = (Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    html, base = site
    page = browser.new_page()
    faults, checked = [], 0
    names = [p.relative_to(html).as_posix() for p in _pages(html) if p.name not in ("genindex.html", "index.html")]
    for width, pages in ((1280, names), (PHONE, CONTRAST_PAGES)):
        page.set_viewport_size({"width": width, "height": 900})
        for name in pages:
            page.goto(urljoin(base, name), wait_until="load")
            page.add_script_tag(content=script)
            options = {"resultTypes": ["violations"]}
            if width == PHONE or name not in CONTRAST_PAGES:  # a phone shows the same colours
                options["rules"] = {"color-contrast": {"enabled": False}}
            result = page.evaluate("(options) => axe.run(document, options)", options)
            checked += 1
            faults += [
                f"{width} px, {name}: {v['impact']} {v['id']} ({len(v['nodes'])}x, e.g. {v['nodes'][0]['target']})"
                for v in result["violations"]
                if v["impact"] in ("serious", "critical")
            ]
    search = page.evaluate(  # what each shows: its parts not hidden ("Search" where it shows its icon alone)
        "() => [...document.querySelectorAll('button.search-button-field')].map(b => [[...b.children].filter(e => "
        "getComputedStyle(e).display !== 'none').map(e => e.textContent).join(' ').replace(/\\s+/g, ' ').trim() || "
        "b.querySelector('.search-button__default-text').textContent.trim(), b.getAttribute('aria-label')])"
    )
    page.close()
    assert checked >= 20 and not faults, faults
    assert search and all(label == shown for shown, label in search), search  # its name says what it shows


def test_from_a_file_search_and_icons_work_without_errors(book_build, browser):
    # The README tells readers to open _build/html/ from disk: a page and the search page, from file:// URLs, log no
    # error (no refused font, no refused fetch, no theme-mode complaint), the icons are drawn, and search results
    # come with their summaries.
    _, html = book_build
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": PHONE, "height": 900})
    page.goto((html / "solutions" / "05_self_attention.html").as_uri(), wait_until="load")
    page.wait_for_timeout(500)
    icons = page.evaluate("() => document.querySelectorAll('button.primary-toggle svg').length")
    page.goto((html / "search.html").as_uri() + "?q=attention", wait_until="load")
    page.wait_for_function("() => document.querySelectorAll('#search-results li').length >= 5", timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#search-results li')].slice(0, 5).every(li => li.querySelector('p'))",
        timeout=60_000,
    )
    summaries = page.evaluate(
        "() => [...document.querySelectorAll('#search-results li p')].slice(0, 5).map(p => p.textContent)"
    )
    page.close()
    assert icons >= 1, "the menu button has no icon"
    assert all("attention" in s.lower() for s in summaries), summaries
    assert not errors, errors


def test_a_phone_drawer_closes_once_a_link_in_it_is_followed_and_the_book_has_its_icon(site, browser):
    _, base = site
    page = browser.new_page()
    missing = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    page.set_viewport_size({"width": PHONE, "height": 800})
    page.goto(base + "solutions/05_self_attention.html", wait_until="load")
    page.locator("button.secondary-toggle:visible").first.click()  # this page's sections
    page.wait_for_timeout(500)
    assert page.evaluate("() => document.getElementById('pst-secondary-sidebar-checkbox').checked")
    page.locator(".bd-sidebar-secondary a.nav-link").nth(2).click()
    page.wait_for_timeout(500)
    closed = page.evaluate("() => !document.getElementById('pst-secondary-sidebar-checkbox').checked")
    icon = page.evaluate(
        "() => document.querySelector('link[rel~=icon]') && document.querySelector('link[rel~=icon]').href"
    )
    page.close()
    assert closed, "the drawer stayed open over the page after its link was followed"
    assert icon and not missing, missing  # no favicon.ico asked for in vain


# --- the student ----------------------------------------------------------------------------------------------

NOTEBOOK = "05_self_attention.ipynb"
SOLVED = '''# EXERCISE 5.1 (2 points): attention scores
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
'''
BROKEN = '''# EXERCISE 5.1 (2 points): attention scores
def attention_scores(q, k)
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
'''


@pytest.fixture(scope="module")
def lab(course_root, tmp_path_factory):
    """JupyterLab on a copy of a student notebook, with settings and runtime files of its own."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(course_root / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    yield from jupyterlab(root, NOTEBOOK)


def jupyterlab(root: Path, notebook: str):
    """Start JupyterLab in root (settings and runtime files of its own there), yield the URL that opens notebook,
    and stop it: the body of a fixture (tests/test_lab_explorer.py starts its own on another notebook)."""
    home = root / ".jupyter-home"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "OMP_NUM_THREADS": "1",
    }
    env.pop("JUPYTER_PATH", None)
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).parent / "jupyter"
    server = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--ServerApp.root_dir={root}",
            f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabServerApp.extension_manager=readonly",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).read()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("JupyterLab did not start: " + (server.communicate()[0] or "")[-3000:])
            time.sleep(0.5)
    yield f"{url}/lab/tree/{notebook}?token={token}"
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


# What JupyterLab's model of the open notebook holds (the app is exposed with --LabApp.expose_app_in_browser).
CELLS = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    return panel.content.model.sharedModel.cells.map(c => ({
        type: c.cell_type, source: c.getSource(), count: c.cell_type === 'code' ? c.execution_count : null,
        text: c.cell_type === 'code' ? c.outputs.map(o => (o.text || '') + (o.data && o.data['text/plain'] || '')
                                                      + (o.ename ? o.ename + ': ' + o.evalue : '')).join('') : ''}));
}"""
IDLE = """() => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!kernel && kernel.status === 'idle' && panel.sessionContext.kernelDisplayStatus === 'idle';
}"""


def _cells(page) -> list[dict]:
    return page.evaluate(CELLS)


def _index(cells, starts: str) -> int:
    return next(i for i, c in enumerate(cells) if c["source"].lstrip().startswith(starts))


def _wait_idle(page, timeout=240_000) -> None:
    page.wait_for_timeout(300)
    page.wait_for_function(IDLE, timeout=timeout)


def _restart_and_run_all(page) -> list[dict]:
    # Forget the previous run's execution counts first, so that the wait below cannot pass on a stale one.
    page.evaluate("""() => {
        for (const cell of window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells) {
            if (cell.cell_type === 'code') { cell.execution_count = null; }
        }
    }""")
    page.locator(".lm-MenuBar-item", has_text="Kernel").click()
    page.locator(".lm-Menu-item", has_text="Restart Kernel and Run All Cells").click()
    page.locator(".jp-Dialog button.jp-mod-accept").click()  # "Restart"
    # Done when the last code cell has run (a run that stopped early never gets there) and the kernel is idle.
    page.wait_for_function(
        """() => {
        const cells = window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.filter(c => c.cell_type === 'code');
        return cells[cells.length - 1].execution_count !== null;
    }""",
        timeout=300_000,
    )
    _wait_idle(page)
    return _cells(page)


def _edit_and_run(page, index: int, source: str | None, runs: int) -> None:
    """Select cell `index`; replace its code (as a student types it) unless source is None; Shift+Enter `runs` times."""
    page.evaluate(
        """(i) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = i;
        nb.scrollToItem(i);
    }""",
        index,
    )
    if source is not None:
        page.evaluate(
            "(i) => { const nb = window.jupyterapp.shell.currentWidget.content; nb.mode = 'edit'; nb.activeCell.editor.focus(); }",
            index,
        )
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(source)
    else:
        page.evaluate(
            "() => { const nb = window.jupyterapp.shell.currentWidget.content; nb.mode = 'command'; nb.node.focus(); }"
        )
    for _ in range(runs):
        page.keyboard.press("Shift+Enter")
        _wait_idle(page)


def test_a_student_notebook_in_jupyterlab(lab, browser):
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

    # 1. Restart and Run All on the blank notebook: it runs to the end; every check says "not attempted".
    cells = _restart_and_run_all(page)
    code = [c for c in cells if c["type"] == "code"]
    assert all(c["count"] is not None for c in code), "Run All stopped early"
    exercise, check = _index(cells, "# EXERCISE 5.1"), _index(cells, 'attention_scores = check("5.1"')
    assert "⏳ Exercise 5.1 (attention scores): not attempted yet." in cells[check]["text"]

    # 2. Solve 5.1, run it and its check: it passes, in the words of the exercises page.
    _edit_and_run(page, exercise, SOLVED, runs=2)
    cells = _cells(page)
    assert cells[check]["text"] == "✅ Exercise 5.1 (attention scores): passed all 3 checks.\n", cells[check]["text"]

    # 3. Break it (a SyntaxError), run it and the check: no pass on the earlier definition.
    _edit_and_run(page, exercise, BROKEN, runs=2)
    cells = _cells(page)
    assert "SyntaxError" in cells[exercise]["text"]
    verdict = cells[check]["text"]
    assert verdict.startswith("❌ Exercise 5.1") and "did not run to the end" in verdict and "SyntaxError" in verdict, (
        verdict
    )

    # 4. The check alone again, the exercise cell still broken: still no pass.
    _edit_and_run(page, check, None, runs=1)
    assert "did not run to the end" in _cells(page)[check]["text"]

    # 5. Restart and Run All with the broken exercise: it reaches the end, and later cells use the reference.
    cells = _restart_and_run_all(page)
    assert all(c["count"] is not None for c in cells if c["type"] == "code"), "Run All stopped early"
    assert "did not run to the end" in cells[check]["text"]
    after = cells[check + 1]
    assert after["source"].startswith("# The Thinking Machines example") and "tensor(" in after["text"], after
    assert "⏳ Exercise 5.2" in cells[_index(cells, 'decoder_mask = check("5.2"')]["text"]
    page.screenshot(path=str(Path(os.environ.get("BROWSER_SCREENSHOTS", tempfile.gettempdir())) / "lab-05.png"))
    page.close()
    assert not errors, errors
