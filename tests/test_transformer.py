"""The reference Transformer of chapter 8 against torch.nn.Transformer, its masks, its interface and its errors."""

import math
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.data.batching import shift_right
from transformer_course.models.transformer import (
    DecoderLayer,
    EncoderLayer,
    PackedMultiHeadAttention,
    Packing,
    Transformer,
    decoder_inputs,
)
from transformer_course.models.transformer_torch import (
    TorchTransformer,
    copy_from_torch,
    copy_to_torch,
    parameter_names,
    to_torch,
)

PAD, BOS, EOS = 0, 1, 2
SRC_V, TGT_V = 13, 17


def _model(norm_first=False, use_sdpa=True, **kw):
    """A small float64 model with every bias and LayerNorm parameter random, so that none can hide a mistake."""
    cfg = dict(d_model=16, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=32, dropout=0.0, max_len=40)
    cfg.update(kw)
    model = Transformer(
        cfg.pop("src_vocab", SRC_V), cfg.pop("tgt_vocab", TGT_V), norm_first=norm_first, use_sdpa=use_sdpa, **cfg
    ).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
    return model


def _batch(b=4, t_x=7, t_y=6, src_lengths=(7, 4, 1, 5), tgt_lengths=(6, 3, 1, 4)):
    """src (B, T_x) and tgt (B, T_y) (= targets, <eos>, padding) with the given lengths; mask (B, T_x)."""
    src = torch.randint(3, SRC_V, (b, t_x))
    src_mask = torch.arange(t_x)[None] < torch.tensor(src_lengths)[:, None]
    tgt = torch.randint(3, TGT_V, (b, t_y))
    tgt_lengths = torch.tensor(tgt_lengths)
    tgt = tgt.masked_fill(torch.arange(t_y)[None] == tgt_lengths[:, None] - 1, EOS)
    tgt = tgt.masked_fill(torch.arange(t_y)[None] >= tgt_lengths[:, None], PAD)
    return src.masked_fill(~src_mask, PAD), src_mask, tgt


def _decoder_real(tgt):
    """(B, T_y) True where the decoder's input, shift_right(tgt), is a real token."""
    return shift_right(tgt, BOS) != PAD


def _max_diff(a, b, where=None):
    d = (a - b).abs()
    return (d[where] if where is not None else d).max().item()


# Agreement with torch.nn.Transformer -------------------------------------------------------------------------


