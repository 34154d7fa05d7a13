"""The course's Sphinx extension (loaded by _config.yml as a local extension): what the book needs
beyond Jupyter Book's defaults, in configuration rather than in patched theme files.

- MathJax ships with the book: a pinned copy from PyPI (django-static-mathjax, MathJax 3.2.2, see
  pyproject.toml) is copied into _static/mathjax, so that equations render offline, from a file://
  URL or an archived copy. The SVG output is used: it needs no web fonts, which browsers refuse to
  load from file:// URLs.
- Each script is included once: sphinx-thebe registers its configuration script again on every read
  of the documents, and the second copy failed with "Identifier 'THEBE_JS_URL' has already been
  declared" on every page.
- The bibliography is labelled author-year ("Vaswani et al., 2017"), the style of the citations in
  the text, instead of pybtex's alpha labels ("VSP+17").
- book/_static/course.css: the layout (a wider reading column, code and outputs that wrap); course.js: the reading
  aids (accessible names, figures on a phone, the drawers, search from a file).
- From a file:// URL the book works as it does when served: the theme's layout (book/_templates/layout.html) drops
  the preload of the icon fonts (Font Awesome draws its icons as inline SVG; each preload was a cross-origin error
  from a file), and course-search-text.js holds each page's text for the search page's summaries (course.js answers
  the search's requests from it, which browsers refuse from files). That text is the article's alone: the theme's
  main element holds its chrome too (the download buttons, the printed "Contents"), where summaries began.
- A change to the book's own CSS, scripts, templates or this extension rebuilds every page: Sphinx copies static
  files only when some page is out of date, so an edit to course.css alone left the old copy in _build.
- The bibliography's entries are list items for assistive technology (role="listitem", not the deprecated
  doc-biblioentry).
- Each plot has a copy laid out for a phone, drawn by a MyST-NB plugin of the package (authoring/narrow_outputs.py);
  the build stops if MyST-NB does not see it.
- The theme starts in its automatic light/dark mode (without a default it logged "Got invalid theme mode").
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from importlib.util import find_spec
from pathlib import Path

MATHJAX_ENTRY = "tex-mml-svg.js"
# What the SVG entry point loads on demand: TeX extensions (\require, autoloaded packages) and the menu.
MATHJAX_PARTS = (
    MATHJAX_ENTRY,
    "input/tex/extensions",
    "ui",
    "a11y/assistive-mml.js",
    "a11y/semantic-enrich.js",
    "a11y/complexity.js",
    "a11y/explorer.js",
    "a11y/sre.js",
)
HERE = Path(__file__).resolve().parent
STATIC = HERE.parent / "_static"


def mathjax_source() -> Path:
    """The es5 folder of the MathJax that pip installed (the package's import name is `mathjax`)."""
    spec = find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "MathJax is not installed: run `make venv` (it installs django-static-mathjax from the lock)"
        )
    es5 = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax" / "es5"
    if not (es5 / MATHJAX_ENTRY).is_file():
        raise RuntimeError(f"no {MATHJAX_ENTRY} in {es5}: reinstall django-static-mathjax")
    return es5


def stage_mathjax(app) -> None:
    """Copy the parts of MathJax the book uses to a folder that Sphinx then copies to _static/mathjax."""
    es5 = mathjax_source()
    staging = Path(app.outdir).parent / "course-static"
    target = staging / "mathjax"
    if not (target / MATHJAX_ENTRY).is_file():
        shutil.rmtree(target, ignore_errors=True)
        for part in MATHJAX_PARTS:
            src, dst = es5 / part, target / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        shutil.copy2(es5.parent / "LICENSE", target / "LICENSE")  # Apache 2.0: the licence travels with the copy
    app.config.html_static_path.append(str(staging))
    app.config.html_static_path.append(str(STATIC))


def use_local_mathjax(app, config) -> None:
    if config.mathjax_path.startswith(("http://", "https://")):
        config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"


