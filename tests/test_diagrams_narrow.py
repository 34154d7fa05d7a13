"""Issue 57, item 6, for the code-drawn diagrams: each diagram with a phone layout (diagrams/_render.LAYOUTS) carries
a copy re-laid out for a 400 px phone's 368 px column: at most 3.75 in (360 px) wide, text of 10 pt (13.3 px, the
book's footnote size) or more, clean by the same layout checks as the wide one, the same ids and alt text, the same
byte for byte in two processes, stored with the notebook's output and rendered by the book's plugin.

The browser's side, every chapter page at 400 px, is tests/test_browser_phone.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from test_diagrams import CASES as COMMON
from test_diagrams import ids
from test_diagrams_families import CASES as FAMILIES
from test_diagrams_scale import CASES as SCALE
from transformer_course import diagrams as D
from transformer_course.authoring.narrow_outputs import NarrowFigures
from transformer_course.diagrams._canvas import NARROW, NARROW_SMALL
from transformer_course.diagrams._render import KEY, LAYOUTS
from transformer_course.evaluation import figure_formatter

NS = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[1]
CASES = {**COMMON, **FAMILIES, **SCALE}
WITH_PHONE = {name: case for name, case in CASES.items() if case[0].__name__ in LAYOUTS}


def test_every_diagram_has_a_phone_layout():
    # A diagram without one would be shown at its own width on a phone, wider than the column.
    assert set(LAYOUTS) == set(D.__all__) - {"Diagram"}
    assert {case[0].__name__ for case in WITH_PHONE.values()} == set(LAYOUTS)  # each one checked below


def _text_sizes(root: ET.Element) -> list[float]:
    """The size of each text as set: its largest font size (a math sub- or superscript is 70 % of it)."""
    sizes = []
    for text in root.iter(f"{NS}text"):
        found = [float(s) for s in re.findall(r"font-size: ?([\d.]+)px", ET.tostring(text, encoding="unicode"))]
        found += [float(s) for s in re.findall(r"font: ?([\d.]+)px", text.get("style") or "")]
        if found:
            sizes.append(max(found))
    return sizes


@pytest.mark.parametrize("name", WITH_PHONE)
def test_every_phone_copy_fits_the_column_with_footnote_sized_text(name):
    function, kwargs = WITH_PHONE[name]
    wide = function(**kwargs)
    phone = wide.narrow
    assert phone is not None and phone.narrow is None
    root = ET.fromstring(phone.svg)
    assert phone.width <= NARROW and float(root.get("width").removesuffix("pt")) <= NARROW * 72 + 1e-6
    assert phone.problems == (), phone.problems
    assert phone.alt == wide.alt and root.find(f"{NS}title").text == wide.alt
    # The same elements, by the same ids: what the tests of the wide diagram count, the phone's copy draws too.
    assert Counter(ids(phone.svg)) == Counter(ids(wide.svg))
    assert phone.parts == wide.parts
    sizes = _text_sizes(root)
    assert sizes and min(sizes) >= NARROW_SMALL, sorted(sizes)[:3]
    # Not the wide diagram scaled down: at least as tall for what it holds, its width the column's.
    assert phone.width < wide.width or wide.width <= NARROW


def test_phone_copies_are_the_same_in_two_processes():
    names = sorted(LAYOUTS)
    here = [hashlib.sha256(getattr(D, n)().narrow.svg.encode()).hexdigest() for n in names]
    code = "\n".join(
        ["import hashlib", "from transformer_course import diagrams as D"]
        + [f"print(hashlib.sha256(D.{n}().narrow.svg.encode()).hexdigest())" for n in names]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == here


def test_a_notebook_output_carries_the_phone_copy_in_its_metadata():
    d = D.multi_head(n_heads=4, d_model=192)
    data, metadata = d._repr_mimebundle_()
    assert data == {"image/svg+xml": d.svg, "text/plain": repr(d)}
    assert metadata == {"image/svg+xml": {KEY: d.narrow.svg}}
    assert KEY == figure_formatter.KEY  # the plots' key: one plugin reads both
    assert d.narrow._repr_mimebundle_()[1] == {}  # the phone's copy has no copy of its own


@dataclasses.dataclass
class _Data:  # what MyST-NB hands a plugin (its MimeData, a dataclass), as far as the plugin reads it
    mime_type: str
    content: str
    output_metadata: dict


def test_the_book_renders_both_copies_of_a_diagram():
    d = D.kv_cache()
    made = []

    def render_image(data):
        made.append(data)
        return [{"classes": []}]

    renderer = SimpleNamespace(render_image=render_image)
    data = _Data("image/svg+xml", d.svg, {"image/svg+xml": {KEY: d.narrow.svg}})
    nodes = NarrowFigures.handle_mime(renderer, data, False)
    assert [n["classes"] for n in nodes] == [["course-wide"], ["course-narrow"]]
    assert [m.content for m in made] == [d.svg, d.narrow.svg]
    assert NarrowFigures.handle_mime(renderer, _Data("image/svg+xml", d.svg, {}), False) is None


def test_the_stored_diagrams_carry_their_phone_copies():
    # Every diagram output of the solution notebooks whose diagram has a phone layout stores its copy, at most the
    # column's width (authoring/diagram_outputs.py writes them without executing the notebooks again).
    found = 0
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                if "image/svg+xml" not in output.get("data", {}):
                    continue
                name = "".join(cell["source"]).strip().splitlines()[-1].split("(")[0].removeprefix("diagrams.")
                narrow = output.get("metadata", {}).get("image/svg+xml", {}).get(KEY)
                assert (narrow is not None) == (name in LAYOUTS), (path.name, name)
                if narrow:
                    found += 1
                    width = float(ET.fromstring(narrow).get("width").removesuffix("pt"))
                    assert width <= NARROW * 72 + 1e-6, (path.name, name, width)
    assert found == 25
