"""The reference Transformer in the reader's browser (the book's "Try the model" page): the contract that the page
and ``python -m transformer_course.reference translate`` share, and the weights file the book build writes.

The contract. ``translate(model, tokenizer, text, beam)`` -> ``{"pieces": [...], "output": "..."}``: the input's
BPE pieces as the vocabulary spells them (byte-level, 'Ġ' for a space: ``Encoding.tokens`` of ``tokenizers``) and
the decoded Spanish, greedy (beam 1) or chapter 9's beam search (beam 4, alpha = 0.6), with chapter 9's length limit
(``max_output_length``). The page's ``window.courseModel.translate(text, {beam})`` resolves to the same object.
Input the model cannot take is refused on both sides with the same message (``InputRefused``): nothing typed, more
than MAX_CHARS characters, or more than MAX_PIECES pieces (an emoji is 4 bytes, so up to 4 or more pieces each).

The weights file. A book page opened from file:// may not fetch or XHR a file, so the weights travel in a script,
``transformer-ref-model.js``, that sets ``window.COURSE_MODEL_DATA``: the configuration, the tokenizer (vocabulary
by id and merges in rank order) and every distinct tensor in float16, split into two byte planes (all high bytes,
then all low bytes: the exponents compress well apart), deflated (zlib) and written as base64. The page inflates
it with the browser's DecompressionStream and computes in float32. The tied embedding is stored once.
``rounded_model`` is PyTorch's model on the same rounded weights: the browser is compared with it to the token, and
with the stored model to count where float16 rounding alone changes an output.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

from . import _path, load_reference, reference_run

__all__ = [
    "ALPHA",
    "MAX_CHARS",
    "MAX_PIECES",
    "InputRefused",
    "check_input",
    "model_data",
    "reference_tokenizer",
    "rounded_model",
    "translate",
    "write_model_script",
]

ALPHA = 0.6  # chapter 9's length penalty (the explorer's and solutions/09_beam_search's)
MAX_CHARS = 300  # characters of input the page accepts: a long paragraph is not what the model was trained on
MAX_PIECES = 128  # BPE pieces: with chapter 9's limit the output may then take int(1.5 * 128) + 10 = 202 positions
# Unicode's White_Space characters: the tokenizer's \s (Oniguruma's), and the page's test for "nothing typed"
BLANK = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*")
EXPORT_VERSION = "1"  # bump when the file's layout changes: the book build rewrites the file then


class InputRefused(ValueError):
    """Text the model is not asked to translate; the message is what the page shows."""


def reference_tokenizer(name: str = "transformer-ref"):
    """The reference model's BPE: the course's shared tokenizer, read from the cache folder when it is there (fast),
    otherwise learned from the training split as load_data learns it."""
    from ..data.tokenize import BPETokenizer
    from ..data.translation import data_for, tokenizer_file
    from ..training.kinds import typed

    config = typed(reference_run(name)["settings"])
    path = tokenizer_file(config.vocab)
    return BPETokenizer.load(path) if path.is_file() else data_for(config).tokenizer


def load_translator(name: str = "transformer-ref", weights: str = "stored") -> tuple[nn.Module, Any]:
    """(model, tokenizer): the stored weights, or (``weights="float16"``) the weights the browser computes with."""
    tokenizer = reference_tokenizer(name)
    model, _, _ = load_reference(name, data=SimpleNamespace(tokenizer=tokenizer))
    return (rounded_model(model) if weights == "float16" else model), tokenizer


def rounded_model(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose weights went through float16 and back: what the page computes with."""
    from ..training.compact_weights import rounded_copy

    return rounded_copy(model, "float16").eval()


