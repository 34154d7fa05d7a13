"""The decoder-only Transformer language model (language_model.py): agreement with PyTorch's own layers, the
causal mask, padding, the shifted loss, tied embeddings, and cached against recomputed generation."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.decoding.sampling import generate
from transformer_course.models.language_model import DecoderOnlyLayer, TransformerLM, mask_after, shift_targets
from transformer_course.models.transformer_layers import DecoderLayer, EncoderLayer
from transformer_course.models.transformer_torch import lm_logits_with_torch

V, D, H, LAYERS, D_FF, MAX_LEN = 37, 16, 4, 2, 24, 32


def small_lm(norm_first: bool = True, seed: int = 0, **kwargs) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(V, D, H, LAYERS, D_FF, MAX_LEN, norm_first=norm_first, **kwargs).eval()


def random_ids(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, V, (batch, length), generator=torch.Generator().manual_seed(seed))  # no pad (0)


def reference_logits(model: TransformerLM, ids: torch.Tensor) -> torch.Tensor:
    """The model computed with PyTorch's layers (nn.TransformerEncoderLayer under a causal mask)."""
    return lm_logits_with_torch(model, ids)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("use_sdpa", [True, False])
def test_agrees_with_torch_encoder_layers_under_a_causal_mask(norm_first, use_sdpa):
    model = small_lm(norm_first, use_sdpa=use_sdpa).double()
    with torch.no_grad():
        model.out.bias.normal_()  # a bias that is not zero, so that it is checked too
    ids = random_ids(3, 11)
    with torch.no_grad():
        ours, theirs = model(ids), reference_logits(model, ids)
    assert ours.shape == (3, 11, V) and ours.dtype == torch.float64
    torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=0)


def test_agreement_in_float32():
    model = small_lm()
    ids = random_ids(2, 9)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), reference_logits(model, ids), atol=1e-5, rtol=0)


def test_the_layer_is_the_decoder_layer_without_cross_attention():
    ours = {n for n, _ in DecoderOnlyLayer(D, H, D_FF).named_parameters()}
    decoder = {n for n, _ in DecoderLayer(D, H, D_FF).named_parameters()}
    assert ours == {n for n in decoder if not n.startswith("cross_attn")}
    assert ours == {n for n, _ in EncoderLayer(D, H, D_FF).named_parameters()}


@pytest.mark.parametrize("norm_first", [True, False])
def test_a_later_token_never_changes_earlier_logits(norm_first):
    model = small_lm(norm_first)
    ids = random_ids(2, 12)
    with torch.no_grad():
        before = model(ids)
        for j in (0, 5, 11):
            changed = ids.clone()
            changed[:, j] = (changed[:, j] % (V - 1)) + 1  # another real token
            after = model(changed)
            torch.testing.assert_close(after[:, :j], before[:, :j], atol=1e-6, rtol=0)
            assert not torch.allclose(after[:, j], before[:, j])


def test_padding_changes_no_real_logit_and_is_not_computed():
    model = small_lm()
    ids = random_ids(2, 10)
    padded = ids.clone()
    padded[1, 6:] = 0  # row 1 is 6 tokens long; pad_id 0
    with torch.no_grad():
        full, short = model(padded), model(ids[1:, :6])
    torch.testing.assert_close(full[1, :6], short[0], atol=1e-6, rtol=0)
    assert (full[1, 6:] == 0).all()
    explicit = torch.ones_like(ids, dtype=torch.bool)
    explicit[1, 6:] = False
    torch.testing.assert_close(model(padded, explicit), full)


def test_embeddings_are_tied_and_stay_tied():
    model = small_lm().train()
    assert model.out.weight is model.embed.weight
    assert sum(p is model.embed.weight for p in model.parameters()) == 1  # listed once: one Parameter
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.loss(random_ids(2, 8)).backward()
    opt.step()
    assert model.out.weight is model.embed.weight
    assert model.state_dict()["out.weight"].data_ptr() == model.state_dict()["embed.weight"].data_ptr()


def test_loss_is_cross_entropy_on_shifted_targets():
    model = small_lm()
    ids = random_ids(3, 9)
    ids[2, 5:] = 0  # padding
    logits = model(ids[:, :-1])  # (B, T - 1, V); the padded row's inputs carry their own padding
    targets = ids[:, 1:].masked_fill(ids[:, 1:] == 0, -100)
    expected = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)
    torch.testing.assert_close(model.loss(ids), expected)
    total = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="sum")
    torch.testing.assert_close(model.loss(ids, reduction="sum"), total)


