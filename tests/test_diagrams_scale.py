"""Chapter 11's diagrams: tiled attention's tiles, query heads sharing key/value heads, RoPE's rotated pairs and a
stack of sliding windows' reach. Each renders cleanly (tests/test_diagrams.py checks every public diagram too),
names its numbers in its alt text, and draws what the chapter's code computes: the tiles tile_schedule visits,
the grouping i // (n_heads / n_kv_heads), the angles rotary_angles gives, the cells reachability shades."""

import functools
import math
import re
import xml.etree.ElementTree as ET

import pytest
import torch

from transformer_course import diagrams as D
from transformer_course.models.rotary import rotary_angles
from transformer_course.models.sliding_window import reachability, receptive_field
from transformer_course.models.tiled_attention import tile_schedule

NS = "{http://www.w3.org/2000/svg}"

CASES = {
    "tiles": (D.tiled_attention_tiles, {}),
    "tiles_uneven": (D.tiled_attention_tiles, {"n": 7, "block": 3}),
    "tiles_full": (D.tiled_attention_tiles, {"n": 6, "block": 4, "causal": False}),
    "tiles_16": (D.tiled_attention_tiles, {"n": 16, "block": 1}),
    "heads": (D.query_key_value_heads, {}),
    "heads_multi_head": (D.query_key_value_heads, {"n_heads": 4, "n_kv_heads": 4}),
    "heads_multi_query": (D.query_key_value_heads, {"n_heads": 16, "n_kv_heads": 1}),
    "rotary": (D.rotary_pairs, {}),
    "rotary_12": (D.rotary_pairs, {"d_head": 12, "positions": [0, 1, 3, 40]}),
    "window": (D.sliding_window_reach, {}),
    "window_cut": (D.sliding_window_reach, {"t": 5, "window": 3, "layers": 3}),
    "window_16": (D.sliding_window_reach, {"t": 16, "window": 4, "layers": 6}),
}


@functools.cache
def draw(name: str) -> D.Diagram:
    function, kwargs = CASES[name]
    return function(**kwargs)


