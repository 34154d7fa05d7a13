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

        def cut_off(route):  # the network is off: only this machine answers
            if urlsplit(route.request.url).hostname not in LOCAL:
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
    # The code-drawn diagrams are SVG images: each must load, say what it shows, and fit the column unshrunk.
    html, base = site
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + f"solutions/{page_name}.html", wait_until="load")
    diagrams = page.evaluate("""() => [...document.querySelectorAll('article img[src$=".svg"]')].map(img => {
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
    link = page.locator(".bd-sidebar-primary a", has_text="Multi-head attention")
    assert not link.is_visible() or link.bounding_box()["x"] < 0
    page.locator("button.primary-toggle:visible").first.click()
    page.wait_for_timeout(500)  # the drawer slides in
    box = link.bounding_box()
    assert link.is_visible() and box and 0 <= box["x"] < 400, f"the navigation did not open: {box}"
    page.screenshot(path=str(Path(os.environ.get("BROWSER_SCREENSHOTS", tempfile.gettempdir())) / "book-400-menu.png"))
    link.click()
    page.wait_for_url(re.compile(r"06_multihead_attention\.html"))
    page.close()


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
    yield f"{url}/lab/tree/{NOTEBOOK}?token={token}"
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
