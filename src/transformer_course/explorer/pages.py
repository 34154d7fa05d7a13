"""The data of chapter 9's attention explorer: for a few dozen sentences, the reference Transformer's greedy and
beam translations with their scores, the beam's hypotheses step by step (explorer_beam, checked against
``beam_search``), and every attention map (``attention_maps``) while it writes the greedy one, rounded so that the
book page stays small; given chapter 4's GRU with attention, its translation and alignment too (the page draws it
beside the Transformer's map). ``explorer_html`` wraps the data for the built book, where book/_static/explorer.js draws it; the page fetches
nothing (browsers refuse to read files from a file:// page), so the data travels inside the page, in a
<script type="application/json"> element.

Positions: a source row is the sentence's BPE pieces (T_x); a decoder row is labelled by the piece it writes
(its greedy output then <eos>, T_y), and reads <bos> and the pieces written before it (the decoder's input).
Layers and heads are counted from 0 here, from 1 on the page; ``head=None`` is the mean of the heads.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .._checks import Model
from ..decoding.search import (
    greedy_decode,
    log_probs,
    max_output_length,  # the length limit chapter 9 decodes with
    normalised_score,
)
from ..evaluation.attention_maps import attention_maps
from .beam import beam_data, beam_steps

__all__ = [
    "GRU",
    "KINDS",
    "alignment",
    "attention",
    "choose_sentences",
    "describe",
    "explorer_data",
    "explorer_html",
    "lookup",
]

# The three kinds of attention, as attention_maps names them, and what the page calls them.
KINDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
# Chapter 4's GRU with attention, when given: one attention (one layer, one head), from its own translation.
GRU = {"gru": "GRU with attention (chapter 4): its alignment"}
DECIMALS = 3  # weights are stored as integers in thousandths: 0.0005 at most from the model's
EOS = 2  # <eos> in every vocabulary of the course
# The source lengths (in pieces) of the test sentences chosen besides the chapter's own: two of each short length, one
# of a few long ones. A sentence of T pieces stores 3 kinds x 8 maps of about T x T weights: the long ones make most
# of the page's weight, hence few of them, and none over 28 pieces.
LENGTHS = tuple(sorted(2 * list(range(2, 13)))) + (14, 16, 18, 20, 22, 24, 28)


@torch.no_grad()
def _greedy(model: Model, src_ids: Sequence[int]) -> list[int]:
    """The greedy translation of one sentence, without its <eos>, as chapter 9 decodes it (a batch of one)."""
    src = torch.tensor([list(src_ids)])  # (1, T_x)
    out = greedy_decode(model, src, torch.ones_like(src, dtype=torch.bool), max_output_length(len(src_ids)))
    tokens = out[0].tolist()
    return tokens[: tokens.index(EOS)] if EOS in tokens else tokens


def _check(model: Model, kind: str, layer: int, head: int | None) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    layers = len(model.encoder.layers if kind == "encoder" else model.decoder.layers)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < layers:
        raise IndexError(f"layer {layer!r} is out of range: the model's {KINDS[kind]} has layers 0 to {layers - 1}")
    heads = model.encoder.layers[0].self_attn.n_heads
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads):
        raise IndexError(f"head {head!r} is out of range: heads 0 to {heads - 1}, or None for their mean")


def attention(model: Model, tokenizer, text: str, kind: str, layer: int, head: int | None = None) -> Tensor:
    """The weights (T_q, T_k) of one head (or the mean of the heads, head=None) of one layer, unrounded, while the
    model writes its greedy translation of ``text``: what the explorer shows for that choice."""
    _check(model, kind, layer, head)
    src_ids = tokenizer.encode(text)
    maps = attention_maps(model, src_ids, [model.bos_id] + _greedy(model, src_ids))[kind][layer]  # (h, T_q, T_k)
    return maps.mean(0) if head is None else maps[head]


@torch.no_grad()
def _scored(model: Model, src_ids: list[int], out: list[int], alpha: float) -> dict[str, Any]:
    """log P(out <eos> | source), teacher-forced, and GNMT's normalised score log P / lp(n), n with <eos>."""
    src, tgt = torch.tensor([src_ids]), torch.tensor([out + [EOS]])  # (1, T_x), (1, n)
    logits = model(src, torch.ones_like(src, dtype=torch.bool), tgt)  # (1, n, V)
    log_prob = log_probs(logits).gather(-1, tgt[..., None]).sum().item()
    return {"log_prob": round(log_prob, 3), "score": round(float(normalised_score(log_prob, len(out) + 1, alpha)), 3)}


