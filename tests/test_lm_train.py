"""Chapter 10's data and trainer: batches of token sequences with the positions the loss counts, perplexities
from summed log-likelihoods, translation read back from a language model, and the trainer's settings."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.data import train_bpe
from transformer_course.data.lm_data import LMData, Sequences, lm_batches
from transformer_course.models.language_model import TransformerLM, next_token_loss
from transformer_course.training.lm_configs import LANGUAGE_MODELS, TransformerLMConfig, recorded
from transformer_course.training.lm_tasks import MaskedTokenTask, NextTokenTask
from transformer_course.training.lm_train import (
    LM_CONFIGS,
    _parse,
    _perplexities,
    configuration,
    evaluate_lm,
    translate_as_lm,
)


def _sequences(n: int = 40, seed: int = 0) -> Sequences:
    g = torch.Generator().manual_seed(seed)
    ids, starts = [], []
    for _ in range(n):
        length = int(torch.randint(3, 12, (1,), generator=g))
        ids.append([1, *torch.randint(4, 30, (length - 2,), generator=g).tolist(), 2])
        starts.append(int(torch.randint(1, length, (1,), generator=g)))
    return Sequences(ids, starts)


def test_batches_hold_every_sequence_once_within_the_token_budget():
    seqs = _sequences()
    batches = lm_batches(seqs, max_tokens=40, pad_id=0, seed=3)
    rows = sorted(tuple(r[r != 0].tolist()) for b in batches for r in b.ids)
    assert rows == sorted(tuple(s) for s in seqs.ids)
    assert all(b.ids.numel() <= 40 for b in batches)
    # another seed gives another order of the same batches' contents
    again = lm_batches(seqs, max_tokens=40, pad_id=0, seed=4)
    assert [b.ids.tolist() for b in again] != [b.ids.tolist() for b in batches]


def test_the_loss_mask_counts_from_each_sequence_s_start_and_never_padding():
    seqs = _sequences()
    counted = 0
    for b in lm_batches(seqs, max_tokens=60, pad_id=0, shuffle=False):
        assert not bool(b.loss_mask[:, 0].any())  # position 0 is never predicted
        assert not bool((b.loss_mask & (b.ids == 0)).any())
        counted += int(b.loss_mask.sum())
    assert counted == seqs.predicted() == sum(len(s) - k for s, k in zip(seqs.ids, seqs.loss_from))


def test_a_sequence_longer_than_the_budget_is_refused():
    with pytest.raises(ValueError, match="more than max_tokens"):
        lm_batches(Sequences([[1] * 20], [1]), max_tokens=10, pad_id=0)


def test_evaluation_sums_the_same_loss_as_the_model_and_perplexity_is_its_exponential():
    torch.manual_seed(0)
    model = TransformerLM(30, 16, 2, 1, 32, max_len=16).eval()
    batches = lm_batches(_sequences(), max_tokens=60, pad_id=0, shuffle=False)
    nll, tokens = evaluate_lm(model, batches)
    by_hand = sum(next_token_loss(model, b.ids, b.ids != 0, b.loss_mask, reduction="sum").item() for b in batches)
    assert tokens == _sequences().predicted() and math.isclose(nll, by_hand, rel_tol=1e-6)
    p = _perplexities(nll, tokens, words=tokens // 2)
    assert math.isclose(p["perplexity"], math.exp(nll / tokens)) and p["perplexity_per_word"] > p["perplexity"]


def test_translation_is_read_after_bos_until_eos():
    tokenizer = train_bpe(["the cat sleeps", "el gato duerme", "a dog", "un perro"] * 5, vocab_size=300)
    torch.manual_seed(0)
    model = TransformerLM(len(tokenizer), 16, 2, 1, 32, max_len=40).eval()
    with torch.no_grad():  # a model that always writes <eos>: every translation is empty
        model.out.bias.fill_(-1e4)
        model.out.bias[tokenizer.eos_id] = 1e4
    empty = Sequences([], [])
    data = LMData(tokenizer, empty, empty, empty, 0, 0, ["the cat", "a dog sleeps", "a"], [["x"], ["y"], ["z"]])
    assert translate_as_lm(model, data) == ["", "", ""]


def test_settings_overrides_keep_their_types_and_refuse_unknown_keys():
    args = _parse(["--config", "lm-transformer-cpu", "--set", "peak_lr=0.001", "n_layers=2", "dropout=0"])
    config = configuration(args)
    assert isinstance(config, TransformerLMConfig) and config.steps == 1900  # the default budget
    assert config.peak_lr == 0.001 and config.n_layers == 2 and isinstance(config.n_layers, int)
    assert config.dropout == 0.0 and isinstance(config.dropout, float)  # JSON's 0, read as the float the key takes
    assert LANGUAGE_MODELS["lm-transformer-cpu"].n_layers == 4  # the configuration itself is untouched
    assert LM_CONFIGS["lm-transformer-cpu"] == recorded(LANGUAGE_MODELS["lm-transformer-cpu"])
    assert configuration(_parse(["--config", "lm-rnn-cpu", "--steps", "7"])).steps == 7
    with pytest.raises(SystemExit, match=r"--set colour: not a key of the transformer language model .*d_model"):
        configuration(_parse(["--config", "lm-transformer-cpu", "--set", "colour=1"]))
    with pytest.raises(SystemExit, match="n_layers of a transformer language model configuration must be int"):
        configuration(_parse(["--config", "lm-transformer-cpu", "--set", "n_layers=2.5"]))
    with pytest.raises(SystemExit, match="model of a RNNLMConfig is 'rnn'"):
        configuration(_parse(["--config", "lm-rnn-cpu", "--set", 'model="transformer"']))


@pytest.mark.parametrize("masked", [False, True])
def test_the_language_model_tasks_go_on_exactly_from_their_state(masked):
    seqs = _sequences(60)

    def task():
        return MaskedTokenTask(seqs, 30, 0, seed=2, rate=0.3) if masked else NextTokenTask(seqs, 30, 0, seed=2)

    straight = task()
    batches = [straight.next_batch()[0].ids for _ in range(50)]
    assert straight.batches.epoch >= 2  # more than one pass, each in its own order
    first = task()
    for _ in range(13):
        first.next_batch()
    resumed = task()
    resumed.load_state(first.state())
    assert all(torch.equal(resumed.next_batch()[0].ids, ids) for ids in batches[13:])
    if masked:  # the generator of the training masks goes on too
        first.masks.manual_seed(5)
        resumed.load_state(first.state())
        assert torch.equal(resumed.masks.get_state(), first.masks.get_state())
