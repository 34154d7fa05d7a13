"""The Python side of the book page's contract (issue 52): ``python -m transformer_course.reference translate NAME
--beam K TEXT`` prints the input's BPE pieces and the translation as JSON, the same as ``reference.browser.translate``
and as chapter 9's decoders (greedy_decode, beam_search with alpha = 0.6); what the model is not asked about is
refused with a reason and exit status 2; the weights file the book build writes holds the tokenizer and the float16
weights of the model that ``--weights float16`` loads."""

from __future__ import annotations

import base64
import json
import zlib

import numpy as np
import pytest
import torch

from transformer_course.decoding.search import beam_search, max_output_length
from transformer_course.reference import browser
from transformer_course.reference.__main__ import main

TEXT = "The cat sleeps on the sofa."


@pytest.fixture(scope="module")
def stored():
    return browser.load_translator("transformer-ref")


@pytest.mark.parametrize("beam", [1, 4])
def test_the_command_prints_the_pieces_and_the_translation(stored, capsys, beam):
    assert main(["translate", "transformer-ref", "--beam", str(beam), TEXT]) == 0
    printed = json.loads(capsys.readouterr().out)
    model, tokenizer = stored
    assert printed == browser.translate(model, tokenizer, TEXT, beam)
    assert printed["pieces"] == tokenizer.tokenizer.encode(TEXT, add_special_tokens=False).tokens
    if beam == 4:
        ids = tokenizer.encode(TEXT)
        src = torch.tensor([ids])
        found = beam_search(model, src, torch.ones_like(src, dtype=torch.bool), 4, max_output_length(len(ids)), 0.6)
        assert printed["output"] == tokenizer.decode(found.tokens[0])


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "Nothing to translate"), ("\t \n", "Nothing to translate"), ("a" * 301, "301 characters, the limit is 300")],
)
def test_input_the_model_is_not_asked_about_is_refused_with_its_reason(capsys, text, reason):
    assert main(["translate", "transformer-ref", text]) == 2
    assert reason in json.loads(capsys.readouterr().out)["refused"]


def test_too_many_pieces_are_refused_and_beam_must_be_1_or_4(stored):
    model, tokenizer = stored
    with pytest.raises(browser.InputRefused, match=f"the limit is {browser.MAX_PIECES}"):
        browser.check_input("\U0001f600" * 40, tokenizer)  # 40 characters, 4 byte pieces each
    with pytest.raises(ValueError, match="beam must be 1"):
        browser.translate(model, tokenizer, TEXT, 2)


def test_the_weights_file_holds_the_float16_models_weights_and_the_tokenizer(stored):
    model, tokenizer = stored
    data = browser.model_data(model, tokenizer)
    planes = np.frombuffer(zlib.decompress(base64.b64decode(data["blob"])), dtype=np.uint8)
    n = data["count"]
    halves = (planes[:n].astype(np.uint16) << 8) | planes[n:]
    values = torch.from_numpy(halves.view(np.float16).astype(np.float32))
    rounded = browser.rounded_model(model).state_dict()
    for name, (offset, shape) in data["tensors"].items():
        assert torch.equal(values[offset : offset + int(np.prod(shape))].view(shape), rounded[name]), name
    assert n == sum(p.numel() for p in model.parameters())  # every parameter, the tied embedding once
    assert len(data["vocab"]) == len(tokenizer) and data["specials"] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert data["alpha"] == 0.6 and data["max_chars"] == browser.MAX_CHARS
