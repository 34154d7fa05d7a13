"""The diagrams: each one drawn from its arguments, checked on the SVG itself (the ids of what was drawn, counted
against the configuration), well-formed, the same byte for byte in two processes, no wider than the book's column,
readable, with alt text that names the configured numbers, and a ValueError for arguments it cannot draw."""

import functools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import matplotlib
import pytest

from transformer_course import diagrams as D
from transformer_course.diagrams._canvas import COLOURS, HIGHLIGHT
from transformer_course.diagrams.decoding import BEAMS
from transformer_course.training.configs import CONFIGS

NS = "{http://www.w3.org/2000/svg}"
SRC, TGT = ["the", "dog", "eats", "an", "apple"], ["el", "perro", "come", "una", "manzana"]

# Every diagram with its defaults, and with other arguments: each is drawn once, and its checks share it.
CASES = {
    "rnn_cell": (D.rnn_cell, {}),
    "rnn_unrolled": (D.rnn_unrolled, {}),
    "rnn_unrolled_8": (D.rnn_unrolled, {"n_steps": 8}),
    "lstm_cell": (D.lstm_cell, {}),
    "gru_cell": (D.gru_cell, {}),
    "encoder_decoder": (D.encoder_decoder, {}),
    "encoder_decoder_5": (D.encoder_decoder, {"source_tokens": SRC[:4], "target_tokens": TGT[:4]}),
    "teacher_forcing": (D.teacher_forcing, {}),
    "bahdanau_step": (D.bahdanau_step, {}),
    "bahdanau_weights": (D.bahdanau_step, {"source_tokens": SRC, "weights": [0.1, 0.6, 0.2, 0.05, 0.05]}),
    "qkv_projections": (D.qkv_projections, {"tokens": SRC, "d_model": 256, "d_k": 32}),
    "attention_steps": (D.attention_steps, {"tokens": SRC, "query": 3, "d_k": 128}),
    "attention_matrix_form": (D.attention_matrix_form, {"T": 10, "d_model": 256, "d_k": 32, "d_v": 48}),
    "mask_padding": (D.mask_diagram, {"kind": "padding", "T": 6, "length": 4}),
    "mask_causal": (D.mask_diagram, {"kind": "causal", "T": 5}),
    "multi_head": (D.multi_head, {}),
    "multi_head_16": (D.multi_head, {"n_heads": 16, "d_model": 512, "T": 10}),
    "positional_entry": (D.positional_entry, {"d_model": 192}),
    "pe_layouts": (D.pe_layouts, {}),
    "pe_layouts_16": (D.pe_layouts, {"d_model": 16}),
    "transformer_stack": (D.transformer_stack, {}),
    "transformer_cpu": (D.transformer_stack, {"config": CONFIGS["transformer-cpu"]}),
    "transformer_uneven": (
        D.transformer_stack,
        {"n_encoder_layers": 3, "n_decoder_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "norm_first": True},
    ),
    "layer_encoder_post": (D.transformer_layer, {}),
    "layer_decoder_pre": (D.transformer_layer, {"kind": "decoder", "norm": "pre", "d_model": 192, "n_heads": 4}),
    "pre_post_norm": (D.pre_post_norm, {"kind": "decoder"}),
    "layer_decoder_only": (D.transformer_layer, {"kind": "decoder-only"}),
    "layer_kinds": (D.layer_kinds, {}),
    "model_families": (D.model_families, {}),
    "cross_attention": (D.cross_attention, {"source_tokens": SRC, "target_tokens": ["<bos>", *TGT[:3]]}),
    "kv_cache": (D.kv_cache, {}),
    "kv_cache_tokens": (D.kv_cache, {"n_steps": 3, "tokens": TGT[:3]}),
    "beam_tree": (D.beam_tree, {}),
    "tiled_attention_tiles": (D.tiled_attention_tiles, {}),
    "query_key_value_heads": (D.query_key_value_heads, {}),
    "rotary_pairs": (D.rotary_pairs, {}),
    "sliding_window_reach": (D.sliding_window_reach, {}),
}


@functools.cache
def draw(name: str) -> D.Diagram:
    function, kwargs = CASES[name]
    return function(**kwargs)


def ids(svg: str) -> list[str]:
    """The ids the diagram gave what it drew: matplotlib's own (patch_1, clip paths) left out."""
    root = ET.fromstring(svg)
    return [e.get("id") for e in root.iter() if e.get("id") and "_" not in e.get("id") and e.tag != NS + "clipPath"]


def count(svg: str, prefix: str) -> int:
    """Ids of the form prefix-<numbers>, e.g. count(svg, "encoder-layer") for encoder-layer-1 to -6."""
    return sum(bool(re.fullmatch(rf"{re.escape(prefix)}(-\d+)+", i)) for i in ids(svg))


def element(svg: str, gid: str) -> ET.Element:
    found = [e for e in ET.fromstring(svg).iter() if e.get("id") == gid]
    assert len(found) == 1, gid
    return found[0]


def bounds(svg: str, gid: str) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) in points of the path drawn with this id (y downwards, as in the SVG)."""
    path = element(svg, gid).find(f"{NS}path")
    xs_ys = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
    xs, ys = xs_ys[0::2], xs_ys[1::2]
    return (min(xs), min(ys), max(xs), max(ys))


def fill(svg: str, gid: str) -> str:
    return re.search(r"fill: (#[0-9a-f]{6})", element(svg, gid).find(f"{NS}path").get("style")).group(1)


@pytest.mark.parametrize("name", CASES)
def test_every_diagram_renders_cleanly(name):
    d = draw(name)
    root = ET.fromstring(d.svg)  # well-formed XML
    assert root.tag == NS + "svg" and d._repr_svg_() is d.svg
    assert d.width <= 7 and float(root.get("width").removesuffix("pt")) <= 7 * 72 + 1e-6
    assert d.problems == (), d.problems  # no label outside its box or the figure, no overlaps, no arrow across a box
    # What was drawn, as counted while drawing, is what the SVG holds: one id each, none twice.
    found = ids(d.svg)
    assert len(found) == len(set(found)) == sum(n for k, n in d.parts.items() if k != "pruned")
    assert len(d.alt.split()) >= 12 and root.find(f"{NS}title").text == d.alt and d.alt in repr(d)
    # Readable at the natural size: text of at least 9 pt, math's sub- and superscripts at 70 % of it.
    for text in root.iter(f"{NS}text"):
        assert float(re.search(r"font-size: ([\d.]+)px", text.get("style") or "font-size: 9px").group(1)) >= 9
    # One font, DejaVu Sans (its metrics placed every label), with a fallback: no glyph from another font.
    assert set(re.findall(r"font-family: ([^;\"]+)", d.svg)) <= {"'DejaVu Sans'", "'DejaVu Sans', sans-serif"}
    for span in root.iter(f"{NS}tspan"):
        assert float(re.search(r"font-size: ([\d.]+)px", span.get("style")).group(1)) >= 0.7 * 9 - 1e-6


def test_every_public_function_is_tested():
    assert {f.__name__ for f, _ in CASES.values()} == set(D.__all__) - {"Diagram"}


def test_recurrent_diagrams_count_their_steps_and_gates():
    for name, n in (("rnn_unrolled", 4), ("rnn_unrolled_8", 8)):
        svg, alt = draw(name).svg, draw(name).alt
        assert (count(svg, "cell"), count(svg, "input"), count(svg, "hidden")) == (n, n, n + 1)
        assert f"{n} time steps" in alt and f"x_{n}" in alt
    svg = draw("lstm_cell").svg
    assert {"gate-forget", "gate-input", "gate-output", "candidate"} <= set(ids(svg)) and count(svg, "cell-state") == 3
    assert f"stroke: {HIGHLIGHT}" in element(svg, "cell-state-1").find(f"{NS}path").get("style")
    assert {"gate-reset", "gate-update", "candidate"} <= set(ids(draw("gru_cell").svg))


def test_encoder_decoder_and_teacher_forcing_follow_the_sentences():
    svg = draw("encoder_decoder_5").svg
    assert count(svg, "encoder-step") == 4 and count(svg, "decoder-step") == 5  # the target, then <eos>
    assert ids(svg).count("context") == 1 and "4 source tokens" in draw("encoder_decoder_5").alt
    svg = draw("teacher_forcing").svg
    assert count(svg, "tf-step") == count(svg, "fr-step") == 3 and count(svg, "fed-back") == 2


def test_bahdanau_bars_are_as_tall_as_the_weights():
    weights = CASES["bahdanau_weights"][1]["weights"]
    svg = draw("bahdanau_weights").svg
    assert count(svg, "score") == count(svg, "encoder-state") == count(svg, "weight") == len(SRC)
    heights = [bounds(svg, f"weight-{j}")[3] - bounds(svg, f"weight-{j}")[1] for j in range(1, len(SRC) + 1)]
    assert heights == pytest.approx([0.7 * 72 * w for w in weights], abs=0.05)
    assert "eats 0.20" in draw("bahdanau_weights").alt and "uniform" in draw("bahdanau_step").alt


def test_attention_diagrams_use_the_given_sizes():
    svg = draw("qkv_projections").svg
    assert all(count(svg, f"{m}-row") == len(SRC) for m in "xqkv") and "256 × 32" in svg
    svg = draw("attention_steps").svg
    assert count(svg, "score") == count(svg, "scaled") == count(svg, "weighted-value") == len(SRC)
    assert count(svg, "step") == 6 and "11.31" in svg  # sqrt(128)
    svg = draw("attention_matrix_form").svg
    assert all(shape in svg for shape in ("(10, 10)", "(10, 32)", "(10, 48)", "(256, 32)", "(10, 256)"))


@pytest.mark.parametrize(
    ("name", "allowed"), [("mask_padding", lambda i, j: j < 4), ("mask_causal", lambda i, j: j <= i)]
)
def test_mask_cells_say_who_may_attend(name, allowed):
    d = draw(name)
    t = CASES[name][1]["T"]
    expected = {f"{'allowed' if allowed(i, j) else 'hidden'}-{i}-{j}" for i in range(t) for j in range(t)}
    assert {i for i in ids(d.svg) if i.startswith(("allowed", "hidden"))} == expected
    assert f"{sum(allowed(i, j) for i in range(t) for j in range(t))} of the {t * t} cells" in d.alt


def test_multi_head_draws_one_box_per_head_and_the_shapes():
    svg = draw("multi_head").svg
    assert count(svg, "head") == 8 and "(B, 8, T, 64)" in svg and "8 heads" in draw("multi_head").alt
    svg = draw("multi_head_16").svg
    assert count(svg, "head") == 16 and "(B, 16, 10, 32)" in svg and "(B, 10, 512)" in svg


def test_positional_layouts_place_sines_and_cosines():
    sin, cos = "#f8cdd6", "#c7e0f5"
    for name, d in (("pe_layouts", 8), ("pe_layouts_16", 16)):
        svg = draw(name).svg
        assert [fill(svg, f"interleaved-{k}") for k in range(d)] == [sin, cos] * (d // 2)
        assert [fill(svg, f"concatenated-{k}") for k in range(d)] == [sin] * (d // 2) + [cos] * (d // 2)
    assert "(B, T, 192)" in draw("positional_entry").svg


@pytest.mark.parametrize("name", ["transformer-cpu", "transformer-gpu", "transformer-tiny"])
def test_transformer_stack_is_drawn_from_the_configuration(name):
    from transformer_course.training.kinds import typed

    config = typed(CONFIGS[name])
    d = D.transformer_stack(config)
    n_enc, n_dec = config.n_encoder_layers, config.n_decoder_layers
    assert count(d.svg, "encoder-layer") == n_enc and count(d.svg, "decoder-layer") == n_dec
    assert count(d.svg, "cross-attention") == n_dec  # the encoder's output reaches every decoder layer
    assert {"encoder-norm", "decoder-norm"} <= set(ids(d.svg))  # pre-norm: a final norm on each stack
    assert f"{n_enc} encoder layer" in d.alt and f"d_model = {config.d_model}" in d.alt
    assert f"linear {config.d_model} → {config.vocab}" in d.svg and d.problems == ()


def test_transformer_stack_defaults_and_overrides():
    svg = draw("transformer_stack").svg  # the paper's base model: 6 + 6 post-norm layers
    assert count(svg, "encoder-layer") == count(svg, "decoder-layer") == count(svg, "cross-attention") == 6
    assert "encoder-norm" not in ids(svg) and "6 encoder layers" in draw("transformer_stack").alt
    svg = draw("transformer_uneven").svg
    assert (count(svg, "encoder-layer"), count(svg, "decoder-layer"), count(svg, "cross-attention")) == (3, 1, 1)
    d = D.transformer_stack(CONFIGS["transformer-cpu"], n_decoder_layers=4)
    assert count(d.svg, "decoder-layer") == 4 and count(d.svg, "encoder-layer") == 2


def test_layer_norms_sit_where_the_placement_says():
    for name, n, norm in (("layer_encoder_post", 2, "post"), ("layer_decoder_pre", 3, "pre")):
        svg = draw(name).svg
        assert count(svg, "sublayer") == count(svg, "norm") == count(svg, "add") == count(svg, "residual") == n
        for i in range(1, n + 1):  # SVG y grows downwards: post-norm's norm is above its sub-layer
            above = bounds(svg, f"norm-{i}")[1] < bounds(svg, f"sublayer-{i}")[1]
            assert above == (norm == "post")
    svg = draw("pre_post_norm").svg
    assert count(svg, "postnorm-sublayer") == count(svg, "prenorm-sublayer") == 3


def test_one_colour_per_kind_of_block_across_diagrams():
    assert fill(draw("multi_head").svg, "head-1") == COLOURS["attention"]
    assert fill(draw("layer_encoder_post").svg, "sublayer-1") == COLOURS["attention"]
    assert fill(draw("layer_encoder_post").svg, "sublayer-2") == COLOURS["feedforward"]
    assert fill(draw("layer_encoder_post").svg, "norm-1") == COLOURS["norm"]
    assert fill(draw("transformer_cpu").svg, "encoder-embedding") == COLOURS["embedding"]
    assert fill(draw("transformer_cpu").svg, "final-linear") == COLOURS["softmax"]
    assert fill(draw("rnn_unrolled").svg, "cell-1") == fill(draw("lstm_cell").svg, "gate-forget")


def test_cross_attention_and_kv_cache_counts():
    svg = draw("cross_attention").svg
    assert count(svg, "memory-row") == len(SRC) and count(svg, "decoder-row") == 4
    for name, n in (("kv_cache", 4), ("kv_cache_tokens", 3)):
        svg = draw(name).svg
        assert count(svg, "query") == n
        for t in range(1, n + 1):  # step t holds t rows: the new one and the t - 1 it reuses
            for m in "kv":
                assert sum(bool(re.fullmatch(rf"cache-{m}-{t}-\d+", i)) for i in ids(svg)) == t
        assert f"step {n} holds {n} rows" in draw(name).alt
    assert "step 2: perro" in draw("kv_cache_tokens").svg


def test_beam_tree_edges_do_not_cross_and_pruned_hypotheses_fade():
    beams = [
        [(0, "a", -0.1), (0, "b", -0.5), (0, "c", -0.9)],
        [(2, "x", -1.0), (0, "y", -1.1), (1, "z", -1.2), (0, "w", -1.3), (2, "v", -2.0)],
        [(4, "p", -2.1), (0, "q", -2.2), (1, "r", -2.3), (3, "s", -2.4)],
    ]
    for svg, steps in ((draw("beam_tree").svg, BEAMS), (D.beam_tree(beams).svg, beams)):
        total = sum(len(s) for s in steps)
        assert count(svg, "node") == count(svg, "edge") == total
        for s in range(1, len(steps) + 1):
            # An edge's ends: its path's first and last points. Between two columns no two edges cross when
            # their parents and their children come in the same vertical order.
            ends = []
            for k in range(len(steps[s - 1])):
                path = element(svg, f"edge-{s}-{k}").find(f"{NS}path").get("d")
                points = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path)]
                ends.append((points[1], points[-1]))
            for a in range(len(ends)):
                for b in range(a + 1, len(ends)):
                    (sa, ea), (sb, eb) = ends[a], ends[b]  # siblings share a start; no two share an end
                    assert (sa - sb) * (ea - eb) >= 0 and ea != eb, (s, a, b)
    d = D.beam_tree(beams)
    # Only "z" (step 2, index 2) is extended by nothing before the last step: pruned, so faded.
    assert d.parts["pruned"] == 1 and "1 of them, pruned" in d.alt
    faded = [
        i
        for i in ids(d.svg)
        if i.startswith("node") and "opacity: 0.3" in element(d.svg, i).find(f"{NS}path").get("style")
    ]
    assert faded == ["node-2-2"]
    assert "the best hypothesis, in red, is 'el gato duerme <eos>'" in draw("beam_tree").alt
    kept = [[(0, "a", -0.1, True), (0, "b", -0.5, False)], [(0, "c", -0.7)]]
    assert D.beam_tree(kept).parts["pruned"] == 1
    # a search picks by normalised score: `best` names the chosen hypothesis even when another has a higher log P
    two = [[(0, "a", -0.2), (0, "<eos>", -0.5)], [(0, "b", -0.9), (0, "<eos>", -0.4)]]
    assert "in red, is 'a <eos>'" in D.beam_tree(two).alt
    assert "in red, is '<eos>'" in D.beam_tree(two, best=(1, 1)).alt
    with pytest.raises(ValueError, match="best must be"):
        D.beam_tree(two, best=(3, 0))


BAD = [
    (D.rnn_unrolled, {"n_steps": 0}, "n_steps"),
    (D.rnn_unrolled, {"n_steps": 9}, "n_steps"),
    (D.rnn_unrolled, {"n_steps": 2.5}, "integer"),
    (D.encoder_decoder, {"source_tokens": []}, "source_tokens"),
    (D.encoder_decoder, {"target_tokens": ""}, "target_tokens"),
    (D.encoder_decoder, {"source_tokens": ["a", " "]}, "non-empty"),
    (D.teacher_forcing, {"reference": ["a", "b"], "predictions": ["a"]}, "one prediction per step"),
    (D.bahdanau_step, {"weights": [0.5, 0.5]}, "one per token"),
    (D.bahdanau_step, {"weights": [0.5, 0.4, 0.4]}, "sum to 1"),
    (D.bahdanau_step, {"weights": [1.2, -0.1, -0.1]}, "non-negative"),
    (D.qkv_projections, {"tokens": []}, "tokens"),
    (D.qkv_projections, {"d_k": 0}, "d_k"),
    (D.attention_steps, {"query": 4}, "query"),
    (D.attention_matrix_form, {"T": 0}, "T"),
    (D.mask_diagram, {"kind": "diagonal"}, "kind"),
    (D.mask_diagram, {"kind": "padding", "T": 6, "length": 7}, "length"),
    (D.mask_diagram, {"T": 0}, "T"),
    (D.multi_head, {"n_heads": 3, "d_model": 512}, "not divisible"),
    (D.multi_head, {"n_heads": 0}, "n_heads"),
    (D.pe_layouts, {"d_model": 7}, "even"),
    (
        D.transformer_stack,
        {"n_encoder_layers": 0, "n_decoder_layers": 1, "d_model": 8, "n_heads": 2, "d_ff": 8},
        "n_encoder_layers",
    ),
    (D.transformer_stack, {"config": {**CONFIGS["transformer-cpu"], "n_heads": 5}}, "not divisible"),
    (D.transformer_stack, {"config": CONFIGS["seq2seq-cpu"]}, "not a Transformer configuration"),
    (D.transformer_stack, {"n_encoder_layers": 2}, "missing"),
    (D.transformer_layer, {"kind": "middle"}, "kind"),
    (D.transformer_layer, {"norm": "sandwich"}, "norm"),
    (D.transformer_layer, {"d_model": 10, "n_heads": 4}, "not divisible"),
    (D.pre_post_norm, {"kind": "both"}, "kind"),
    (D.cross_attention, {"target_tokens": []}, "target_tokens"),
    (D.kv_cache, {"n_steps": 0}, "n_steps"),
    (D.kv_cache, {"n_steps": 2, "tokens": ["a"]}, "one per step"),
    (D.beam_tree, {"beams": []}, "non-empty"),
    (D.beam_tree, {"beams": [[]]}, "empty"),
    (D.beam_tree, {"beams": [[(1, "a", -0.1)]]}, "parent_index"),
    (
        D.beam_tree,
        {"beams": [[(0, "a", -0.1), (0, "b", -0.2)], [(0, "c", -0.3)], [(0, "d", -0.4)], [(0, "e", -1)]]},
        None,
    ),
    (D.beam_tree, {"beams": [[(0, "a", -0.1, False)], [(0, "b", -0.2)]]}, "extends a pruned"),
    (D.beam_tree, {"beams": [[(0, "<eos>", -0.1)], [(0, "b", -0.2)]]}, "extends a finished"),
]


@pytest.mark.parametrize(("function", "kwargs", "message"), BAD)
def test_bad_arguments_are_value_errors(function, kwargs, message):
    if message is None:  # a valid call among the invalid ones: the checks do not refuse too much
        function(**kwargs)
        return
    with pytest.raises(ValueError, match=message):
        function(**kwargs)


SCRIPT = """
import hashlib
from transformer_course import diagrams as D
svgs = [D.transformer_stack(n_encoder_layers=2, n_decoder_layers=3, d_model=64, n_heads=4, d_ff=128).svg,
        D.lstm_cell().svg, D.mask_diagram("causal", T=4).svg, D.beam_tree().svg, D.multi_head(4, 64).svg]
print(hashlib.sha256("".join(svgs).encode()).hexdigest())
"""


def test_svg_is_the_same_in_two_processes():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    hashes = [
        subprocess.run(
            [sys.executable, "-c", SCRIPT],
            env={**env, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    ]
    assert hashes[0] == hashes[1] and len(hashes[0]) == 64


def test_a_notebooks_settings_change_nothing():
    before = D.multi_head(4, 64).svg
    with matplotlib.rc_context({"font.size": 20, "lines.linewidth": 4, "svg.fonttype": "path", "svg.hashsalt": None}):
        during = D.multi_head(4, 64).svg
    assert during == before and "<text" in before  # text stays text: small, searchable, the same everywhere
    assert "Date" not in before and "<dc:date>" not in before