@torch.no_grad()
def _gru_alignment(gru: Model, src_ids: Sequence[int]) -> tuple[list[int], Tensor]:
    """The GRU's greedy translation (without <eos>) and its attention (T_y, T_x): one row per piece written, <eos>
    included when it was written (a translation cut by the length limit has none)."""
    src = torch.tensor([list(src_ids)])  # (1, T_x)
    tokens, weights = gru.generate(src, torch.ones_like(src, dtype=torch.bool), max_output_length(len(src_ids)))
    out = tokens[0].tolist()  # (L,), and weights (1, L, T_x)
    n = out.index(EOS) + 1 if EOS in out else len(out)
    return out[: n - (EOS in out)], weights[0, :n]


def alignment(gru: Model, tokenizer, text: str) -> Tensor:
    """Chapter 4's GRU with attention: its weights (T_y, T_x), unrounded, while it writes its greedy translation."""
    return _gru_alignment(gru, tokenizer.encode(text))[1]


def _rounded(weights: Tensor) -> list:
    """(L, h, T_q, T_k) float weights as nested lists of ints, thousandths (round half to even), each row without its
    trailing zeros: the decoder's masked future, a triangle of zeros, is a sixth of the data."""
    rows = torch.round(weights.double() * 10**DECIMALS).to(torch.int64).tolist()
    for layer in rows:
        for head in layer:
            for row in head:
                while row and row[-1] == 0:
                    row.pop()
    return rows


def _keys(sentence: dict, kind: str) -> list[str]:
    """The labels of a map's columns (T_k): the source pieces, or the decoder's input for its self-attention."""
    return sentence["read"] if kind == "decoder" else sentence["source"]


def _sentence(model: Model, tokenizer, text: str, note: str, beam_size: int, alpha: float, gru) -> dict[str, Any]:
    def piece(token: int) -> str:  # a BPE piece as text, its leading space shown as '_' (as the chapter draws it)
        return "<eos>" if token == EOS else tokenizer.decode([token]).replace(" ", "_")

    src_ids = tokenizer.encode(text)
    out = _greedy(model, src_ids)
    maps = attention_maps(model, src_ids, [model.bos_id] + out)  # kind -> (L, h, T_q, T_k)
    # beam search step by step, checked against beam_search's own result (the same output and score)
    beam = beam_steps(model, src_ids, beam_size, max_output_length(len(src_ids)), alpha, check=True)
    written = [piece(t) for t in out] + ["<eos>"]
    sentence: dict[str, Any] = {
        "text": text,
        "note": note,
        "source": [piece(t) for t in src_ids],
        "written": written,  # what each decoder position writes (the query rows of decoder and cross maps)
        "read": ["<bos>"] + written[:-1],  # the decoder's input at each position (the keys of its self-attention)
        "greedy": {"text": tokenizer.decode(out), **_scored(model, src_ids, out, alpha)},
        "beam": {"text": tokenizer.decode(beam.tokens), **_scored(model, src_ids, beam.tokens, alpha)},
        "steps": beam_data(beam, piece),  # the beam's hypotheses at each step, with their back-pointers
        "maps": {kind: _rounded(maps[kind]) for kind in KINDS},
    }
    if gru is not None:
        gru_out, weights = _gru_alignment(gru, src_ids)
        gru_written = [piece(t) for t in gru_out + [EOS]][: len(weights)]  # no <eos> row if none was written
        sentence["gru"] = {"text": tokenizer.decode(gru_out), "written": gru_written}
        sentence["maps"]["gru"] = _rounded(weights[None, None])  # (1 layer, 1 head, T_y, T_x)
    return sentence


def choose_sentences(sources: Sequence[str], ids: Sequence[Sequence[int]], first: Sequence[str] = (), lengths=LENGTHS):
    """Test sentences as (text, note) pairs, short to long: those of ``first`` (the ones the chapter discusses), then
    for each entry of ``lengths`` the next test sentence of that many pieces (a length with none left is skipped)."""
    index = {text: i for i, text in reversed(list(enumerate(sources)))}  # the first occurrence of each text
    missing = [text for text in first if text not in index]
    if missing:
        raise KeyError(f"not test sentences: {missing}")
    chosen = [index[text] for text in first]
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(ids):
        if i not in chosen:
            by_length.setdefault(len(s), []).append(i)
    for length in lengths:
        if by_length.get(length):
            chosen.append(by_length[length].pop(0))
    rest = sorted(chosen[len(first) :], key=lambda i: (len(ids[i]), i))
    return [(sources[i], f"test sentence {i}") for i in chosen[: len(first)] + rest]