def ids(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [e.get("id") for e in root.iter() if e.get("id") and "_" not in e.get("id") and e.tag != NS + "clipPath"]


def indices(svg: str, prefix: str) -> set[tuple[int, ...]]:
    """The numbers after prefix in ids of the form prefix-<numbers>: {(0, 1), ...} for tile-computed-0-1, ..."""
    found = (re.fullmatch(rf"{re.escape(prefix)}((?:-\d+)+)", i) for i in ids(svg))
    return {tuple(int(v) for v in m.group(1)[1:].split("-")) for m in found if m}


def texts(svg: str) -> list[str]:
    """The texts drawn; one with math in it is a span per character (the math's own letters last)."""
    joined = ("".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{NS}text"))
    return [re.sub(r"\n *", "", t).replace("\xa0", " ") for t in joined]


@pytest.mark.parametrize("name", CASES)
def test_chapter_11_diagrams_render_cleanly(name):
    d = draw(name)
    root = ET.fromstring(d.svg)
    assert d.problems == (), d.problems  # no overlaps, nothing outside its box or the figure, no arrow across a box
    assert d.width <= 7 and float(root.get("width").removesuffix("pt")) <= 7 * 72 + 1e-6
    assert root.find(f"{NS}title").text == d.alt and len(d.alt.split()) >= 12
    found = ids(d.svg)
    assert len(found) == len(set(found)) == sum(d.parts.values())
    for text in root.iter(f"{NS}text"):  # readable at the natural size
        assert float(re.search(r"font-size: ([\d.]+)px", text.get("style") or "font-size: 9px").group(1)) >= 9


@pytest.mark.parametrize("name", ["tiles", "tiles_uneven", "tiles_full", "tiles_16"])
def test_tiles_are_the_ones_tile_schedule_computes(name):
    kwargs = {"n": 8, "block": 2, "causal": True, **CASES[name][1]}
    n, b, causal = kwargs["n"], kwargs["block"], kwargs["causal"]
    d = draw(name)
    schedule = tile_schedule(n, n, b, causal)
    blocks = -(-n // b)
    computed, skipped = indices(d.svg, "tile-computed"), indices(d.svg, "tile-skipped")
    assert computed == {(i0 // b, j0 // b) for i0, _, j0, _ in schedule} and len(computed) == len(schedule)
    assert len(skipped) == blocks * blocks - len(schedule) and not computed & skipped
    if causal:  # skipped: exactly the tiles whose every key comes after every query
        assert skipped == {(q, k) for q in range(blocks) for k in range(blocks) if k * b > min(n, q * b + b) - 1}
    # Every score is drawn once: kept, computed then masked (a causal tile's future keys), or never computed.
    score, masked, unvisited = (indices(d.svg, p) for p in ("score", "masked", "unvisited"))
    assert len(score) + len(masked) + len(unvisited) == n * n
    assert score == {(i, j) for i in range(n) for j in range(n) if not causal or j <= i}
    assert all(j > i and (i // b, j // b) in computed for i, j in masked)
    assert all((i // b, j // b) in skipped for i, j in unvisited)
    assert f"{len(schedule)} of the {blocks * blocks} tiles are computed" in d.alt
    assert f"O(block²) = {b * b} number" in d.alt and f"O(n²) = {n * n}" in d.alt and "running maximum m" in d.alt
    assert ids(d.svg).count("state") == 1


@pytest.mark.parametrize(
    ("name", "h", "g", "kind"),
    [
        ("heads", 8, 2, "Grouped-query"),
        ("heads_multi_head", 4, 4, "Multi-head"),
        ("heads_multi_query", 16, 1, "Multi-query"),
    ],
)
def test_each_query_head_reads_its_groups_key_value_head(name, h, g, kind):
    d = draw(name)
    assert indices(d.svg, "query-head") == {(i,) for i in range(h)}
    assert indices(d.svg, "kv-head") == {(k,) for k in range(g)}
    assert indices(d.svg, "reads") == {(i, i // (h // g)) for i in range(h)}  # one line per query head
    assert d.alt.startswith(f"{kind} attention with {h} query head")
    ratio = {"heads": "2/8 = 1/4", "heads_multi_head": None, "heads_multi_query": "1/16"}[name]
    assert (f"cache is {ratio} the size of" if ratio else "cache is the same as multi-head") in d.alt
    shown = f"cache: {ratio} of multi-head attention's" if ratio else "cache: one key/value head per query head"
    assert any(t.startswith(f"key/value {shown}") for t in texts(d.svg)), texts(d.svg)


@pytest.mark.parametrize("name", ["rotary", "rotary_12"])
def test_rotary_vectors_are_turned_by_rotary_angles(name):
    kwargs = {"d_head": 8, "positions": (0, 1, 2), **CASES[name][1]}
    d_head, positions = kwargs["d_head"], list(kwargs["positions"])
    d = draw(name)
    angles = rotary_angles(torch.tensor(positions), d_head)  # (positions, d_head / 2)
    root = ET.fromstring(d.svg)
    drawn = indices(d.svg, "vector")
    assert drawn == {(i, p) for i in range(d_head // 2) for p in positions}
    for i, p in drawn:
        shaft = next(e for e in root.iter() if e.get("id") == f"vector-{i}-{p}").find(f"{NS}path").get("d")
        x0, y0, x1, y1 = (float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", shaft)[:4])
        turned = math.atan2(y0 - y1, x1 - x0)  # the SVG's y grows downwards
        expected = float(angles[positions.index(p), i])
        assert math.remainder(turned - expected, 2 * math.pi) == pytest.approx(0, abs=1e-3), (i, p)
    last = max(positions)
    for i in range(d_head // 2):
        assert f"{math.degrees(float(angles[positions.index(last), i])):.1f}°" in d.alt
    assert "first pair turns far" in d.alt and f"d_head = {d_head}" in d.alt


@pytest.mark.parametrize(
    ("name", "t", "w", "layers"), [("window", 12, 3, 3), ("window_cut", 5, 3, 3), ("window_16", 16, 4, 6)]
)
def test_sliding_window_shades_what_reaches_the_last_position(name, t, w, layers):
    d = draw(name)
    field = receptive_field(w, layers)
    for layer in range(layers + 1):
        row = reachability(t, w, layers - layer)[t - 1]
        assert {j for l, j in indices(d.svg, "reached") if l == layer} == {int(j) for j in row.nonzero()}
        assert len({j for l, j in indices(d.svg, "unreached") if l == layer}) == t - int(row.sum())
    shaded = len({j for l, j in indices(d.svg, "reached") if l == 0})
    assert shaded == min(field, t)  # the receptive field, unless the sequence starts first
    reached = indices(d.svg, "reached")
    for layer, i, j in indices(d.svg, "attends"):  # each line: a reached position reading a key in its window
        assert 0 <= i - j < w and (layer, i) in reached and (layer - 1, j) in reached
    assert f"{layers} × ({w} − 1) + 1 = {field} position" in d.alt
    assert ("cut to" in d.alt) == (field > t)


def test_the_defaults_name_their_numbers():
    assert "7 positions" in draw("window").alt and "10 of the 16 tiles" in draw("tiles").alt
    assert "114.6°" in draw("rotary").alt and "2/8 = 1/4" in draw("heads").alt


BAD = [
    (D.tiled_attention_tiles, {"n": 17}, "n must be from 2 to 16"),
    (D.tiled_attention_tiles, {"n": 8, "block": 9}, "block"),
    (D.tiled_attention_tiles, {"causal": "yes"}, "causal"),
    (D.query_key_value_heads, {"n_heads": 8, "n_kv_heads": 3}, "not divisible"),
    (D.query_key_value_heads, {"n_heads": 4, "n_kv_heads": 8}, "n_kv_heads must be from 1 to 4"),
    (D.query_key_value_heads, {"n_heads": 0}, "n_heads"),
    (D.rotary_pairs, {"d_head": 7}, "even"),
    (D.rotary_pairs, {"d_head": 14}, "d_head"),
    (D.rotary_pairs, {"positions": []}, "1 to 4 different"),
    (D.rotary_pairs, {"positions": [1, 1]}, "1 to 4 different"),
    (D.rotary_pairs, {"positions": [0, 1, 2, 3, 4]}, "1 to 4 different"),
    (D.rotary_pairs, {"positions": [0.5]}, "integer"),
    (D.rotary_pairs, {"positions": 3}, "list of 1 to 4"),
    (D.sliding_window_reach, {"window": 0}, "window"),
    (D.sliding_window_reach, {"t": 4, "window": 5}, "window"),
    (D.sliding_window_reach, {"layers": 7}, "layers"),
]


@pytest.mark.parametrize(("function", "kwargs", "message"), BAD)
def test_bad_arguments_are_value_errors(function, kwargs, message):
    with pytest.raises(ValueError, match=message):
        function(**kwargs)
