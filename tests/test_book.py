"""The book builds from the stored outputs, with every Sphinx warning an error (what `make book` runs).

A test rather than a separate step, so that in `make test` it runs beside the other tests on a free worker.
The build is conftest.py's `book_build`, which tests/test_browser.py reads in a browser.
"""


def test_book_builds_without_warnings(book_build):
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    assert {"index.html", "solutions/09_beam_search.html", "book/instructor.html"} <= pages, sorted(pages)[:20]


def test_the_book_ships_mathjax(book_build):
    # Equations render offline: MathJax is served from the book's own _static folder, not from a CDN.
    run, html = book_build
    assert run.returncode == 0
    assert (html / "_static" / "mathjax" / "tex-mml-svg.js").is_file()
    page = (html / "solutions" / "05_self_attention.html").read_text(encoding="utf-8")
    assert "_static/mathjax/tex-mml-svg.js" in page and "cdn.jsdelivr.net" not in page


def test_every_citation_names_one_work(book_build):
    # Two entries that would read the same in the text ("Cho et al., 2014") carry a letter in their year, and the
    # built chapter shows it: a reader can tell which of the two works a citation means.
    from collections import Counter

    from conftest import ROOT
    from transformer_course.authoring.citations import load

    texts = Counter(load(ROOT / "book" / "references.bib").values())
    assert [t for t, n in texts.items() if n > 1] == []
    run, html = book_build
    page = (html / "solutions" / "03_encoder_decoder.html").read_text(encoding="utf-8")
    assert "2014a" in page and "2014b" in page
