"""Compact weights (transformer_course.training.compact_weights): what each form keeps, shared tensors stored once, and the
files read back as float32 state dicts that load into the model."""

import hashlib

import pytest
import torch

from transformer_course.training.compact_weights import (
    INT8_MIN_SIZE,
    compact,
    expand,
    is_compact,
    load_state,
    rounded_copy,
    save_compact,
)
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model


@pytest.fixture(scope="module")
def model():
    return build_model(CONFIGS["transformer-cpu"], 8000)


def test_float32_is_exact_and_shared_tensors_are_stored_once(model):
    state = model.state_dict()
    blob = compact(state, "float32")
    assert (
        set(blob["aliases"]) == {"src_embed.weight", "out.weight"}
        and blob["aliases"]["out.weight"] == "tgt_embed.weight"
    )
    back = expand(blob)
    assert list(back) == list(state) or set(back) == set(state)
    assert all(torch.equal(back[k], v) for k, v in state.items())


def test_float16_and_int8_round_within_their_precision(model):
    state = model.state_dict()
    half = expand(compact(state, "float16"))
    for name, w in state.items():
        assert torch.allclose(half[name], w, rtol=2**-10, atol=1e-7), name
    blob = compact(state, "int8")
    int8 = expand(blob)
    for name, w in state.items():
        stored = blob["aliases"].get(name, name)  # the name under which a shared tensor is stored
        if stored in blob["scales"]:  # a matrix: every entry within half a step of its row's scale
            assert w.dim() == 2 and w.numel() >= INT8_MIN_SIZE and blob["tensors"][stored].dtype == torch.int8
            step = w.abs().amax(dim=1, keepdim=True) / 127
            assert ((int8[name] - w).abs() <= step / 2 + 1e-7).all(), name
        else:  # biases and LayerNorms stay float32
            assert torch.equal(int8[name], w), name


def test_a_file_of_either_kind_loads_into_the_model(model, tmp_path):
    plain, small = tmp_path / "plain.pt", tmp_path / "small.pt"
    torch.save(model.state_dict(), plain)
    digest = save_compact(model.state_dict(), "int8", small)
    assert digest == hashlib.sha256(small.read_bytes()).hexdigest()  # what a stored run records
    assert small.stat().st_size < 0.3 * plain.stat().st_size
    assert not is_compact(torch.load(plain, weights_only=True)) and is_compact(torch.load(small, weights_only=True))
    twin = build_model(CONFIGS["transformer-cpu"], 8000, seed=1)
    twin.load_state_dict(load_state(small))
    rounded = rounded_copy(model, "int8")
    assert all(torch.equal(a, b) for a, b in zip(twin.state_dict().values(), rounded.state_dict().values()))
    src = torch.randint(4, 8000, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.bool)
    model.eval(), twin.eval()
    with torch.no_grad():
        full, approx = model(src, mask, src), twin(src, mask, src)
    assert (full - approx).norm() / full.norm() < 0.02  # the int8 model computes nearly the same logits


def test_bad_input_is_refused_clearly(model):
    with pytest.raises(ValueError, match="form must be one of float32, float16, int8"):
        compact(model.state_dict(), "int4")
    with pytest.raises(ValueError, match="not a file of compact weights"):
        expand({"weights": torch.zeros(1)})
