"""explorer: the data of chapter 9's attention explorer is attention_maps' weights, rounded to thousandths, for the
sentences and the choice (kind, layer, head) asked; wrong choices are refused with a message that says what exists.

A small seeded Transformer and a tokenizer of single characters stand in for the reference model (which
tests/test_browser_explorer.py reads on the built page): the functions only need the model's parts and a tokenizer's
encode and decode."""

import json

import pytest
import torch

from transformer_course.evaluation.attention_maps import attention_maps
from transformer_course.explorer import pages as explorer
from transformer_course.models.bahdanau import AttentionSeq2Seq
from transformer_course.models.transformer import Transformer

TEXTS = ["ab", "a cab", "bad cabbage ace"]


class Letters:
    """A tokenizer of single letters: a-z are ids 3 to 28 (0, 1, 2: <pad>, <bos>, <eos>), a space is id 29."""

    def encode(self, text):
        return [29 if c == " " else 3 + ord(c) - ord("a") for c in text]

    def decode(self, ids):
        return "".join(" " if i == 29 else chr(ord("a") + i - 3) for i in ids if i > 2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(
        30, 30, d_model=16, n_heads=4, n_encoder_layers=2, n_decoder_layers=3, d_ff=32, dropout=0.1, norm_first=True
    ).eval()


@pytest.fixture(scope="module")
def gru():
    torch.manual_seed(1)
    return AttentionSeq2Seq(30, 30, d_emb=8, d_hidden=16, d_att=8).eval()


@pytest.fixture(scope="module")
def data(model, gru):
    return explorer.explorer_data(model, Letters(), [(t, f"sentence {i}") for i, t in enumerate(TEXTS)], gru=gru)


def reference(model, text, kind):
    """attention_maps on the greedy translation, as chapter 9 draws every head: (L, h, T_q, T_k)."""
    src_ids = Letters().encode(text)
    src = torch.tensor([src_ids])
    out = model.generate(src, torch.ones_like(src, dtype=torch.bool), int(1.5 * len(src_ids)) + 10)[0][0].tolist()
    out = out[: out.index(2)] if 2 in out else out
    return attention_maps(model, src_ids, [model.bos_id] + out)[kind]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_the_weights_are_attention_maps_before_and_after_rounding(model, data, kind):
    for text in TEXTS:
        maps = reference(model, text, kind)
        for layer in range(maps.shape[0]):
            for head in [None, *range(maps.shape[1])]:
                expected = maps[layer].mean(0) if head is None else maps[layer, head]  # (T_q, T_k)
                raw = explorer.attention(model, Letters(), text, kind, layer, head)
                assert raw.shape == expected.shape and torch.allclose(raw, expected, atol=1e-6, rtol=0)
                shown = explorer.lookup(data, text, kind, layer, head)
                assert shown.shape == expected.shape
                # a head's thousandths are 0.0005 at most from the weight; so is the mean of the heads' thousandths
                assert (shown - expected.double()).abs().max() <= 5e-4 + 1e-6, (text, kind, layer, head)


def test_the_grus_alignment_is_what_it_computes_while_translating(model, gru, data):
    for text in TEXTS:
        src_ids = Letters().encode(text)
        src = torch.tensor([src_ids])
        tokens, weights = gru.generate(src, torch.ones_like(src, dtype=torch.bool), int(1.5 * len(src_ids)) + 10)
        out = tokens[0].tolist()
        rows = out.index(2) + 1 if 2 in out else len(out)  # the rows of the pieces written, <eos> included
        expected = weights[0, :rows]  # (T_y, T_x)
        assert torch.allclose(explorer.alignment(gru, Letters(), text), expected, atol=1e-6, rtol=0)
        shown = explorer.lookup(data, text, "gru", 0)
        assert shown.shape == expected.shape and (shown - expected.double()).abs().max() <= 5e-4 + 1e-6
        sentence = next(s for s in data["sentences"] if s["text"] == text)
        assert sentence["gru"]["text"] == Letters().decode(out[: out.index(2)] if 2 in out else out)
        assert len(sentence["gru"]["written"]) == rows
    alone = explorer.explorer_data(model, Letters(), [("ab", "")])  # without the GRU, no trace of it
    assert "gru" not in alone["kinds"] and "gru" not in alone["sentences"][0]["maps"]


def test_the_labels_fit_the_maps_and_the_data_is_plain_json(model, data):
    assert json.loads(json.dumps(data)) == data
    assert data["layers"] == {"encoder": 2, "decoder": 3, "cross": 3, "gru": 1} and data["heads"] == 4
    assert list(data["kinds"]) == ["encoder", "decoder", "cross", "gru"]
    for sentence in data["sentences"]:
        t_x, t_y = len(sentence["source"]), len(sentence["written"])
        assert sentence["written"][-1] == "<eos>" and sentence["read"][0] == "<bos>" and len(sentence["read"]) == t_y
        shapes = {"encoder": (t_x, t_x), "decoder": (t_y, t_y), "cross": (t_y, t_x)}
        shapes["gru"] = (len(sentence["gru"]["written"]), t_x)
        for kind, maps in sentence["maps"].items():
            assert len(maps) == data["layers"][kind] and all(len(head) == shapes[kind][0] for h in maps for head in h)
            assert all(len(row) <= shapes[kind][1] and (not row or row[-1]) for h in maps for head in h for row in head)
        assert set(sentence["greedy"]) == {"text", "log_prob", "score"} == set(sentence["beam"])


def test_the_data_is_the_same_every_time(model, gru, data):
    # The notebook's output must reproduce under strict nbval: same models, same sentences, same page.
    sentences = [(t, f"sentence {i}") for i, t in enumerate(TEXTS)]
    again = explorer.explorer_data(model.train(), Letters(), sentences, gru=gru.train())
    assert model.training and gru.training  # left as they were found: float32, in training mode
    assert all(p.dtype == torch.float32 for m in (model, gru) for p in m.parameters())
    model.eval(), gru.eval()
    assert explorer.explorer_html(again) == explorer.explorer_html(data)


def test_bad_choices_are_refused_clearly(model, data):
    with pytest.raises(KeyError, match="not one of the explorer's 3 sentences"):
        explorer.lookup(data, "no such sentence", "cross", 0)
    with pytest.raises(IndexError, match="layer 3 is out of range.*layers 0 to 2"):
        explorer.lookup(data, "ab", "cross", 3)
    with pytest.raises(IndexError, match="layer 1 is out of range: the GRU with attention.*layers 0 to 0"):
        explorer.lookup(data, "ab", "gru", 1)
    with pytest.raises(IndexError, match="head 1 is out of range"):
        explorer.lookup(data, "ab", "gru", 0, 1)
    with pytest.raises(IndexError, match="layer 2 is out of range.*layers 0 to 1"):
        explorer.attention(model, Letters(), "ab", "encoder", 2)
    with pytest.raises(IndexError, match="head 4 is out of range"):
        explorer.lookup(data, "ab", "encoder", 0, 4)
    with pytest.raises(IndexError, match="head -1 is out of range"):
        explorer.attention(model, Letters(), "ab", "decoder", 0, -1)
    with pytest.raises(ValueError, match="kind must be one of"):
        explorer.lookup(data, "ab", "self", 0)
    with pytest.raises(ValueError, match="given twice"):
        explorer.explorer_data(model, Letters(), [("ab", "x"), ("ab", "y")])
    with pytest.raises(KeyError, match="not test sentences"):
        explorer.choose_sentences(["ab"], [[3, 4]], first=["ba"])


def test_sentences_are_chosen_short_to_long_after_the_chapters_own():
    sources = [f"s{i}" for i in range(12)]
    ids = [[3] * n for n in (5, 2, 3, 2, 9, 3, 5, 7, 2, 40, 3, 5)]
    chosen = explorer.choose_sentences(sources, ids, first=["s6"], lengths=(2, 2, 3, 5, 5, 8, 40))
    # s6 first; then two of 2 pieces, one of 3, two of 5 (s6 already taken), none of 8, the 40, by length
    assert [text for text, _ in chosen] == ["s6", "s1", "s3", "s2", "s0", "s11", "s9"]
    assert chosen[0] == ("s6", "test sentence 6")


def test_the_page_holds_the_data_inline_and_nothing_can_close_its_script(data):
    page = explorer.explorer_html(data)
    body = page.split('<script type="application/json" class="attn-explorer-data">')[1].split("</script>")[0]
    assert json.loads(body) == data  # "<bos>" is written \u003cbos> inside the JSON, which decodes to it
    assert "<" not in body and page.count("</script>") == 1
    assert "explorer.js" in page  # what JupyterLab shows, where the book's script does not run


# --- explorer_live: one sentence typed in JupyterLab, translated now --------------------------------------------


def test_a_typed_sentence_gets_the_same_data_and_weights(model, gru):
    from transformer_course.explorer import live as explorer_live

    live = explorer_live.sentence_data("a cab", model, Letters(), gru=gru)
    assert live == explorer.explorer_data(model, Letters(), [("a cab", explorer_live.NOTE)], gru=gru)
    for kind in ("encoder", "decoder", "cross"):
        maps = reference(model, "a cab", kind)  # (L, h, T_q, T_k), unrounded
        for layer in range(maps.shape[0]):
            for head in [None, *range(maps.shape[1])]:
                expected = (maps[layer].mean(0) if head is None else maps[layer, head]).double()
                assert torch.allclose(
                    explorer.attention(model, Letters(), "a cab", kind, layer, head).double(), expected, atol=1e-6
                )
                shown = explorer.lookup(live, "a cab", kind, layer, head)
                assert (shown - expected).abs().max() <= 5e-4 + 1e-6, (kind, layer, head)


def test_the_live_output_carries_the_books_script_and_style_inline(model):
    from transformer_course.explorer import live as explorer_live

    data = explorer_live.sentence_data("ab", model, Letters())
    page = explorer_live.show("ab", model, Letters()).data
    assert page == explorer_live.live_html(data)
    script, style = explorer_live.assets()
    assert f"<script>\n{script}</script>" in page and f"<style>\n{style}</style>" in page
    assert "window.attnExplorer" in script  # the script draws once per page however many copies it finds
    body = page.split('<script type="application/json" class="attn-explorer-data">')[1].split("</script>")[0]
    assert json.loads(body) == data and "<" not in body
    assert page.count("</script>") == 2 and page.count("</style>") == 1
    assert explorer_live.show("ab", model.train(), Letters()).data == page  # deterministic, for strict nbval
    model.eval()


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("", ValueError, "the sentence is empty"),
        ("   ", ValueError, "the sentence is empty"),
        (42, TypeError, "must be a string \\(str\\), got int"),
        (["ab"], TypeError, "got list"),
        ("b" * 400, ValueError, "too long: 400 pieces, and the model reads at most 512"),
    ],
)
def test_a_bad_sentence_is_refused_saying_what_is_wrong(model, text, error, message):
    from transformer_course.explorer import live as explorer_live

    with pytest.raises(error, match=message):
        explorer_live.show(text, model, Letters())


