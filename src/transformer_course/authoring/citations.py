"""Author-year citation labels from the course's bibliography (book/references.bib).

The book cites with MyST roles, {cite:p}`vaswani2017attention` and {cite:t}`...`, which Sphinx renders
as "[Vaswani et al., 2017]" and "Vaswani et al. [2017]". Two other places need the same words:

- the book's bibliography, whose entries are labelled "Vaswani et al., 2017" to match (the pybtex
  style registered by book/_ext/course_book.py), and
- the student notebooks, where JupyterLab would show the raw role: the release tool rewrites each role
  as plain text, "(Vaswani et al., 2017)" or "Vaswani et al. (2017)".
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

# {cite:p}`key`, {cite:t}`key1,key2`, and the other sphinxcontrib-bibtex variants ({cite:ps}, {cite:alp} ...)
ROLE = re.compile(r"\{cite:(\w+)\}`([^`]+)`")


def _plain(latex: str) -> str:
    from pybtex.richtext import Text

    return str(Text.from_latex(latex)).replace("{", "").replace("}", "")


def authors(entry) -> str:
    """'Vaswani et al.', 'Hochreiter and Schmidhuber', 'Graves' (or the editors, or the title's first word)."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    last = [_plain(" ".join(p.prelast_names + p.last_names)) for p in people]
    if not last:
        return _plain(entry.fields.get("organization", entry.fields.get("title", "Anonymous")).split()[0])
    if len(last) == 1:
        return last[0]
    if len(last) == 2:
        return f"{last[0]} and {last[1]}"
    return f"{last[0]} et al."


def author_year(entry) -> tuple[str, str]:
    return authors(entry), _plain(entry.fields.get("year", "n.d."))


@cache
def load(bib: Path) -> dict[str, tuple[str, str]]:
    """Citation key -> (authors, year) for every entry of a .bib file."""
    from pybtex.database import parse_file

    data = parse_file(str(bib), bib_format="bibtex")
    return {key: author_year(entry) for key, entry in data.entries.items()}


def render_roles(text: str, entries: dict[str, tuple[str, str]]) -> str:
    """Replace each {cite:...} role by its author-year text; an unknown key is an error."""

    def replace(match: re.Match) -> str:
        kind, keys = match.group(1), [k.strip() for k in match.group(2).split(",") if k.strip()]
        unknown = [k for k in keys if k not in entries]
        if unknown:
            raise KeyError(f"citation key(s) {', '.join(unknown)} not in the bibliography")
        if kind.startswith("t"):  # textual: Vaswani et al. (2017)
            return "; ".join(f"{entries[k][0]} ({entries[k][1]})" for k in keys)
        inner = "; ".join(f"{entries[k][0]}, {entries[k][1]}" for k in keys)
        return inner if kind.startswith("alp") else f"({inner})"

    return ROLE.sub(replace, text)