@pytest.mark.parametrize("use_sdpa", [True, False], ids=["sdpa", "own-attention"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_agrees_with_nn_transformer_in_float64(norm_first, use_sdpa):
    ours = _model(norm_first, use_sdpa)
    theirs = to_torch(ours)
    assert theirs.transformer.encoder.layers[0].norm_first is norm_first
    assert (theirs.transformer.encoder.norm is not None) is norm_first  # pre-norm only: a final LayerNorm
    src, src_mask, tgt = _batch()
    tgt_in = shift_right(tgt, BOS)
    real_x, real_y = src_mask, _decoder_real(tgt)
    ours.train(), theirs.train()  # dropout is 0; training mode keeps nn.Transformer off its inference fast path
    # The encoder stack alone, on the same embedded source
    x = theirs.positional(theirs.src_embed(src) * math.sqrt(16))
    memory_torch = theirs.transformer.encoder(x, src_key_padding_mask=~src_mask)
    memory = ours.encode(src, src_mask)
    assert _max_diff(memory, memory_torch, real_x) < 1e-10
    # The whole model: both stacks, the masks (source padding, target padding, causal), the output layer
    logits, logits_torch = ours(src, src_mask, tgt), theirs(src, src_mask, tgt)
    assert logits.shape == logits_torch.shape == (4, 6, TGT_V)
    assert _max_diff(logits, logits_torch, real_y) < 1e-10
    assert logits_torch[real_y].abs().max() > 0.1  # a real comparison, not of zeros
    # decode on its own, with an explicit target padding mask
    decoded = ours.decode(memory, src_mask, tgt_in, real_y)
    assert _max_diff(decoded, logits_torch, real_y) < 1e-10
    # The decoder stack alone, with padding *inside* the targets: here the target padding mask matters
    holes = torch.rand(4, 6) > 0.4
    holes[:, 0] = True
    y = theirs.positional(theirs.tgt_embed(tgt_in) * math.sqrt(16))
    states_torch = theirs.transformer.decoder(
        y,
        memory_torch,
        tgt_mask=~torch.ones(6, 6, dtype=torch.bool).tril(),
        tgt_key_padding_mask=~holes,
        memory_key_padding_mask=~src_mask,
    )
    assert _max_diff(ours.decode(memory, src_mask, tgt_in, holes), theirs.out(states_torch), holes) < 1e-10


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_copy_from_torch_gives_the_same_function(norm_first):
    torch.manual_seed(3)
    theirs = TorchTransformer(
        SRC_V,
        TGT_V,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=3,
        d_ff=24,
        dropout=0.0,
        norm_first=norm_first,
        max_len=40,
    ).double()
    with torch.no_grad():
        for p in theirs.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.3)
    ours = Transformer(
        SRC_V,
        TGT_V,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=3,
        d_ff=24,
        dropout=0.0,
        norm_first=norm_first,
        max_len=40,
    ).double()
    copy_from_torch(ours, theirs.transformer, theirs.src_embed, theirs.tgt_embed, theirs.out)
    src, src_mask, tgt = _batch()
    ours.train(), theirs.train()
    assert _max_diff(ours(src, src_mask, tgt), theirs(src, src_mask, tgt), _decoder_real(tgt)) < 1e-10
    # and back again: every parameter of nn.Transformer is covered by the name map, and survives the round trip
    assert set(parameter_names(ours).values()) == set(dict(theirs.transformer.named_parameters()))
    fresh = TorchTransformer(
        SRC_V,
        TGT_V,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=3,
        d_ff=24,
        dropout=0.0,
        norm_first=norm_first,
        max_len=40,
    ).double()
    copy_to_torch(ours, fresh.transformer, fresh.src_embed, fresh.tgt_embed, fresh.out)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), theirs.state_dict().values()))


def test_copy_refuses_a_transformer_of_another_shape():
    ours = _model()
    with pytest.raises(ValueError, match="n_heads is 2, should be 4"):
        copy_to_torch(ours, nn.Transformer(16, 2, 2, 2, 32, batch_first=True))
    with pytest.raises(ValueError, match="final LayerNorm is True, should be False"):
        copy_to_torch(ours, nn.Transformer(16, 4, 2, 2, 32, batch_first=True))  # post-norm: no final LayerNorm
    with pytest.raises(TypeError, match="torch.nn.Transformer"):
        copy_from_torch(ours, nn.Linear(2, 2))


def test_own_attention_and_fused_kernel_agree_and_weights_are_kept():
    sdpa, own = _model(use_sdpa=True), _model(use_sdpa=False)
    own.load_state_dict(sdpa.state_dict())
    src, src_mask, tgt = _batch()
    sdpa.eval(), own.eval()
    with torch.no_grad():
        assert _max_diff(sdpa(src, src_mask, tgt), own(src, src_mask, tgt)) < 1e-12
    layer = own.decoder.layers[-1]
    assert layer.last_cross_weights is None  # not kept unless asked for
    layer.store_cross_weights = True
    with torch.no_grad():
        own(src, src_mask, tgt)
    weights = layer.last_cross_weights
    assert weights.shape == (4, 4, 6, 7)  # (B, h, T_y, T_x)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 4, 6, dtype=torch.float64))
    assert weights.masked_select(~src_mask[:, None, None, :]).abs().max() == 0  # no weight on source padding


