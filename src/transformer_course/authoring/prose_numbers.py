"""How the chapters' prose is read for numbers (``claims`` checks them): every number of a markdown cell's running
text, its precision, the scale its unit allows, and the rule that says when it is not a measurement."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Quote", "prose_numbers"]

# A number in prose: 1,920 or 1920 or 30.3; not a piece of a word (float32, W_2), a version or a path.
NUMBER = re.compile(r"(?<![\w.\-/^])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)")
# What the unit after a number says about its scale against the raw values: 88% may be 0.88, 3.6 million 3,600,000.
SCALES = (
    (re.compile(r"\s*(%|per ?cent)"), (100.0,)),
    (re.compile(r"\s*(M\b|million)"), (1e-6,)),
    (re.compile(r"\s*(k\b|thousand)"), (1e-3,)),
    (re.compile(r"\s*(B\b|billion)"), (1e-9,)),
    (re.compile(r"\s*ms\b"), (1e3,)),
    (re.compile(r"\s*(µs|us)\b"), (1e6,)),
    (re.compile(r"\s*(MB|MiB)\b"), (1e-6, 2.0**-20)),
)
# A reference to a part of a text, not a measurement: "chapter 4", "exercises 5.1 and 5.2", "section 3.2.2".
REFERENCE = re.compile(
    r"(?i)\b(chapters?|sections?|exercises?|figures?|tables?|equations?|eqs?\.|ch\.|parts?|§)"
    r"\s*(\d+(\.\d+)*[a-z]?\s*(,|and|or|to|–|-)\s*)*$"
)
# A version: "PyTorch 2.11", "CUDA 13.0", "nbformat 4.5".
SOFTWARE = re.compile(r"(?i)\b(pytorch|torch|cuda|python|sacrebleu|nbformat|jupyter book|version|v)\s*$")
# A digit below 10 that counts things ("3 layers", "2 cores", "4 heads"): followed by a word that is not a unit of
# measurement. "gave 4", "4 times", "3 points" and "5 ms" are measurements and are checked.
COUNTED = re.compile(r"[ -](?!(times|points?|BLEU|ms|s|seconds|nats|per|percent|x)\b)[a-zA-Z*_]")
RANGE_END = re.compile(r"^\s*(to|and|or|–|-)\s*[\d,.]*\d(?=\s*(%|per ?cent|M\b|million|k\b|ms\b|MB|MiB))")


@dataclass
class Quote:
    """One number of the prose: where it stands and what backs it."""

    notebook: str
    cell: str  # the cell's id
    text: str  # as written: "1,920"
    value: float
    decimals: int
    scales: tuple[float, ...]
    sentence: str
    # "output", "assertion", "run", "configuration", "code", "rule: ...", "allowed: ...", or "" (missing)
    backed_by: str = ""


# The prose -------------------------------------------------------------------------------------------------------


def _prose(markdown: str) -> str:
    """The markdown's running text: code, math, roles, link targets, HTML and directive options blanked out (with
    spaces of the same length, so that positions still point into the sentence)."""

    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group())

    for pattern, flags in (
        (r"```.*?```", re.S),
        (r"\$\$.*?\$\$", re.S),
        (r"\$[^$\n]+\$", 0),
        (r"\{[a-z:-]+\}`[^`]*`", 0),
        (r"`[^`\n]+`", 0),
        (r"\]\([^)\s]*\)", 0),
        (r"<[^>]+>", re.S),
        (r"^\s*:[a-z-]+:.*$", re.M),
    ):
        markdown = re.sub(pattern, blank, markdown, flags=flags)
    return markdown


def _sentence(text: str, start: int, end: int) -> str:
    left = max(text.rfind(". ", 0, start), text.rfind("\n\n", 0, start))
    right = min((i for i in (text.find(". ", end), text.find("\n\n", end)) if i >= 0), default=len(text))
    return " ".join(text[left + 1 : right + 1].split())


def _rule(text: str, m: re.Match, value: float) -> str:
    """The rule that says this number is not a measurement, or ''."""
    head = text[max(0, m.start() - 40) : m.start()]
    tail = text[m.end() : m.end() + 12]
    integer = not m.group(2)
    if REFERENCE.search(head):
        return "rule: a chapter, section, exercise or figure number"
    if integer and "," not in m.group() and 1900 <= value <= 2030:
        return "rule: a year"
    if integer and value < 10 and COUNTED.match(tail):
        return "rule: a count below 10 written as a digit"
    if SOFTWARE.search(head):
        return "rule: a software version"
    if re.match(r"-bit\b", tail):
        return "rule: a bit width"
    return ""


def prose_numbers(notebook: str, cell: str, markdown: str) -> list[Quote]:
    """Every number of one markdown cell's prose, with the rule that exempts it where one does."""
    text = _prose(markdown)
    quotes = []
    for m in NUMBER.finditer(text):
        whole, frac = m.group(1), m.group(2) or ""
        decimals = len(frac) - 1 if frac else 0
        value = float(whole.replace(",", "") + frac)
        if not frac:  # 579,000 or 1,900: rounded to its last non-zero digit, keeping two significant digits
            digits = whole.replace(",", "")
            decimals = -min(len(digits) - len(digits.rstrip("0")), max(len(digits) - 2, 0))
        # The unit of a range's last number is the first's too: "71 to 93%", "1.2 and 1.6 ms".
        tail = RANGE_END.sub("", text[m.end() : m.end() + 40], count=1)[:12]
        scales = (1.0,) + next((s for pattern, s in SCALES if pattern.match(tail)), ())
        quote = Quote(notebook, cell, m.group(), value, decimals, scales, _sentence(text, m.start(), m.end()))
        quote.backed_by = _rule(text, m, value)
        quotes.append(quote)
    return quotes
