"""The reference Transformer in the built book (issue 52): a Sphinx extension, loaded by _config.yml beside course_book.

- At the start of a build it writes ``_static/model/transformer-ref-model.js``, the model's weights (float16) and
  tokenizer as a script (``transformer_course.reference.browser.write_model_script``): built from the stored .pt,
  never tracked in git, rewritten only when the weights, the tokenizer or the exporter change. A page opened from
  file:// may not fetch a file, but it may load a script.
- Chapter 8's page gets a line under its title that links to the try page (the notebook stays untouched).
- The "Try the model" box, ``<div class="course-model">``, goes on the try page (book/try.md holds its placeholder,
  ``<div class="course-model-here"></div>``, where it loads the weights with the page) and on chapter 9's evaluation
  page, right after the attention explorer (the notebook stays untouched; there the weights load on the first
  translation). Only these pages load book/_static/model/'s scripts: course-model-engine.js (the forward pass and the
  searches), course-model.js (window.courseModel) and course-model-widget.js (the box).
"""

from __future__ import annotations

import html
from pathlib import Path

TRY_PAGE = "book/try"
CHAPTER = "solutions/09_evaluation"
LINKED = "solutions/08_transformer"  # the chapter that trains the model: a line under its title points to the try page
PLACEHOLDER = '<div class="course-model-here"></div>'
EXPLORER = '<div class="attn-explorer">'  # the book's explorer (the typed sentence's has a second class)
SCRIPTS = ("model/course-model-engine.js", "model/course-model.js", "model/course-model-widget.js")
EXAMPLE = "The cat sleeps on the sofa."


def _browser():
    # the installed package (`make venv`); putting src/ first on sys.path instead made importlib.metadata read a
    # stale src/transformer_course.egg-info, whose entry points lack the book's plot renderer (course_book.py)
    from transformer_course.reference import browser

    return browser


def write_weights(app) -> None:
    """The weights' script, in a folder of the build's own that Sphinx copies into _static (as course_book's MathJax)."""
    staging = Path(app.outdir).parent / "course-model-static"
    _browser().write_model_script(staging / "model")
    app.config.html_static_path.append(str(staging))


def widget_html(preload: bool) -> str:
    """The box's element: course-model-widget.js fills it; without scripts, the sentence inside says what it is."""
    limit = _browser().MAX_CHARS
    attributes = f' data-max-chars="{limit}" data-example="{html.escape(EXAMPLE)}"' + (
        " data-preload" if preload else ""
    )
    return (
        f'<div class="course-model"{attributes}>\n'
        '<p class="cm-fallback">Here the course\'s reference Transformer translates a sentence you type, in this page: '
        "it needs JavaScript.</p>\n</div>\n"
    )


def place_widget(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if pagename == LINKED and body and "</h1>" in body:
        end = body.index("</h1>") + len("</h1>")
        link = (
            '\n<p class="cm-link">The model this chapter builds, trained for an hour, translates what you type on '
            '<a href="../book/try.html">Try the model</a>, in your browser.</p>\n'
        )
        context["body"] = body[:end] + link + body[end:]
    if pagename not in (TRY_PAGE, CHAPTER) or not body:
        return
    if pagename == TRY_PAGE:
        if PLACEHOLDER not in body:
            raise ValueError(f"{TRY_PAGE}.md lost its placeholder {PLACEHOLDER}")
        context["body"] = body.replace(PLACEHOLDER, widget_html(preload=True))
    else:
        start = body.find(EXPLORER)
        if start < 0:
            raise ValueError(f"{CHAPTER} holds no attention explorer to put the model's box after")
        end = body.index("</div>", start) + len("</div>")  # the explorer's element holds no other <div>
        intro = (
            '<p class="cm-intro"><strong>Your own sentence.</strong> The same model runs in this page: type English, '
            "and it translates it and draws these maps for it (the weights, 13 MB, load on the first translation).</p>\n"
        )
        context["body"] = body[:end] + "\n" + intro + widget_html(preload=False) + body[end:]
    for script in SCRIPTS:
        app.add_js_file(script)  # called while a page is written: added to that page only
    app.add_css_file("model/course-model.css")


def setup(app):
    app.connect("builder-inited", write_weights)
    app.connect("html-page-context", place_widget)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