def _script_key(script) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    # The same inline script arrives twice, once with filename None (app.add_js_file) and once with ''.
    return str(getattr(script, "filename", script) or ""), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def one_copy_of_each_script(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def register_author_year_style() -> None:
    import sys

    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.alpha import Style as AlphaStyle
    from pybtex.style.labels import BaseLabelStyle

    sys.path.insert(0, str(HERE.parent.parent / "src"))  # a checkout without the package installed
    from transformer_course.authoring.citations import author_year

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            labels = [", ".join(author_year(entry)) for entry in sorted_entries]
            seen: dict[str, int] = {}
            for label in labels:  # "Cho et al., 2014a", "Cho et al., 2014b" when two would read the same
                if labels.count(label) > 1:
                    seen[label] = seen.get(label, 0) + 1
                    label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
                yield label

    class AuthorYearStyle(AlphaStyle):  # sorted by author, year, title, as alpha is
        default_label_style = "course_author_year"

    register_plugin("pybtex.style.labels", "course_author_year", AuthorYearLabels, force=True)
    register_plugin("pybtex.style.formatting", "course_author_year", AuthorYearStyle, force=True)


def default_theme_mode(app, config) -> None:
    config.html_context.setdefault("default_mode", "auto")  # pydata-sphinx-theme reads it from the context


class _ArticleText(HTMLParser):
    """The text of a page's article (<article class="bd-article">, inside role="main"), without scripts, styles and
    heading links: what the search page's summaries quote (course.js reads the same element when served)."""

    SKIP = {"script", "style"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth, self.skipping, self.parts = 0, 0, []

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if self.depth:
            self.depth += tag not in ("br", "img", "hr", "input", "meta", "link", "wbr")
            if tag in self.SKIP or "headerlink" in (attrs.get("class") or ""):
                self.skipping += 1
        elif tag == "article" and "bd-article" in (attrs.get("class") or "").split():
            self.depth = 1

    def handle_startendtag(self, tag, attrs) -> None:
        pass  # <br/>, <img/>: no text, and nothing to close

    def handle_endtag(self, tag) -> None:
        if self.depth:
            if self.skipping and (tag in self.SKIP or tag == "a"):
                self.skipping -= 1
            self.depth -= 1

    def handle_data(self, data) -> None:
        if self.depth and not self.skipping:
            self.parts.append(data)


def write_search_text(app, exception) -> None:
    """course-search-text.js: every page's article text, which the search page shows summaries from."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    texts = {}
    for page in sorted(out.rglob("*.html")):
        relative = page.relative_to(out).as_posix()
        if relative.startswith("_") or relative in ("search.html", "genindex.html"):
            continue
        parser = _ArticleText()
        parser.feed(page.read_text(encoding="utf-8"))
        texts[relative] = re.sub(r"\s+", " ", "".join(parser.parts)).strip()
    payload = json.dumps(texts, ensure_ascii=False).replace("</", "<\\/")
    (out / "_static" / "course-search-text.js").write_text(f"window.COURSE_PAGE_TEXT = {payload};\n", encoding="utf-8")


def _assets_digest() -> str:
    digest = hashlib.sha256()
    for folder in (STATIC, HERE.parent / "_templates"):
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()


def rebuild_when_assets_change(app, env, added, changed, removed) -> list[str]:
    """Every page is out of date when the book's own assets changed since the last build (digest kept in env)."""
    digest = _assets_digest()
    if getattr(env, "course_assets_digest", None) == digest:
        return []
    env.course_assets_digest = digest
    return sorted(env.found_docs)


def bibliography_entries_are_list_items(app, pagename, templatename, context, doctree) -> None:
    """docutils writes the bibliography as role="list" holding role="doc-biblioentry" entries, a role that ARIA 1.2
    deprecated and that assistive technology (and axe-core: a critical fault) does not count as a list's item."""
    body = context.get("body")
    if body and 'role="doc-biblioentry"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


def check_phone_figures(app) -> None:
    """The plots' phone copies are drawn by a MyST-NB plugin found through the package's entry point
    (authoring/narrow_outputs.py): without it, every plot would show at one size and nothing would say so. A stale
    src/transformer_course.egg-info (from an older install) hides the entry point: `make venv` writes it again."""
    from myst_nb.core.render import load_mime_renders

    if not any(plugin.__name__ == "NarrowFigures" for plugin in load_mime_renders()):
        raise RuntimeError(
            "MyST-NB does not see the course's renderer of plots for a phone (the entry point myst_nb.mime_renderers"
            " of pyproject.toml): reinstall the package (`make venv`, or `.venv/bin/pip install -e .`), after removing"
            " a stale src/transformer_course.egg-info"
        )


def setup(app):
    register_author_year_style()
    app.connect("builder-inited", check_phone_figures)
    app.connect("config-inited", use_local_mathjax)
    app.connect("config-inited", default_theme_mode)
    app.connect("build-finished", write_search_text)
    app.connect("env-get-outdated", rebuild_when_assets_change)
    app.connect("builder-inited", stage_mathjax)
    app.connect("html-page-context", one_copy_of_each_script, priority=900)
    app.connect("html-page-context", bibliography_entries_are_list_items)
    app.add_css_file("course.css")
    app.add_js_file("course.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
