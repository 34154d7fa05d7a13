"""Chapter 10's diagrams: the decoder-only layer (the decoder's layer without its cross-attention, drawn where that
sub-layer was), the three kinds of layer side by side, and the three families of Transformer by their attention
patterns. Each renders cleanly (tests/test_diagrams.py checks every public diagram too), names what it draws in
its alt text, and draws what it says: the cells of each pattern, and no active cross-attention in a decoder-only
layer."""

import functools
import re
import xml.etree.ElementTree as ET

import pytest

from transformer_course import diagrams as D
from transformer_course.diagrams._canvas import COLOURS
from transformer_course.diagrams.layers import GHOST

NS = "{http://www.w3.org/2000/svg}"

CASES = {
    "decoder_only_post": (D.transformer_layer, {"kind": "decoder-only"}),
    "decoder_only_pre": (D.transformer_layer, {"kind": "decoder-only", "norm": "pre", "d_model": 192, "n_heads": 4}),
    "decoder_post": (D.transformer_layer, {"kind": "decoder"}),
    "decoder_pre": (D.transformer_layer, {"kind": "decoder", "norm": "pre", "d_model": 192, "n_heads": 4}),
    "layer_kinds": (D.layer_kinds, {}),
    "layer_kinds_two_pre": (D.layer_kinds, {"kinds": ("decoder", "decoder-only"), "norm": "pre"}),
    "pre_post_norm_decoder_only": (D.pre_post_norm, {"kind": "decoder-only"}),
    "model_families": (D.model_families, {}),
    "model_families_spanish": (
        D.model_families,
        {
            "sentence": "el perro come en casa",
            "masked": 2,
            "source_tokens": ["the", "dog", "eats"],
            "target_tokens": ["el", "perro"],
        },
    ),
}


@functools.cache
def draw(name: str) -> D.Diagram:
    function, kwargs = CASES[name]
    return function(**kwargs)


def ids(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [e.get("id") for e in root.iter() if e.get("id") and "_" not in e.get("id") and e.tag != NS + "clipPath"]


def count(svg: str, prefix: str) -> int:
    return sum(bool(re.fullmatch(rf"{re.escape(prefix)}(-\d+)+", i)) for i in ids(svg))


def element(svg: str, gid: str) -> ET.Element:
    found = [e for e in ET.fromstring(svg).iter() if e.get("id") == gid]
    assert len(found) == 1, gid
    return found[0]


def style(svg: str, gid: str) -> str:
    return element(svg, gid).find(f"{NS}path").get("style")


def middle(svg: str, gid: str) -> float:
    """The vertical middle, in points (y downwards), of the path drawn with this id."""
    d = element(svg, gid).find(f"{NS}path").get("d")
    ys = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)][1::2]
    return (min(ys) + max(ys)) / 2


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text")]


@pytest.mark.parametrize("name", CASES)
def test_chapter_10_diagrams_render_cleanly(name):
    d = draw(name)
    root = ET.fromstring(d.svg)
    assert d.problems == (), d.problems  # no overlaps, nothing outside its box or the figure, no arrow across a box
    assert d.width <= 7 and float(root.get("width").removesuffix("pt")) <= 7 * 72 + 1e-6
    assert root.find(f"{NS}title").text == d.alt and len(d.alt.split()) >= 12
    found = ids(d.svg)
    assert len(found) == len(set(found)) == sum(d.parts.values())
    for text in root.iter(f"{NS}text"):  # readable at the natural size
        assert float(re.search(r"font-size: ([\d.]+)px", text.get("style")).group(1)) >= 9


@pytest.mark.parametrize(
    ("name", "decoder"), [("decoder_only_post", "decoder_post"), ("decoder_only_pre", "decoder_pre")]
)
def test_decoder_only_layer_has_no_active_cross_attention(name, decoder):
    svg, alt = draw(name).svg, draw(name).alt
    # Two working sub-layers, each with its norm, sum and residual: masked self-attention, then feed-forward.
    assert count(svg, "sublayer") == count(svg, "norm") == count(svg, "add") == count(svg, "residual") == 2
    assert style(svg, "sublayer-1").startswith(f"fill: {COLOURS['attention']}")
    assert style(svg, "sublayer-2").startswith(f"fill: {COLOURS['feedforward']}")
    words = texts(svg)
    for name in ("masked self-attention", "feed-forward"):
        assert any(t.startswith(name) for t in words), name
    # Where the decoder's cross-attention was: one dashed grey box, faded, that says it was removed; no sub-layer
    # named cross-attention and no encoder output feeding one.
    assert ids(svg).count("removed") == 1
    ghost = style(svg, "removed")
    assert "stroke-dasharray" in ghost and f"stroke: {GHOST}" in ghost and "opacity: 0.8" in ghost
    assert [t for t in words if "cross-attention" in t] == ["cross-attention:"]
    assert "removed" in words and "output" not in words and "encoder" not in words
    assert "encoder" in texts(draw(decoder).svg) and "output" in texts(draw(decoder).svg)
    # Drawn in the decoder's geometry: the same sub-layers at the same heights, the removed box level with the
    # decoder's cross-attention.
    d_svg = draw(decoder).svg
    assert middle(svg, "sublayer-1") == pytest.approx(middle(d_svg, "sublayer-1"))
    assert middle(svg, "sublayer-2") == pytest.approx(middle(d_svg, "sublayer-3"))
    assert middle(svg, "removed") == pytest.approx(middle(d_svg, "sublayer-2"))
    assert "decoder-only layer" in alt and "masked self-attention then feed-forward" in alt
    assert "cross-attention sub-layer, between them, is removed" in alt and "no encoder" in alt