def test_a_model_off_the_cpu_is_refused_saying_what_to_do(model):
    import copy

    from transformer_course.explorer import live as explorer_live

    with pytest.raises(ValueError, match=r"the model is on meta: the explorer runs on the CPU, pass model.cpu\(\)"):
        explorer_live.show("ab", copy.deepcopy(model).to("meta"), Letters())


# --- explorer_beam: the beam's hypotheses step by step ------------------------------------------------------------


@pytest.mark.parametrize(("beam_size", "alpha", "limit"), [(4, 0.6, None), (3, 0.0, None), (4, 1.0, 3), (1, 0.6, 5)])
def test_the_stepped_beam_is_beam_search(model, beam_size, alpha, limit):
    from transformer_course.decoding.search import beam_search
    from transformer_course.explorer.beam import beam_steps, hypotheses

    for text in TEXTS:
        src_ids = Letters().encode(text)
        max_len = limit or int(1.5 * len(src_ids)) + 10
        src = torch.tensor([src_ids])
        result = beam_search(model, src, torch.ones_like(src, dtype=torch.bool), beam_size, max_len, alpha)
        trace = beam_steps(model, src_ids, beam_size, max_len, alpha, check=True)
        # the same output and score, to the bit, and every finished hypothesis in the same order
        assert trace.tokens == result.tokens[0] and trace.score == result.scores[0]
        assert trace.finished == result.finished[0] and len(trace.steps) == result.steps
        assert trace.stop == ("limit" if len(trace.steps) == max_len else "beam")  # out of room, or K finished
        for step in range(1, len(trace.steps) + 1):
            live, finished = hypotheses(trace, step)
            assert len(live) == (beam_size if step < len(trace.steps) else 0)
            assert [s for _, s in live] == sorted((s for _, s in live), reverse=True)  # best first
            for tokens, log_prob in live:  # each live hypothesis's log P is the model's, teacher-forced
                tgt = torch.tensor([[model.bos_id] + tokens])  # (1, t + 1): the decoder reads all but the last
                mask = torch.ones_like(src, dtype=torch.bool)
                logits = model.decode(model.encode(src, mask), mask, tgt[:, :-1]).float()  # (1, t, V)
                expected = torch.log_softmax(logits, -1).gather(-1, tgt[:, 1:, None]).sum().item()
                assert abs(log_prob - expected) < 1e-4, (text, step, tokens)
        # the finished ones at the end, <eos> dropped, are beam_search's, in its order
        assert [(score, [t for t in tokens if t != 2]) for tokens, score in finished] == result.finished[0]