# Masks -------------------------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 7), st.booleans(), st.data())
def test_output_at_t_does_not_depend_on_later_targets(t_y, norm_first, data):
    model = _model(norm_first).eval()
    t = data.draw(st.integers(0, t_y - 2))  # the last position whose output must not move
    src, src_mask, _ = _batch()
    tgt = torch.randint(3, TGT_V, (4, t_y))
    changed = tgt.clone()
    changed[:, t:] = torch.randint(3, TGT_V, (4, t_y - t))  # decoder inputs from position t + 1 on change
    with torch.no_grad():
        before, after = model(src, src_mask, tgt), model(src, src_mask, changed)
    assert _max_diff(before[:, : t + 1], after[:, : t + 1]) < 1e-12
    assert _max_diff(before[:, t + 1 :], after[:, t + 1 :]) > 1e-6  # the later ones do move: the test can fail


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.booleans(), st.data())
def test_source_padding_changes_no_output(extra, norm_first, data):
    model = _model(norm_first, use_sdpa=data.draw(st.booleans())).eval()
    src, src_mask, tgt = _batch()
    # the same sentences with more padding, holding arbitrary ids (the mask, not the id, makes padding)
    wider = torch.cat([src, torch.randint(0, SRC_V, (4, extra))], dim=1)
    wider_mask = torch.cat([src_mask, torch.zeros(4, extra, dtype=torch.bool)], dim=1)
    wider[:, : src.shape[1]] = torch.where(src_mask, src, torch.randint(0, SRC_V, src.shape))
    real = _decoder_real(tgt)
    with torch.no_grad():
        assert _max_diff(model(src, src_mask, tgt), model(wider, wider_mask, tgt), real) < 1e-12
        memory, memory_wider = model.encode(src, src_mask), model.encode(wider, wider_mask)
    assert _max_diff(memory, memory_wider[:, : src.shape[1]], src_mask) < 1e-12
    assert torch.isfinite(memory_wider).all() and memory_wider[~wider_mask].abs().max() == 0


def test_target_padding_changes_no_output_and_nothing_is_nan():
    model = _model(dropout=0.0)
    src, src_mask, tgt = _batch()
    longer = torch.cat([tgt, torch.full((4, 3), PAD)], dim=1)
    with torch.no_grad():
        logits, logits_longer = model(src, src_mask, tgt), model(src, src_mask, longer)
    assert _max_diff(logits, logits_longer[:, :6], _decoder_real(tgt)) < 1e-12
    assert torch.isfinite(logits_longer).all()  # padding queries: no NaN
    assert logits_longer[~_decoder_real(longer)].abs().max() == 0  # not computed


