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
- book/_static/course.css: the layout (a wider reading column, code and outputs that wrap).
"""

from __future__ import annotations

import shutil
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
    from transformer_course.citations import author_year

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


def setup(app):
    register_author_year_style()
    app.connect("config-inited", use_local_mathjax)
    app.connect("builder-inited", stage_mathjax)
    app.connect("html-page-context", one_copy_of_each_script, priority=900)
    app.add_css_file("course.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
