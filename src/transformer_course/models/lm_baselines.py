"""Baselines for chapter 10's Transformer language model, measured the same way: a count-based bigram model and
the recurrent network of chapters 2 and 3 (a GRU) as a language model, and the perplexity of any of them.

All three have the interface of ``language_model.TransformerLM``: forward(ids (B, T), mask) -> logits (B, T, V)
and loss(ids, mask, loss_mask, reduction), the cross-entropy of ids[:, 1:] given ids[:, :-1]. ``perplexity``
is exp of the mean negative log-likelihood per predicted token; on different tokenizers the tokens differ, so
``perplexity_per_word`` divides the same total by a count of words instead, which the vocabularies share.

Shapes: B batch, T length, V vocabulary, d = d_model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .._checks import positive_int
from .lm_loss import lm_mask, next_token_loss, shift_targets

__all__ = ["BigramLM", "RNNLM", "RNNState", "negative_log_likelihood", "perplexity", "perplexity_per_word"]

_NO_LIMIT = 1 << 62  # the bigram and recurrent models have no max_len


class BigramLM(nn.Module):
    """P(b | a) = (c(a, b) + k) / (c(a) + k V): bigram counts c(a, b) of a training corpus, add-k smoothed.

    ``fit(sequences)`` counts every transition s[t] -> s[t + 1] of each sequence (lists or 1-D tensors of ids),
    the pairs the Transformer's loss predicts; ``k`` (> 0) can be changed after fitting, to tune it on validation.
    forward(ids (B, T), mask) -> log P(. | ids[:, t]) (B, T, V): log-probabilities, so cross-entropy on them is
    exactly the negative log-likelihood and ``perplexity`` treats this model like the others.
    """

    counts: Tensor  # (V, V) float64 buffer: c(a, b), the transitions a -> b counted by fit

    def __init__(self, vocab_size: int, k: float = 1.0, *, pad_id: int | None = 0) -> None:
        super().__init__()
        self.vocab_size, self.pad_id, self.k = positive_int("vocab_size", vocab_size), pad_id, k
        self.register_buffer("counts", torch.zeros(vocab_size, vocab_size, dtype=torch.float64))  # (V, V): c(a, b)

    def fit(self, sequences: Iterable[Sequence[int] | Tensor]) -> BigramLM:
        seqs = [torch.as_tensor(s, dtype=torch.long).flatten() for s in sequences]
        a = torch.cat([s[:-1] for s in seqs] + [torch.zeros(0, dtype=torch.long)])  # (N,): every transition's
        b = torch.cat([s[1:] for s in seqs] + [torch.zeros(0, dtype=torch.long)])  # first and second token
        if a.numel() and (int(torch.minimum(a, b).min()) < 0 or int(torch.maximum(a, b).max()) >= self.vocab_size):
            raise ValueError(f"token ids must be in 0 .. {self.vocab_size - 1}")
        self.counts.zero_()
        self.counts.index_put_((a, b), torch.ones(a.numel(), dtype=torch.float64), accumulate=True)
        return self

    def log_table(self) -> Tensor:
        """(V, V) float64, row a: log P(b | a) for every b."""
        if not (isinstance(self.k, (int, float)) and self.k > 0):
            raise ValueError(f"k must be positive (add-k smoothing), got {self.k!r}")
        smoothed = self.counts + self.k
        return (smoothed / smoothed.sum(dim=1, keepdim=True)).log()

    def _mask(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        return lm_mask(ids, mask, self.pad_id, self.vocab_size, _NO_LIMIT)

    def forward(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        self._mask(ids, mask)
        return self.log_table()[ids]  # (B, T, V)

    def loss(
        self, ids: Tensor, mask: Tensor | None = None, loss_mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        return next_token_loss(self, ids, self._mask(ids, mask), loss_mask, reduction)

    def log_prob(self, sequences: Iterable[Sequence[int] | Tensor]) -> float:
        """The total natural-log probability of every transition of the sequences (their first tokens are given)."""
        table = self.log_table()
        seqs = (torch.as_tensor(s, dtype=torch.long).flatten() for s in sequences)
        return sum(float(table[s[:-1], s[1:]].sum()) for s in seqs)

    def perplexity(self, sequences: Iterable[Sequence[int] | Tensor], n_words: int | None = None) -> float:
        """exp(-log_prob / n): per predicted token (n = the transitions), or per word given ``n_words``."""
        sequences = [list(s) for s in sequences]
        n = sum(max(len(s) - 1, 0) for s in sequences) if n_words is None else positive_int("n_words", n_words)
        return math.exp(-self.log_prob(sequences) / n)


@dataclass
class RNNState:
    """What ``RNNLM.step`` carries between calls: the GRU's state (layers, R, d), None before the first."""

    h: Tensor | None = None
    length: int = 0