def test_decoder_inputs_shift_right_and_hide_future_and_padding():
    tgt = torch.tensor([[5, 6, EOS, PAD], [7, EOS, PAD, PAD]])
    tgt_in, mask = decoder_inputs(tgt, BOS, PAD)
    assert torch.equal(tgt_in, torch.tensor([[BOS, 5, 6, EOS], [BOS, 7, EOS, PAD]]))
    assert mask.shape == (2, 1, 4, 4) and mask.dtype == torch.bool
    assert torch.equal(mask[0, 0], torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.equal(mask[1, 0], torch.ones(4, 4, dtype=torch.bool).tril() & torch.tensor([True, True, True, False]))


def test_computing_padding_positions_too_changes_nothing_else():
    packed = _model()
    full = _model()
    full.load_state_dict(packed.state_dict())
    full._packing = lambda mask: None  # every position computed, as chapter 8's grader's model does
    src, src_mask, tgt = _batch()
    real = _decoder_real(tgt)
    with torch.no_grad():
        a, b = packed(src, src_mask, tgt), full(src, src_mask, tgt)
    assert _max_diff(a, b, real) < 1e-12
    assert a[~real].abs().max() == 0 and b[~real].abs().min() > 0  # only the full model computes padding


def test_packing_round_trip():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    packing, x = Packing(mask), torch.randn(2, 3, 5)
    assert packing.pack(x).shape == (3, 5)
    assert torch.equal(packing.unpack(packing.pack(x)), torch.where(mask[..., None], x, 0.0))
    everything = Packing(torch.ones(2, 3, dtype=torch.bool))
    assert everything.index is None and torch.equal(everything.unpack(everything.pack(x)), x)


# Structure ---------------------------------------------------------------------------------------------------


def test_tied_embeddings_share_one_parameter():
    shared = Transformer(
        20, 20, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, tie_embeddings=True
    )
    assert shared.src_embed.weight is shared.tgt_embed.weight is shared.out.weight
    untied = Transformer(20, 20, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32)
    n = lambda m: sum(p.numel() for p in m.parameters())
    assert n(untied) - n(shared) == 2 * 20 * 16
    # a training step keeps them one: the gradient from all three uses lands in the same tensor
    src, src_mask, tgt = torch.randint(3, 20, (2, 5)), torch.ones(2, 5, dtype=torch.bool), torch.randint(3, 20, (2, 4))
    F.cross_entropy(shared(src, src_mask, tgt).flatten(0, 1), tgt.flatten()).backward()
    torch.optim.SGD(shared.parameters(), lr=1.0).step()
    assert shared.src_embed.weight is shared.out.weight
    different = Transformer(
        20, 30, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, tie_embeddings=True
    )
    assert different.tgt_embed.weight is different.out.weight and different.src_embed is not different.tgt_embed


def test_layers_are_post_norm_by_default_and_pre_norm_on_request():
    x, layer = torch.randn(2, 5, 16), EncoderLayer(16, 4, 32)
    out = layer(x)
    # post-norm: the output is a LayerNorm's, so each position has mean beta and std gamma (here 0 and 1)
    assert out.mean(-1).abs().max() < 1e-5 and (out.std(-1, unbiased=False) - 1).abs().max() < 1e-3
    pre = EncoderLayer(16, 4, 32, norm_first=True)
    assert (pre(x).mean(-1).abs().max()) > 1e-2  # pre-norm: the residual stream is not normalised
    assert _model().encoder.norm is None and _model(norm_first=True).encoder.norm is not None


def test_cross_attention_takes_queries_from_the_decoder():
    layer = DecoderLayer(16, 4, 32).double().eval()
    y, memory = torch.randn(2, 3, 16, dtype=torch.float64), torch.randn(2, 5, 16, dtype=torch.float64)
    layer.store_cross_weights = True
    out = layer(y, memory)
    assert out.shape == (2, 3, 16) and layer.last_cross_weights.shape == (2, 4, 3, 5)  # T_y queries, T_x keys
    q = layer.cross_attn.project_q(layer.self_attn_norm(y + layer.self_attn(y)[0]))
    k, _ = layer.cross_attn.project_kv(memory)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    torch.testing.assert_close(layer.last_cross_weights, expected)


def test_fused_projection_equals_three_separate_ones():
    attn = PackedMultiHeadAttention(16, 4).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    q, k, v = attn.project_qkv(x)
    assert torch.allclose(q, attn.project_q(x), atol=1e-12) and torch.allclose(k, attn.project_kv(x)[0], atol=1e-12)
    assert torch.allclose(v, attn.project_kv(x)[1], atol=1e-12) and q.shape == (2, 4, 5, 4)


# Generation --------------------------------------------------------------------------------------------------


def test_generate_returns_max_len_greedy_tokens_and_weights():
    model = _model().eval()
    src, src_mask, _ = _batch()
    tokens, weights = model.generate(src, src_mask, max_len=9, eos_id=None)
    assert tokens.shape == (4, 9) and tokens.dtype == torch.int64 and weights.shape == (4, 9, 7)
    assert ((tokens >= 0) & (tokens < TGT_V)).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 9, dtype=torch.float64))
    assert weights.masked_select(~src_mask[:, None, :]).abs().max() == 0
    # greedy: each token is the argmax of the teacher-forced logits given the tokens before it
    with torch.no_grad():
        logits = model(src, src_mask, tokens)
    assert torch.equal(logits.argmax(-1), tokens)
    assert model.decoder.layers[-1].store_cross_weights is False  # the flag is restored


# Errors ------------------------------------------------------------------------------------------------------


