"""The book builds from the stored outputs, with every Sphinx warning an error (what `make book` runs), and the
text its search quotes from a file is each page's own.

A test rather than a separate step, so that in `make test` it runs beside the other tests on a free worker.
The build is conftest.py's `book_build`, which tests/test_browser.py reads in a browser.
"""


def test_book_builds_without_warnings(book_build):
    run, html = book_build
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    guide = {"book/instructor.html", "book/instructor/grade.html"}  # the instructor guide and one of its task pages
    assert {"index.html", "solutions/09_beam_search.html", *guide} <= pages, sorted(pages)[:20]


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


def _search_text():
    """book/_ext/course_book.py's parser of a page's article text (the extension is loaded by path, as Sphinx does)."""
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_book
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    return course_book._ArticleText


def test_the_search_text_is_the_articles_not_the_themes():
    # The theme's main element holds its chrome before the article: the download buttons, the printed "Contents".
    # Search summaries quoted it (".ipynb .pdf Positional encoding Contents Setup ..."); the text is the article's.
    page = """<main role="main"><div class="bd-header-article"><button>.ipynb</button><button>.pdf</button></div>
      <div class="onlyprint"><h1>Positional encoding</h1><nav>Contents Setup</nav></div>
      <article class="bd-article"><section><h1>Positional encoding<a class="headerlink" href="#p">#</a></h1>
      <p>At the end of chapter 5<br/>we found <script>x = 1</script>a blind spot.</p></section></article>
      <footer>previous next</footer></main>"""
    parser = _search_text()()
    parser.feed(page)
    text = " ".join("".join(parser.parts).split())
    assert text == "Positional encoding At the end of chapter 5we found a blind spot.", text


def test_the_search_text_of_every_page_starts_with_its_title(book_build):
    # course-search-text.js, which the search page quotes from a file: each page's text begins with its own title
    # (the article's heading), not with the theme's buttons or its "Contents".
    import html as entities
    import json
    import re

    run, html = book_build
    assert run.returncode == 0
    script = (html / "_static" / "course-search-text.js").read_text(encoding="utf-8")
    texts = json.loads(script.removeprefix("window.COURSE_PAGE_TEXT = ").rstrip().removesuffix(";"))
    wrong = []
    for name, text in texts.items():
        title = re.search(r"<title>(.*?) &#8212;", (html / name).read_text(encoding="utf-8"))
        if title and not text.startswith(entities.unescape(title[1])):
            wrong.append(f"{name}: {text[:60]!r}")
    assert len(texts) > 15 and not wrong, wrong