def explorer_data(
    model: Model, tokenizer, sentences: Sequence[tuple[str, str]], beam_size: int = 4, alpha: float = 0.6, gru=None
):
    """What the page shows, as plain JSON-ready data: a list of (text, note) pairs in, every map of each sentence
    out, in thousandths; with ``gru`` (chapter 4's model) its translation and alignment too. Deterministic: the
    models run in eval mode, in float64."""
    texts = [text for text, _ in sentences]
    if len(set(texts)) != len(texts):
        raise ValueError("a sentence is given twice")
    layers = {"encoder": len(model.encoder.layers), "decoder": len(model.decoder.layers)}
    # In float64 copies, in eval mode (no dropout, the teacher-forced scores too; the models given are left as they
    # are). The page stores thousandths, and in float32 the last digits of a weight or a log-probability depend on
    # the order in which the processor's kernels add up: on an Intel Xeon, even with its AVX2 kernels, 6 of chapter
    # 9's numbers rounded otherwise than on the AMD EPYC that stored them. In float64 a number would have to lie
    # within about 1e-13 of a rounding boundary for that to happen.
    model64 = copy.deepcopy(model).double().eval()
    gru64 = None if gru is None else copy.deepcopy(gru).double().eval()
    with torch.no_grad():
        shown = [_sentence(model64, tokenizer, text, note, beam_size, alpha, gru64) for text, note in sentences]
    return {
        "decimals": DECIMALS,
        "kinds": {**KINDS, **(GRU if gru is not None else {})},
        "layers": {**layers, "cross": layers["decoder"], **({"gru": 1} if gru is not None else {})},
        "heads": model.encoder.layers[0].self_attn.n_heads,
        "beam_size": beam_size,
        "alpha": alpha,
        "sentences": shown,
    }


def lookup(data: dict, text: str, kind: str, layer: int, head: int | None = None) -> Tensor:
    """The weights (T_q, T_k) that the page shows for one choice, read back from ``explorer_data``'s result, in
    float64: a head's stored thousandths, or (head=None) their mean over the heads, as explorer.js computes it."""
    found = [s for s in data["sentences"] if s["text"] == text]
    if not found:
        raise KeyError(f"{text!r} is not one of the explorer's {len(data['sentences'])} sentences")
    if kind not in found[0]["maps"]:
        raise ValueError(f"kind must be one of {sorted(found[0]['maps'])}, got {kind!r}")
    width = len(_keys(found[0], kind))  # T_k: the stored rows lost their trailing zeros
    padded = [[[row + [0] * (width - len(row)) for row in head] for head in layer] for layer in found[0]["maps"][kind]]
    maps = torch.tensor(padded, dtype=torch.float64) / 10 ** data["decimals"]  # (L, h, T_q, T_k)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < maps.shape[0]:
        name = data["kinds"][kind]
        raise IndexError(f"layer {layer!r} is out of range: the {name} has layers 0 to {maps.shape[0] - 1}")
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < maps.shape[1]):
        raise IndexError(f"head {head!r} is out of range: heads 0 to {maps.shape[1] - 1}, or None for their mean")
    return maps[layer].mean(0) if head is None else maps[layer, head]


def explorer_html(data: dict) -> str:
    """The explorer's HTML for a notebook output: the data inline, and a sentence for where explorer.js is not loaded
    (JupyterLab, or a page without scripts); the script replaces it with the explorer."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c")  # "<bos>" stays valid JSON and cannot close the <script> element
    n = len(data["sentences"])
    return (
        '<div class="attn-explorer">\n'
        f'<p class="attn-explorer-fallback">The attention explorer ({n} sentences) is drawn by the book\'s '
        f"explorer.js: open this chapter in the built book to use it.</p>\n"
        f'<script type="application/json" class="attn-explorer-data">{payload}</script>\n'
        "</div>"
    )


def describe(data: dict) -> str:
    """One line for the notebook: how many sentences, their lengths, and the data's size in the page."""
    lengths = [len(s["source"]) for s in data["sentences"]]
    size = len(explorer_html(data).encode())
    return (
        f"{len(lengths)} sentences of {min(lengths)} to {max(lengths)} source pieces; "
        f"{data['heads']} heads; {size / 1000:.0f} kB of data in the page"
    )