def check_input(text: str, tokenizer) -> list[int]:
    """The token ids of ``text``, or InputRefused saying why the model is not asked (the page says the same)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if BLANK.fullmatch(text):
        raise InputRefused("Nothing to translate: type an English sentence.")
    if len(text) > MAX_CHARS:
        raise InputRefused(f"Too long: {len(text)} characters, the limit is {MAX_CHARS}.")
    ids = tokenizer.encode(text)
    if len(ids) > MAX_PIECES:
        raise InputRefused(f"Too long: {len(ids)} BPE pieces, the limit is {MAX_PIECES}.")
    return ids


@torch.no_grad()
def decode_ids(model: nn.Module, src_ids: list[int], beam: int) -> list[int]:
    """The output token ids (without <eos>) of one sentence, decoded as chapter 9 decodes it (a batch of one)."""
    from ..decoding.search import beam_search, greedy_decode, max_output_length

    src = torch.tensor([src_ids])  # (1, T_x)
    mask = torch.ones_like(src, dtype=torch.bool)
    limit = max_output_length(len(src_ids))
    if beam == 1:
        tokens = greedy_decode(model, src, mask, limit)[0].tolist()
        return tokens[: tokens.index(2)] if 2 in tokens else tokens
    return beam_search(model, src, mask, beam, limit, ALPHA).tokens[0]


def translate(model: nn.Module, tokenizer, text: str, beam: int = 1) -> dict[str, Any]:
    """{"pieces": the input's BPE pieces (vocabulary strings), "output": the Spanish}: the page's contract."""
    if beam not in (1, 4):
        raise ValueError(f"beam must be 1 (greedy) or 4 (chapter 9's beam search), got {beam!r}")
    ids = check_input(text, tokenizer)
    vocab = {i: t for t, i in tokenizer.tokenizer.get_vocab().items()}
    return {"pieces": [vocab[i] for i in ids], "output": tokenizer.decode(decode_ids(model, ids, beam))}


# --- the weights file -------------------------------------------------------------------------------------------


def _tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every distinct tensor of the state dict (the tied embedding once, as tgt_embed.weight), by name."""
    seen: set[int] = set()
    out = {}
    for name, t in model.state_dict().items():
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        out[name] = t.detach().cpu()
    return out


def model_data(model: nn.Module, tokenizer, name: str = "transformer-ref") -> dict[str, Any]:
    """What ``window.COURSE_MODEL_DATA`` holds (see the module's docstring); ``blob`` is the base64 text."""
    tensors = _tensors(model)
    halves = np.concatenate([t.to(torch.float16).numpy().ravel() for t in tensors.values()]).view(np.uint16)
    planes = np.concatenate([(halves >> 8).astype(np.uint8), (halves & 0xFF).astype(np.uint8)]).tobytes()
    layout, offset = {}, 0
    for key, t in tensors.items():
        layout[key] = [offset, list(t.shape)]
        offset += t.numel()
    spec = json.loads(tokenizer.to_str())
    vocab = sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])
    if [i for _, i in vocab] != list(range(len(vocab))):
        raise ValueError("the tokenizer's ids are not 0 .. V - 1")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return {
        "name": name,
        "config": dict(model.config),  # type: ignore[arg-type]  # the Transformer's dict (torch types it Tensor | Module)
        "alpha": ALPHA,
        "max_chars": MAX_CHARS,
        "max_pieces": MAX_PIECES,
        "specials": [t["content"] for t in spec["added_tokens"]],
        "vocab": [t for t, _ in vocab],
        "merges": merges,
        "tensors": layout,
        "count": offset,
        "blob": base64.b64encode(zlib.compress(planes, 9)).decode("ascii"),
    }


def _source_digest(name: str) -> str:
    """What the file is made from: the weights, the tokenizer, this module. Equal digests: the file is current."""
    from ..data.translation import tokenizer_file
    from ..training.kinds import typed

    digest = hashlib.sha256(EXPORT_VERSION.encode() + reference_run(name)["weights_sha256"].encode())
    digest.update(Path(__file__).read_bytes())
    tokenizer = tokenizer_file(typed(reference_run(name)["settings"]).vocab)
    digest.update(tokenizer.read_bytes() if tokenizer.is_file() else b"learned")
    return digest.hexdigest()[:16]


def write_model_script(folder: Path, name: str = "transformer-ref") -> Path:
    """Write ``folder/NAME-model.js`` (window.COURSE_MODEL_DATA) unless it is current; return its path."""
    if not _path(name, ".pt").is_file():
        raise FileNotFoundError(f"{_path(name, '.pt')} is missing")
    target = Path(folder) / f"{name}-model.js"
    stamp = f"/* {name} {_source_digest(name)} */\n"
    if target.is_file():
        with target.open(encoding="utf-8") as f:
            if f.readline() == stamp:
                return target
    model, tokenizer = load_translator(name)
    payload = json.dumps(model_data(model, tokenizer, name), ensure_ascii=True, separators=(",", ":"))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(stamp + f"window.COURSE_MODEL_DATA = {payload};\n", encoding="utf-8")
    tmp.replace(target)
    return target