def test_the_pages_beam_data_spells_out_beam_searchs_output(model, data):
    from transformer_course.decoding.search import beam_search

    for sentence in data["sentences"]:
        src_ids = Letters().encode(sentence["text"])
        src = torch.tensor([src_ids])
        result = beam_search(model, src, torch.ones_like(src, dtype=torch.bool), 4, int(1.5 * len(src_ids)) + 10)
        prefixes, finished = [[]], []
        for step in sentence["steps"]["steps"]:  # follow the back-pointers, as explorer.js does
            finished += [(prefixes[b] + [piece], score) for b, piece, _, score in step["done"]]
            prefixes = [prefixes[b] + [piece] for b, piece, _ in step["live"]]
        finished.sort(key=lambda h: -h[1])
        best = [p for p in finished[0][0] if p != "<eos>"]
        assert "".join(best).replace("_", " ") == Letters().decode(result.tokens[0]) == sentence["beam"]["text"]
        assert abs(finished[0][1] - result.scores[0]) <= 5e-4 and sentence["steps"]["stop"] in ("beam", "limit")
        assert not sentence["steps"]["steps"][-1]["live"]  # the search has stopped


def test_the_stepped_beam_refuses_bad_input(model, monkeypatch):
    from transformer_course.explorer import beam as explorer_beam

    ids = Letters().encode("ab")
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        explorer_beam.beam_steps(model, ids, 0, 10)
    with pytest.raises(ValueError, match="alpha must be a number from 0 to 10, got -1"):
        explorer_beam.beam_steps(model, ids, 4, 10, alpha=-1)
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        explorer_beam.beam_steps(model, ids, 4, 0)
    with pytest.raises(TypeError, match="needs a transformer_course.models.transformer.Transformer"):
        explorer_beam.beam_steps(torch.nn.Linear(2, 2), ids, 4, 10)
    trace = explorer_beam.beam_steps(model, ids, 4, 10)
    for step in (0, len(trace.steps) + 1, True, 1.0):
        with pytest.raises(IndexError, match=f"step {step!r} is out of range: the search took steps 1 to"):
            explorer_beam.hypotheses(trace, step)
    # the check compares with beam_search itself: a beam search that differs is caught
    real = explorer_beam.beam_search

    def other(*args, **kwargs):
        result = real(*args, **kwargs)
        result.finished[0][0] = (result.finished[0][0][0] - 1e-6, result.finished[0][0][1])
        return result

    monkeypatch.setattr(explorer_beam, "beam_search", other)
    with pytest.raises(AssertionError, match="the steps give"):
        explorer_beam.beam_steps(model, ids, 4, 10, check=True)
