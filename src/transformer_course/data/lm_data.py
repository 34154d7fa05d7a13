"""The data of chapter 10's language models: Tatoeba sentences as token sequences, and batches of them.

Two tasks read the same split as the translation models (``data.tatoeba``: by distinct English sentence, so no
held-out sentence was seen in training), with the course's BPE of a given size (``data.translation.tokenizer_file``:
learned on the English and Spanish training sentences):

- ``language_model_data``: the distinct English sentences, each ``<bos> pieces <eos>``; every position after
  ``<bos>`` is predicted, ``<eos>`` included, so a sentence of n pieces counts n + 1 predictions.
- ``translation_lm_data``: translation as language modelling, ``English pieces <bos> Spanish pieces <eos>``, one
  sequence per training pair. ``<bos>`` separates the two languages, as it starts the target in chapter 8's
  decoder; the loss counts the Spanish pieces and ``<eos>`` only (``Sequences.loss_from``).

Shapes: B sequences per batch, T the longest sequence of the batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from .batching import pad_sequences
from .tatoeba import multi_reference, tatoeba_split
from .tokenize import BPETokenizer

__all__ = [
    "LMBatch",
    "LMData",
    "Sequences",
    "course_tokenizer",
    "language_model_data",
    "lm_batches",
    "translation_lm_data",
]

MAX_PIECES = 48  # training sentences longer than this (in BPE pieces) are left out, as for the translation models


@dataclass(frozen=True)
class Sequences:
    """Token sequences and, per sequence, the first position whose token the loss counts (1: all after <bos>)."""

    ids: list[list[int]]
    loss_from: list[int]

    def __len__(self) -> int:
        return len(self.ids)

    def predicted(self) -> int:
        """How many tokens the loss counts over all sequences."""
        return sum(len(s) - start for s, start in zip(self.ids, self.loss_from))


@dataclass(frozen=True)
class LMData:
    tokenizer: BPETokenizer
    train: Sequences
    valid: Sequences
    test: Sequences
    valid_words: int  # words (whitespace-separated) of the predicted text, for a per-word perplexity
    test_words: int
    # translation as language modelling only: the held-out English sentences with all their references
    test_sources: list[str] | None = None
    test_references: list[list[str]] | None = None


@dataclass
class LMBatch:
    """ids (B, T) int64, padded with <pad>; loss_mask (B, T) bool, True where the token is predicted (never at
    position 0, never at padding)."""

    ids: Tensor
    loss_mask: Tensor

    def to(self, device) -> LMBatch:
        return LMBatch(self.ids.to(device), self.loss_mask.to(device))


def lm_batches(seqs: Sequences, max_tokens: int, pad_id: int, shuffle: bool = True, seed: int = 0) -> list[LMBatch]:
    """Batches of sequences of similar length, each holding at most ``max_tokens`` positions counting padding
    (B * T <= max_tokens), in shuffled order (seeded) unless ``shuffle`` is False."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    rng = random.Random(seed)
    order = list(range(len(seqs)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: len(seqs.ids[i]))  # stable: equal lengths keep the shuffled order
    groups: list[list[int]] = []
    group: list[int] = []
    for i in order:
        n = len(seqs.ids[i])
        if n > max_tokens:
            raise ValueError(f"sequence {i} has {n} tokens, more than max_tokens={max_tokens}")
        if group and n * (len(group) + 1) > max_tokens:  # sorted: the newest is the longest of its group
            groups.append(group)
            group = []
        group.append(i)
    if group:
        groups.append(group)
    if shuffle:
        rng.shuffle(groups)
    batches = []
    for g in groups:
        ids, real = pad_sequences([seqs.ids[i] for i in g], pad_id)  # (B, T) each
        start = torch.tensor([seqs.loss_from[i] for i in g])  # (B,)
        loss_mask = real & (torch.arange(ids.shape[1]) >= start[:, None])
        batches.append(LMBatch(ids, loss_mask))
    return batches


def course_tokenizer(vocab_size: int) -> BPETokenizer:
    """The course's BPE of ``vocab_size`` tokens, learnt on the English and Spanish training sentences (chapters 3
    to 9 use 8,000), from the model cache when it was learnt before."""
    from .translation import course_bpe

    split = tatoeba_split()
    return course_bpe([en for en, _ in split.train] + [es for _, es in split.train], vocab_size)


def _distinct(sentences) -> list[str]:
    return list(dict.fromkeys(sentences))  # in order of first appearance


@lru_cache(maxsize=4)
def language_model_data(vocab_size: int = 8000) -> LMData:
    """The distinct English sentences of each part of the split, as <bos> pieces <eos>."""
    tokenizer = course_tokenizer(vocab_size)
    split = tatoeba_split()
    bos, eos = tokenizer.bos_id, tokenizer.eos_id

    def part(pairs, limit: int | None) -> tuple[Sequences, int]:
        texts = _distinct(en for en, _ in pairs)
        ids = [[bos, *p, eos] for p in tokenizer.encode_batch(texts)]
        kept = [i for i in range(len(ids)) if limit is None or len(ids[i]) - 2 <= limit]
        words = sum(len(texts[i].split()) + 1 for i in kept)  # + 1: the end of the sentence is predicted too
        return Sequences([ids[i] for i in kept], [1] * len(kept)), words

    train, _ = part(split.train, MAX_PIECES)
    valid, valid_words = part(split.valid, None)
    test, test_words = part(split.test, None)
    return LMData(tokenizer, train, valid, test, valid_words, test_words)


@lru_cache(maxsize=2)
def translation_lm_data(vocab_size: int = 8000) -> LMData:
    """Translation as language modelling: English pieces <bos> Spanish pieces <eos>, the loss on the Spanish part.

    Training: one sequence per pair. Validation and test: one sequence per distinct English sentence with its
    first translation (for the held-out likelihood); BLEU reads ``test_sources`` and all their references."""
    tokenizer = course_tokenizer(vocab_size)
    split = tatoeba_split()
    bos, eos = tokenizer.bos_id, tokenizer.eos_id

    def sequences(pairs, limit: int | None) -> tuple[Sequences, int]:
        src = tokenizer.encode_batch([en for en, _ in pairs])
        tgt = tokenizer.encode_batch([es for _, es in pairs])
        kept = [i for i in range(len(pairs)) if limit is None or max(len(src[i]), len(tgt[i])) <= limit]
        ids = [[*src[i], bos, *tgt[i], eos] for i in kept]
        words = sum(len(pairs[i][1].split()) + 1 for i in kept)
        return Sequences(ids, [len(src[i]) + 1 for i in kept]), words

    train, _ = sequences(split.train, MAX_PIECES)
    held_valid = [(en, refs[0]) for en, refs in multi_reference(split.valid)]
    test = multi_reference(split.test)
    valid, valid_words = sequences(held_valid, None)
    test_seqs, test_words = sequences([(en, refs[0]) for en, refs in test], None)
    return LMData(
        tokenizer,
        train,
        valid,
        test_seqs,
        valid_words,
        test_words,
        [en for en, _ in test],
        [refs for _, refs in test],
    )