def test_layer_kinds_draws_each_kind_side_by_side():
    d = draw("layer_kinds")
    for kind, n in (("encoder", 2), ("decoder", 3), ("decoder-only", 2)):
        assert count(d.svg, f"{kind}-sublayer") == count(d.svg, f"{kind}-residual") == n, kind
    assert set(ids(d.svg)) & {"encoder-removed", "decoder-removed", "decoder-only-removed"} == {"decoder-only-removed"}
    assert "stroke-dasharray" in style(d.svg, "decoder-only-removed")
    for kind in ("encoder", "decoder", "decoder-only"):
        assert f"the {kind} layer has" in d.alt and f"{kind} layer" in texts(d.svg)
    # The rows line up: the decoder-only layer's sub-layers at the heights of the decoder's first and third.
    assert middle(d.svg, "decoder-only-sublayer-2") == pytest.approx(middle(d.svg, "decoder-sublayer-3"))
    assert middle(d.svg, "decoder-only-removed") == pytest.approx(middle(d.svg, "decoder-sublayer-2"))
    assert middle(d.svg, "encoder-sublayer-1") == pytest.approx(middle(d.svg, "decoder-only-sublayer-1"))
    two = draw("layer_kinds_two_pre")
    assert "encoder-sublayer-1" not in ids(two.svg) and "2 kinds" in two.alt and "pre-norm" in two.alt
    assert count(draw("pre_post_norm_decoder_only").svg, "prenorm-sublayer") == 2


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("bert", lambda i, j: True),
        ("gpt", lambda i, j: j <= i),
        ("encoder", lambda i, j: True),
        ("decoder-self", lambda i, j: j <= i),
        ("decoder-cross", lambda i, j: True),
    ],
)
def test_model_families_patterns_say_who_sees_whom(name, allowed):
    sizes = {"bert": (6, 6), "gpt": (5, 5), "encoder": (3, 3), "decoder-self": (3, 3), "decoder-cross": (3, 3)}
    rows, cols = sizes[name]
    found = {i for i in ids(draw("model_families").svg) if re.fullmatch(rf"{name}-(allowed|hidden)-\d+-\d+", i)}
    expected = {f"{name}-{'allowed' if allowed(i, j) else 'hidden'}-{i}-{j}" for i in range(rows) for j in range(cols)}
    assert found == expected


def test_model_families_names_each_family_and_its_example():
    d = draw("model_families")
    for words in ("Encoder-only, like BERT", "Decoder-only, like GPT", "Encoder-decoder", "chapter 8"):
        assert words in d.alt
    for words in ("bidirectional", "causal", "cross-attention", "masked position predicts 'sat'", "next token"):
        assert words in d.alt
    assert "'the cat [MASK] on the mat'" in d.alt and "'el gato duerme'" in d.alt
    assert "36 of 36 cells" in d.alt and "15 of 25 cells" in d.alt and "6 of 9 cells" in d.alt
    shown = texts(d.svg)
    for words in ("encoder-only: BERT", "decoder-only: GPT", "encoder-decoder: chapter 8", "[MASK]", "→ sat"):
        assert words in shown
    predictions = ["sat", "cat", "sat", "on", "the", "mat", "el", "gato", "duerme"]  # BERT's, GPT's, the decoder's
    assert [t for t in shown if t.startswith("→")] == [f"→ {w}" for w in predictions]
    d = draw("model_families_spanish")
    assert "'el perro [MASK] en casa'" in d.alt and "predicts 'come'" in d.alt
    assert count(d.svg, "decoder-cross-allowed") == 2 * 3 and count(d.svg, "decoder-self-hidden") == 1


BAD = [
    (D.transformer_layer, {"kind": "decoder_only"}, "kind"),
    (D.layer_kinds, {"kinds": ("encoder",)}, "two or three"),
    (D.layer_kinds, {"kinds": ("encoder", "encoder")}, "two or three different"),
    (D.layer_kinds, {"kinds": ("encoder", "middle")}, "kinds"),
    (D.layer_kinds, {"norm": "sandwich"}, "norm"),
    (D.model_families, {"masked": 6}, "masked"),
    (D.model_families, {"sentence": ["one"]}, "at least 2"),
    (D.model_families, {"sentence": "a b c d e f g"}, "at most 6"),
    (D.model_families, {"source_tokens": "the big cat sleeps"}, "at most 3"),
    (D.model_families, {"target_tokens": []}, "target_tokens"),
    (D.model_families, {"sentence": "the extraordinarily long word"}, "too long"),
]


@pytest.mark.parametrize(("function", "kwargs", "message"), BAD)
def test_bad_arguments_are_value_errors(function, kwargs, message):
    with pytest.raises(ValueError, match=message):
        function(**kwargs)
