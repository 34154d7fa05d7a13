"""The language-model baselines (lm_baselines.py): the add-k bigram model on a hand-worked corpus, the GRU
language model's loss and generation, and perplexity measured the same way for every model."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_course.decoding.sampling import generate
from transformer_course.models.language_model import TransformerLM
from transformer_course.models.lm_baselines import (
    RNNLM,
    BigramLM,
    negative_log_likelihood,
    perplexity,
    perplexity_per_word,
)

# Vocabulary 0 <pad>, 1 <bos>, 2 "a", 3 "b"; transitions 1->2, 2->3, 1->3.
CORPUS = [[1, 2, 3], [1, 3]]


def test_bigram_add_k_on_a_hand_worked_corpus():
    model = BigramLM(4, k=1.0).fit(CORPUS)
    assert model.counts[1, 2] == 1 and model.counts[2, 3] == 1 and model.counts[1, 3] == 1 and model.counts.sum() == 3
    # P(2|1) = (1 + 1) / (2 + 4) = 1/3, P(3|2) = (1 + 1) / (1 + 4) = 2/5, P(3|1) = 1/3; P(0|0) = 1/4 (unseen row)
    table = model.log_table().exp()
    assert table[1, 2] == pytest.approx(1 / 3) and table[2, 3] == pytest.approx(2 / 5) and table[0, 0] == 0.25
    assert model.log_prob(CORPUS) == pytest.approx(math.log(1 / 3 * 2 / 5 * 1 / 3))
    assert model.perplexity(CORPUS) == pytest.approx((45 / 2) ** (1 / 3))  # per token: 3 transitions
    assert model.perplexity(CORPUS, n_words=2) == pytest.approx((45 / 2) ** (1 / 2))  # per word
    model.k = 0.5  # tuned after fitting: P(2|1) = 1.5 / 4, P(3|2) = 1.5 / 3, P(3|1) = 1.5 / 4
    assert model.perplexity(CORPUS) == pytest.approx((1.5 / 4 * 1.5 / 3 * 1.5 / 4) ** (-1 / 3))


def test_the_bigram_model_is_measured_like_the_others():
    model = BigramLM(4, k=0.5).fit(CORPUS)
    ids = torch.tensor([[1, 2, 3], [1, 3, 0]])  # padded batch of the corpus
    assert negative_log_likelihood(model, [ids])[1] == 3
    assert perplexity(model, [ids]) == pytest.approx(model.perplexity(CORPUS))
    assert perplexity(model, [ids[:1], ids[1:, :2]]) == pytest.approx(model.perplexity(CORPUS))  # two batches
    assert perplexity_per_word(model, [ids], 2) == pytest.approx(model.perplexity(CORPUS, n_words=2))
    with pytest.raises(ValueError, match="k must be positive"):
        BigramLM(4, k=0).fit(CORPUS).log_table()
    with pytest.raises(ValueError, match="token ids"):
        BigramLM(3).fit([[1, 3]])


def test_rnn_lm_loss_is_cross_entropy_on_shifted_targets_and_ignores_padding():
    torch.manual_seed(0)
    model = RNNLM(11, 8, 12, n_layers=2).eval()
    ids = torch.randint(1, 11, (3, 7))
    ids[1, 4:] = 0
    logits = model(ids[:, :-1])
    targets = ids[:, 1:].masked_fill(ids[:, 1:] == 0, -100)
    torch.testing.assert_close(model.loss(ids), F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100))
    torch.testing.assert_close(model(ids)[1, :4], model(ids[1:2, :4])[0])  # right padding changes nothing before it
    assert model.out.weight is model.embed.weight


def test_rnn_lm_cached_and_recomputed_generation_agree():
    torch.manual_seed(1)
    model = RNNLM(11, 8, 8)
    prompt = torch.randint(1, 11, (2, 3))
    (a, la), (b, lb) = (
        generate(model, prompt, 6, top_k=5, generator=torch.Generator().manual_seed(2), use_cache=c, return_logits=True)
        for c in (True, False)
    )
    assert torch.equal(a, b)
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=0)


def test_perplexity_is_the_exponential_of_the_mean_loss():
    torch.manual_seed(2)
    model = TransformerLM(13, 8, 2, 1, 16, 10)
    ids = torch.randint(1, 13, (4, 9))
    with torch.no_grad():
        assert perplexity(model, [ids]) == pytest.approx(math.exp(float(model.loss(ids))), rel=1e-5)
    loss_mask = torch.zeros_like(ids, dtype=torch.bool)
    loss_mask[:, 5:] = True
    total, count = negative_log_likelihood(model, [(ids, None, loss_mask)])
    assert count == 16 and perplexity_per_word(model, [(ids, None, loss_mask)], 8) == pytest.approx(math.exp(total / 8))
    assert model.training  # given back in the mode it was in
