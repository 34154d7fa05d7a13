"""The masked language model (masked_lm.py): BERT's corruption recipe, a bidirectional encoder that agrees with
PyTorch's own, the loss at the chosen positions, filling in a blank, and the command line's record of a run (mlm_train.py)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_course.data import train_bpe
from transformer_course.data.lm_data import LMData, Sequences
from transformer_course.models.language_model import TransformerLM
from transformer_course.models.masked_lm import (
    BLANK,
    MaskedLM,
    fill_blank,
    mask_tokens,
    masked_loss,
    masked_token_loss,
)
from transformer_course.training.mlm_train import main

V, D, H, LAYERS, D_FF, MAX_LEN = 37, 16, 4, 2, 24, 64
PAD, BOS, EOS, UNK = 0, 1, 2, 3


def small_mlm(norm_first: bool = True, seed: int = 0, **kwargs) -> MaskedLM:
    torch.manual_seed(seed)
    return MaskedLM(V, D, H, LAYERS, D_FF, MAX_LEN, norm_first=norm_first, **kwargs).eval()


def sentences(batch: int, low: int, high: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded rows <bos> tokens <eos> <pad>..., with low .. high - 1 ordinary tokens each: ids, mask (B, T)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high, (batch,), generator=g)
    ids = torch.zeros(batch, high + 1, dtype=torch.long)
    for row, n in enumerate(lengths.tolist()):
        ids[row, : n + 2] = torch.tensor([BOS, *torch.randint(4, V, (n,), generator=g).tolist(), EOS])
    return ids, ids != PAD


# BERT's corruption -----------------------------------------------------------------------------------------------


def test_mask_tokens_follows_bert_s_rates_on_a_big_batch():
    ids, mask = sentences(500, 30, 50)
    corrupted, targets = mask_tokens(ids, mask, 0.15, V, V, torch.Generator().manual_seed(0))
    candidates = mask & (ids > UNK)
    n = int(targets.sum())
    assert abs(n / int(candidates.sum()) - 0.15) < 0.01  # about 19 000 candidates: a standard error of 0.0026
    shown = corrupted[targets]
    truth = ids[targets]
    assert abs(float((shown == V).sum()) / n - 0.8) < 0.02
    assert abs(float(((shown != V) & (shown != truth)).sum()) / n - 0.1 * (1 - 1 / (V - 4))) < 0.015
    assert abs(float((shown == truth).sum()) / n - 0.1 * (1 + 1 / (V - 4))) < 0.015
    assert torch.equal(corrupted[~targets], ids[~targets])  # nothing else changes
    random_tokens = shown[shown != V]
    assert bool(((random_tokens > UNK) & (random_tokens < V)).all())  # replacements are ordinary tokens


def test_mask_tokens_never_chooses_padding_or_specials_and_gives_every_row_a_target():
    ids, mask = sentences(300, 1, 4)  # short rows: many draw nothing at 15 % and need their forced target
    ids[0, 2] = UNK  # an <unk> is never chosen either
    for seed in range(5):
        corrupted, targets = mask_tokens(ids, mask, 0.15, V, V, torch.Generator().manual_seed(seed))
        assert not bool((targets & ~mask).any())
        assert not bool((targets & (ids <= UNK)).any())  # never <pad>, <bos>, <eos>, <unk>
        assert bool(targets.any(dim=1).all())
        assert torch.equal(corrupted[~mask], ids[~mask])


def test_mask_tokens_is_reproducible_with_a_seeded_generator():
    ids, mask = sentences(20, 3, 12)
    a = mask_tokens(ids, mask, 0.15, V, V, torch.Generator().manual_seed(7))
    b = mask_tokens(ids, mask, 0.15, V, V, torch.Generator().manual_seed(7))
    c = mask_tokens(ids, mask, 0.15, V, V, torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


@pytest.mark.parametrize("rate", [0, 0.0, 1, 1.0, -0.1, 1.5, True, "0.15"])
def test_a_rate_outside_0_1_is_a_clear_error(rate):
    ids, mask = sentences(2, 3, 5)
    with pytest.raises(ValueError, match="rate must be a number strictly between 0 and 1"):
        mask_tokens(ids, mask, rate, V, V)


def test_a_row_without_real_tokens_is_a_clear_error():
    ids = torch.tensor([[BOS, 5, 6, EOS], [BOS, EOS, PAD, PAD]])
    with pytest.raises(ValueError, match="row 1 of ids has no real token to mask"):
        mask_tokens(ids, ids != PAD, 0.15, V, V)
    with pytest.raises(TypeError, match="pad_mask must be a boolean tensor"):
        mask_tokens(ids, (ids != PAD).long(), 0.15, V, V)
    model = small_mlm()
    with pytest.raises(ValueError, match="no target position"):
        masked_token_loss(model, ids, ids != PAD, torch.zeros_like(ids, dtype=torch.bool), ids)


# The model -------------------------------------------------------------------------------------------------------


def torch_encoder(model: MaskedLM) -> nn.TransformerEncoder:
    """nn.TransformerEncoder holding the model's encoder weights: self_attn.w_qkv is in_proj, w_o out_proj,
    ff.linear1/2 linear1/2, self_attn_norm norm1, ff_norm norm2, and the final LayerNorm (pre-norm only)."""
    norm_first = model.config["norm_first"]
    layer = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    theirs = nn.TransformerEncoder(
        layer, LAYERS, norm=nn.LayerNorm(D) if norm_first else None, enable_nested_tensor=False
    ).double()
    names = {
        "self_attn.w_qkv.": "self_attn.in_proj_",
        "self_attn.w_o.": "self_attn.out_proj.",
        "ff.linear1.": "linear1.",
        "ff.linear2.": "linear2.",
        "self_attn_norm.": "norm1.",
        "ff_norm.": "norm2.",
    }
    state = {}
    for name, value in model.encoder.state_dict().items():
        for ours, their in names.items():
            name = name.replace(ours, their)
        state[name] = value
    theirs.load_state_dict(state)  # strict: every parameter of theirs is one of ours, and back
    return theirs.eval()


@pytest.mark.parametrize("norm_first", [True, False])
def test_agrees_with_torch_s_transformer_encoder_with_padding(norm_first):
    model = small_mlm(norm_first).double()
    with torch.no_grad():
        model.out_bias.normal_()
    ids, mask = sentences(4, 3, 10, seed=3)
    ids[0, 3] = model.mask_id  # [MASK] is an input like any other
    with torch.no_grad():
        ours = model(ids)
        x = model.embed(ids) * math.sqrt(D) + model.positional.pe[: ids.shape[1]]
        states = torch_encoder(model)(x, src_key_padding_mask=~mask)  # True = padding, for PyTorch
        theirs = F.linear(states, model.embed.weight[:V], model.out_bias)
    assert ours.shape == (4, ids.shape[1], V) and ours.dtype == torch.float64
    torch.testing.assert_close(ours[mask], theirs[mask], atol=1e-10, rtol=0)
    assert bool((ours[~mask] == 0).all())  # padding is not computed
    at = model.logits_at(ids, mask, ids == model.mask_id)
    torch.testing.assert_close(at, ours[ids == model.mask_id], atol=1e-12, rtol=0)


def test_it_attends_both_ways_and_the_decoder_only_model_does_not():
    ids, _ = sentences(2, 8, 9, seed=4)
    later = ids.clone()
    later[:, 6] = 4 + (later[:, 6] - 4 + 1) % (V - 4)  # another ordinary token at position 6
    torch.manual_seed(0)
    lm = TransformerLM(V, D, H, LAYERS, D_FF, MAX_LEN).eval()
    with torch.no_grad():
        mlm = small_mlm()
        assert not torch.allclose(mlm(ids)[:, :6], mlm(later)[:, :6])  # earlier positions read the later token
        torch.testing.assert_close(lm(ids)[:, :6], lm(later)[:, :6], atol=0, rtol=0)  # causal: they cannot


def test_the_output_is_tied_and_mask_is_read_but_never_predicted():
    model = small_mlm()
    assert model.mask_id == V and model.embed.weight.shape == (V + 1, D)
    assert model(torch.tensor([[BOS, V, EOS]])).shape == (1, 3, V)
    names = [n for n, _ in model.named_parameters()]
    assert "out_bias" in names and not any("out.weight" in n for n in names)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(torch.tensor([[BOS, V + 1, EOS]]))


def test_a_few_steps_lower_the_loss_on_a_tiny_batch():
    model = small_mlm().train()
    ids, mask = sentences(8, 5, 9, seed=5)
    corrupted, targets = mask_tokens(ids, mask, 0.3, model.mask_id, V, torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = masked_token_loss(model, corrupted, mask, targets, ids).item()
    generator = torch.Generator().manual_seed(1)
    for _ in range(60):
        loss = masked_loss(model, ids, mask, generator, 0.3)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = masked_token_loss(model, corrupted, mask, targets, ids).item()
    assert after < 0.7 * before


# Filling in a blank and the command line -------------------------------------------------------------------------

WORDS = "the cat dog bird sleeps eats runs sings on in under a red big small mat tree house garden".split()


def tiny_data() -> LMData:
    """A made-up corpus of short English-like sentences and a BPE of its own: the trainer runs in seconds."""
    import random

    rng = random.Random(0)
    texts = [
        f"The {rng.choice(WORDS[1:4])} {rng.choice(WORDS[4:8])} {rng.choice(WORDS[8:11])} the "
        f"{rng.choice(WORDS[12:15])} {rng.choice(WORDS[15:])}."
        for _ in range(300)
    ]
    tokenizer = train_bpe(texts, vocab_size=320)

    def seqs(part: list[str]) -> Sequences:
        return Sequences([[BOS, *tokenizer.encode(t), EOS] for t in part], [1] * len(part))

    train, valid = seqs(texts[:250]), seqs(texts[250:])
    return LMData(tokenizer, train, valid, valid, 0, 0)


def test_fill_blank_ranks_single_tokens():
    data = tiny_data()
    torch.manual_seed(0)
    model = MaskedLM(len(data.tokenizer), D, H, 1, D_FF, MAX_LEN)
    top = fill_blank(model, data.tokenizer, f"The cat {BLANK} on the big tree.", k=5)
    assert len(top) == 5 and [p for _, p in top] == sorted((p for _, p in top), reverse=True)
    assert sum(p for _, p in top) <= 1 + 1e-6 and all(isinstance(t, str) and t for t, _ in top)
    # whole words only (the default): after a space the pieces " word", at the start the pieces without a space
    assert all(t.startswith(" ") for t, _ in fill_blank(model, data.tokenizer, f"The cat {BLANK} on it.", k=20))
    assert not any(t.startswith(" ") for t, _ in fill_blank(model, data.tokenizer, f"{BLANK} cat sleeps.", k=20))
    every = fill_blank(model, data.tokenizer, f"The cat {BLANK} on it.", k=len(data.tokenizer), whole_word=False)
    assert len(every) == len(data.tokenizer) - 4 and math.isclose(sum(p for _, p in every), 1, rel_tol=1e-5)
    for bad in ("no blank here", f"{BLANK} and {BLANK}"):
        with pytest.raises(ValueError, match="exactly one blank"):
            fill_blank(model, data.tokenizer, bad)


def test_the_command_line_writes_its_run(tmp_path, capsys):
    out = tmp_path / "run.json"
    tiny = ["d_model=16", "n_heads=2", "n_layers=1", "d_ff=32", "max_tokens=200", "warmup=5", "examples=3"]
    argv = ["--steps", "12", "--eval-every-steps", "6", "--seed", "0", "--threads", "1", "--out", str(out)]
    assert main([*argv, "--set", *tiny], data=tiny_data()) == 0
    run = json.loads(out.read_text())
    assert run["command"] == "python -m transformer_course.mlm_train " + " ".join([*argv, "--set", *tiny])
    assert run["settings"]["d_model"] == 16 and run["steps"] == 12 and run["threads"] == 1
    for key in ("device_name", "cpu_count", "torch", "parameters", "train_seconds", "wall_seconds"):
        assert key in run
    assert [p["step"] for p in run["curve"]] == [6, 12]
    assert {"accuracy", "nll", "accuracy_on_mask", "targets"} <= set(run["valid"])
    assert 0 <= run["valid"]["accuracy"] <= 1 and run["valid"]["nll"] > 0
    assert {"most_frequent_accuracy", "unigram_nll", "most_frequent_token_text"} <= set(run["baselines"])
    assert len(run["examples"]) == 3
    for example in run["examples"]:
        assert example["sentence"].count(BLANK) == 1 and example["answer"].isalpha()
        assert example["answer_rank"] >= 1 and 0 < example["answer_probability"] <= 1
        assert example["correct"] == (example["answer_rank"] == 1)
        assert len(example["top3"]) == 3 and all(0 <= t["probability"] <= 1 for t in example["top3"])
    # the validation positions are fixed: the same command gives the same figures
    again = tmp_path / "again.json"
    main([*argv[:-1], str(again), "--set", *tiny], data=tiny_data())
    assert json.loads(again.read_text())["valid"] == run["valid"]


def test_the_stored_run_s_command_still_parses_to_its_settings():
    from importlib.resources import files

    from transformer_course.training.lm_configs import recorded
    from transformer_course.training.mlm_train import _parse, configuration

    run = json.loads(files("transformer_course.runs").joinpath("mlm-transformer-cpu-seed0.json").read_text())
    args = _parse(run["command"].split()[3:])
    assert recorded(configuration(args)) == run["settings"] and args.steps == run["steps"]  # no drift since