def test_loss_mask_counts_only_the_masked_targets():
    sep = 3
    model = small_lm()
    ids = random_ids(2, 10)
    ids[ids == sep] = 4  # one separator per row, placed below
    ids[0, 4], ids[1, 6] = sep, sep  # "source <sep> target"
    loss_mask = mask_after(ids, sep)
    assert loss_mask[0].tolist() == [False] * 5 + [True] * 5 and loss_mask[1].tolist() == [False] * 7 + [True] * 3
    logits = model(ids[:, :-1])
    picked = [(b, t) for b in range(2) for t in range(9) if loss_mask[b, t + 1]]  # target position t + 1
    by_hand = torch.stack([F.cross_entropy(logits[b, t], ids[b, t + 1]) for b, t in picked]).mean()
    torch.testing.assert_close(model.loss(ids, loss_mask=loss_mask), by_hand)
    assert int(shift_targets(ids, ids != 0, loss_mask)[3].sum()) == len(picked) == 8


@pytest.mark.parametrize("norm_first", [True, False])
def test_the_cache_gives_the_logits_of_the_whole_prefix(norm_first):
    model = small_lm(norm_first)
    ids = random_ids(2, 14)
    with torch.no_grad():
        full = model(ids)
        cache = model.start_cache()
        chunks = [model.step(cache, ids[:, a:b]) for a, b in ((0, 5), (5, 6), (6, 7), (7, 14))]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == 14 and cache.k[0] is not None and cache.k[0].shape == (2, H, 14, D // H)


@pytest.mark.parametrize("options", [dict(greedy=True), dict(temperature=0.8, top_k=10, top_p=0.9)])
def test_cached_and_recomputed_generation_agree(options):
    model = small_lm()
    prompt = random_ids(2, 4)
    runs = [
        generate(
            model, prompt, 12, generator=torch.Generator().manual_seed(5), use_cache=c, return_logits=True, **options
        )
        for c in (True, False)
    ]
    (ids_c, logits_c), (ids_r, logits_r) = runs
    assert ids_c.shape == (2, 16) and logits_c.shape == (2, 12, V)
    assert torch.equal(ids_c, ids_r) and torch.equal(ids_c[:, :4], prompt)
    torch.testing.assert_close(logits_c, logits_r, atol=1e-5, rtol=0)
    with torch.no_grad():  # and the logits are the model's own on the generated sequence
        torch.testing.assert_close(
            logits_c, model(ids_c, torch.ones_like(ids_c, dtype=torch.bool))[:, 3:-1], atol=1e-5, rtol=0
        )


def test_generation_leaves_the_mode_and_fits_max_len():
    model = small_lm().train()
    generate(model, random_ids(1, 4), 3, greedy=True)
    assert model.training
    generate(model, random_ids(1, 4), MAX_LEN - 3, greedy=True)  # the last token is never fed: it fits
    with pytest.raises(ValueError, match="max_len"):
        generate(model, random_ids(1, 4), MAX_LEN - 2, greedy=True)


def test_clear_errors():
    model = small_lm()
    with pytest.raises(TypeError, match="int64"):
        model(torch.rand(2, 3))
    with pytest.raises(ValueError, match="vocabulary"):
        model(torch.full((1, 3), V))
    with pytest.raises(ValueError, match="max_len"):
        model(random_ids(1, MAX_LEN + 1))
    with pytest.raises(ValueError, match="padding must come at the end"):
        model(torch.tensor([[5, 0, 6]]))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        model.loss(random_ids(2, 1))
    with pytest.raises(ValueError, match="no target counts"):
        model.loss(random_ids(2, 5), loss_mask=torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="loss_mask"):
        model.loss(random_ids(2, 5), loss_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="divisible"):
        TransformerLM(V, 10, 4, 1, 8, 8)
    with pytest.raises(ValueError, match="pad_id"):
        TransformerLM(V, D, H, 1, 8, 8, pad_id=V)
    cache = model.start_cache()
    model.step(cache, random_ids(1, MAX_LEN))
    with pytest.raises(ValueError, match="max_len"):
        model.step(cache, random_ids(1, 1))