class RNNLM(nn.Module):
    """The course's recurrent network as a language model: embedding (d_embed), a GRU (``nn.GRU``, whose recurrence
    ``gru.gru_cell`` writes out, as in chapters 3 and 4) of d_hidden units, dropout, and an output layer tied to
    the embedding; when d_hidden != d_embed a linear map (no bias) takes the states to d_embed first.

    forward(ids (B, T), mask) -> logits (B, T, V); state t has read ids[:, :t + 1]. Right padding changes no
    earlier logit (the GRU reads left to right), so padding is left for the loss to ignore.
    """

    def __init__(
        self,
        vocab_size: int,
        d_embed: int,
        d_hidden: int,
        n_layers: int = 1,
        dropout: float = 0.0,
        *,
        pad_id: int | None = 0,
    ) -> None:
        super().__init__()
        self.vocab_size, self.pad_id = positive_int("vocab_size", vocab_size), pad_id
        self.config: dict[str, Any] = dict(
            vocab_size=vocab_size, d_embed=d_embed, d_hidden=d_hidden, n_layers=n_layers, dropout=dropout, pad_id=pad_id
        )
        self.embed = nn.Embedding(vocab_size, positive_int("d_embed", d_embed), padding_idx=pad_id)
        layers = positive_int("n_layers", n_layers)
        self.rnn = nn.GRU(
            d_embed,
            positive_int("d_hidden", d_hidden),
            layers,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_hidden, d_embed, bias=False) if d_hidden != d_embed else nn.Identity()  # (.., d_embed)
        self.out = nn.Linear(d_embed, vocab_size)
        nn.init.normal_(self.embed.weight, std=d_embed**-0.5)
        nn.init.zeros_(self.out.bias)
        self.out.weight = self.embed.weight  # tied, as the Transformer's

    def _logits(self, ids: Tensor, h: Tensor | None) -> tuple[Tensor, Tensor]:
        states, h = self.rnn(self.dropout(self.embed(ids)), h)  # (B, T, d_hidden), (layers, B, d_hidden)
        return self.out(self.proj(self.dropout(states))), h

    def _mask(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        return lm_mask(ids, mask, self.pad_id, self.vocab_size, _NO_LIMIT)

    def forward(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        self._mask(ids, mask)
        return self._logits(ids, None)[0]

    def loss(
        self, ids: Tensor, mask: Tensor | None = None, loss_mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        """Next-token cross-entropy, exactly as ``TransformerLM.loss``."""
        return next_token_loss(self, ids, self._mask(ids, mask), loss_mask, reduction)

    def last_logits(self, ids: Tensor) -> Tensor:
        """ids (B, T) -> the next-token logits (B, V), reading the whole prefix again."""
        return self(ids, torch.ones_like(ids, dtype=torch.bool))[:, -1]  # every token real, even pad_id

    def start_cache(self) -> RNNState:
        return RNNState()

    def step(self, cache: RNNState, ids: Tensor) -> Tensor:
        """Feed ids (R, n) after what the state has read -> logits (R, n, V); the state moves on."""
        lm_mask(ids, None, None, self.vocab_size, _NO_LIMIT)
        logits, cache.h = self._logits(ids, cache.h)
        cache.length += ids.shape[1]
        return logits


def _batch(batch: Tensor | Sequence[Tensor | None]) -> tuple[Tensor, Tensor | None, Tensor | None]:
    if isinstance(batch, Tensor):
        return batch, None, None
    parts = tuple(batch) + (None,) * (3 - len(batch))
    if len(parts) != 3 or not isinstance(parts[0], Tensor):
        raise TypeError("a batch must be ids (B, T), or a tuple (ids, mask) or (ids, mask, loss_mask)")
    return parts  # type: ignore[return-value]  # checked above: ids is a tensor


@torch.no_grad()
def negative_log_likelihood(model: Any, batches: Iterable[Tensor | Sequence[Tensor | None]]) -> tuple[float, int]:
    """The total negative log-likelihood (nats) of every counted target of the batches, and how many there were.
    A batch is ids (B, T), or (ids, mask) or (ids, mask, loss_mask), as ``model.loss`` takes them; eval mode."""
    was_training, total, count = model.training, 0.0, 0
    model.eval()
    try:
        for batch in batches:
            ids, mask, loss_mask = _batch(batch)
            mask = lm_mask(ids, mask, model.pad_id, model.vocab_size, getattr(model, "max_len", _NO_LIMIT))
            total += float(model.loss(ids, mask, loss_mask, reduction="sum"))
            count += int(shift_targets(ids, mask, loss_mask)[3].sum())
    finally:
        model.train(was_training)
    return total, count


def perplexity(model: Any, batches: Iterable[Tensor | Sequence[Tensor | None]]) -> float:
    """exp(mean negative log-likelihood per predicted token), over every counted target of the batches."""
    total, count = negative_log_likelihood(model, batches)
    return math.exp(total / count)


def perplexity_per_word(model: Any, batches: Iterable[Tensor | Sequence[Tensor | None]], n_words: int) -> float:
    """exp(total negative log-likelihood / n_words): comparable across tokenizers, which split the same words
    into different numbers of tokens. Count the words of the text the batches hold (with one more per sentence
    for its end, if the end-of-sentence token is predicted)."""
    return math.exp(negative_log_likelihood(model, batches)[0] / positive_int("n_words", n_words))