def _ok():
    src, src_mask, tgt = _batch()
    return _model(), src, src_mask, tgt


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: Transformer(10, 10, d_model=30, n_heads=4), ValueError, "divisible by n_heads=4"),
        (lambda: Transformer(10, 10, dropout=1.5), ValueError, "dropout must be in"),
        (lambda: Transformer(10, 10, n_encoder_layers=0), ValueError, "n_encoder_layers must be a positive int"),
        (lambda: Transformer(1, 10), ValueError, "too small"),
        (lambda: EncoderLayer(10, 3, 8), ValueError, "divisible by n_heads=3"),
        (lambda: (m := _ok())[0](m[1].float(), m[2], m[3]), TypeError, "src must be an int64 tensor"),
        (lambda: (m := _ok())[0](m[1], m[2].long(), m[3]), TypeError, "src_mask must be a boolean tensor"),
        (
            lambda: (m := _ok())[0](m[1], m[2][:, :5], m[3]),
            ValueError,
            r"src_mask must have the shape of src, \(4, 7\)",
        ),
        (lambda: (m := _ok())[0](m[1], m[2], m[3][:2]), ValueError, "batch size 4 but tgt 2"),
        (lambda: (m := _ok())[0](m[1][0], m[2][0], m[3]), ValueError, r"shape \(B, T\)"),
        (lambda: (m := _ok())[0](m[1], m[2], m[3] + TGT_V), ValueError, "outside the vocabulary 0 .. 16"),
        (lambda: (m := _ok())[0](m[1], m[2] & False, m[3]), ValueError, "at least one real token"),
        (
            lambda: _model()(
                torch.ones(1, 41, dtype=torch.long),
                torch.ones(1, 41, dtype=torch.bool),
                torch.ones(1, 3, dtype=torch.long),
            ),
            ValueError,
            "41 positions, more than the model's max_len=40",
        ),
        (lambda: (m := _ok())[0](m[1], m[2], torch.ones(4, 41, dtype=torch.long)), ValueError, "tgt has 41 positions"),
        (lambda: (m := _ok())[0].generate(m[1], m[2], 41), ValueError, "max_len=41 is more"),
        (lambda: (m := _ok())[0].generate(m[1], m[2], 0), ValueError, "max_len must be a positive int"),
        (
            lambda: (m := _ok())[0].decode(torch.ones(4, 7, 8), m[2], m[3]),
            ValueError,
            r"memory must be a tensor \(B, T_x, d_model=16\)",
        ),
        (
            lambda: (m := _ok())[0].decode(torch.ones(4, 7, 16), m[2][:, :3], m[3]),
            ValueError,
            "src_mask must be a boolean tensor of shape",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


# Training ----------------------------------------------------------------------------------------------------


def test_a_tiny_model_learns_to_copy():
    torch.manual_seed(0)
    start = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 6, (48,), generator=g)
    seqs = [torch.randint(3, 13, (int(n),), generator=g) for n in lengths]
    src = torch.zeros(48, 5, dtype=torch.long)
    tgt = torch.zeros(48, 6, dtype=torch.long)
    for i, s in enumerate(seqs):
        src[i, : len(s)] = s
        tgt[i, : len(s) + 1] = torch.cat([s, torch.tensor([EOS])])
    src_mask = src != PAD
    model = Transformer(
        13,
        13,
        d_model=32,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=64,
        dropout=0.0,
        max_len=16,
        tie_embeddings=True,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = F.cross_entropy(model(src, src_mask, tgt).flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    tokens, _ = model.generate(src, src_mask, max_len=6, eos_id=None)
    correct = (tokens == tgt) | (tgt == PAD)
    stopped, _ = model.generate(src, src_mask, max_len=6)  # stops once every row has written <eos>
    longest = int((tgt != PAD).sum(dim=1).max())
    ended = (tokens == EOS).long()
    after = ended.cumsum(dim=1) - ended > 0  # past a row's first <eos>: a stopped row holds <eos> there
    assert stopped.shape[1] == longest and torch.equal(stopped, tokens.masked_fill(after, EOS)[:, :longest])
    assert loss.item() < 0.05, loss.item()
    assert correct.all(dim=1).float().mean().item() == 1.0  # every training string copied exactly, <eos> included
    assert time.perf_counter() - start < 60


# GPU ---------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (bf16 autocast); CI and most laptops have none"
)
def test_bf16_autocast_forward_and_backward_on_gpu():
    model = Transformer(50, 60, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128).cuda()
    src, src_mask, tgt = (t.cuda() for t in _batch())
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(src, src_mask, tgt)
    assert logits.dtype == torch.bfloat16 and logits.shape == (4, 6, 60)
    loss = F.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), ignore_index=PAD)
    loss.backward()
    assert torch.isfinite(loss) and all(
        p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad
    )
    # and in float32 it agrees with nn.Transformer on the GPU too
    exact = Transformer(
        50, 60, d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128, dropout=0.0
    ).cuda()
    theirs = to_torch(exact)
    with torch.no_grad():
        diff = (exact(src, src_mask, tgt) - theirs(src, src_mask, tgt))[_decoder_real(tgt)].abs().max().item()
    assert diff < 1e-3
