"""English-Spanish translation data (chapters 3, 4, 8 and 9): the course's Tatoeba split, the BPE shared by
both languages, learned once from the training half and kept in the cache folder, and token-count batches.

Two held-out sets, both disjoint by English sentence from the training pairs and from each other: a
validation set of 2,000 sentences, on which every choice is tuned (configurations, learning rates, beam
widths) and training curves are drawn, and the test set (every other held-out sentence of the test split),
decoded only to report a final figure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..repository import cache_dir
from .batching import Batch, token_batches
from .tatoeba import SPA_TSV_SHA256, multi_reference, tatoeba_split, validation_sentences
from .tokenize import BPETokenizer, train_bpe

__all__ = ["DEFAULT_VOCAB", "VOCAB_SIZE", "TranslationData", "course_bpe", "data_for", "load_data", "tokenizer_file"]

DEFAULT_VOCAB = 8000  # the shared BPE's size, when a configuration does not name one
VOCAB_SIZE = DEFAULT_VOCAB  # the shared BPE of every translation model (a configuration's "vocab" may name another)
MAX_TRAIN_TOKENS = 48  # training pairs longer than this (in BPE tokens, either side) are left out: 0.1% of them


@dataclass
class TranslationData:
    tokenizer: BPETokenizer
    train: list[Batch]
    test_sources: list[str]  # every distinct English test sentence, in order
    test_references: list[list[str]]  # all of its Spanish translations
    test_ids: list[list[int]]  # the test sentences in BPE ids
    valid_sources: list[str]  # the validation sentences, as the test ones: tune on these, never on the test set
    valid_references: list[list[str]]
    valid_ids: list[list[int]]
    fingerprint: str  # identifies the data, the split and the tokenizer for the model cache

    def held_out(self, part: str) -> tuple[list[list[int]], list[list[str]]]:
        """(source ids, references) of 'valid' or 'test'."""
        if part == "valid":
            return self.valid_ids, self.valid_references
        if part == "test":
            return self.test_ids, self.test_references
        raise ValueError(f"part must be 'valid' or 'test', got {part!r}")


def tokenizer_file(vocab_size: int = VOCAB_SIZE) -> Path:
    """Where the course's BPE of this size, learned from the training half of the split, is kept (the model cache):
    ``load_data`` learns it once, and ``make gpu-pack`` sends this very file to the GPU machine."""
    key = hashlib.sha256(f"{SPA_TSV_SHA256} {vocab_size} split=0.05/0.05/0".encode()).hexdigest()[:12]
    return cache_dir() / f"bpe-{key}.json"


def course_bpe(texts: list[str], vocab_size: int) -> BPETokenizer:
    path = tokenizer_file(vocab_size)
    if path.is_file():
        try:
            return BPETokenizer.load(path)
        except Exception:  # noqa: BLE001 - a damaged file, however it fails to load: learn it again
            pass
    tokenizer = train_bpe(texts, vocab_size=vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tokenizer.save(tmp)
    tmp.replace(path)
    return tokenizer


def load_data(max_tokens: int = 1000, seed: int = 0, vocab_size: int = VOCAB_SIZE) -> TranslationData:
    """The course's Tatoeba split, a shared BPE learned from its training half, and token-count batches.

    Loaded once per process for each (max_tokens, seed, vocab_size), however the arguments are spelt."""
    return _load_data(max_tokens, seed, vocab_size)


def data_for(config, seed: int = 0) -> TranslationData:
    """The data a typed configuration (``training.kinds``) trains on: its ``max_tokens`` per batch, its ``vocab``."""
    return load_data(config.max_tokens, seed, config.vocab)


@lru_cache(maxsize=4)
def _load_data(max_tokens: int, seed: int, vocab_size: int) -> TranslationData:
    split = tatoeba_split()
    texts = [en for en, _ in split.train] + [es for _, es in split.train]
    tokenizer = course_bpe(texts, vocab_size)
    src = tokenizer.encode_batch([en for en, _ in split.train])
    tgt = tokenizer.encode_batch([es for _, es in split.train])
    kept = [i for i in range(len(src)) if len(src[i]) <= MAX_TRAIN_TOKENS and len(tgt[i]) < MAX_TRAIN_TOKENS]
    batches = token_batches(
        [src[i] for i in kept], [tgt[i] for i in kept], max_tokens, tokenizer.pad_id, tokenizer.eos_id, seed=seed
    )
    test = multi_reference(split.test)
    sources = [en for en, _ in test]
    valid = validation_sentences(split.valid)
    fingerprint = (
        f"tatoeba {SPA_TSV_SHA256[:12]} bpe {hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:12]} "
        f"max_tokens {max_tokens} seed {seed}"
    )
    return TranslationData(
        tokenizer,
        batches,
        sources,
        [refs for _, refs in test],
        tokenizer.encode_batch(sources),
        [en for en, _ in valid],
        [refs for _, refs in valid],
        tokenizer.encode_batch([en for en, _ in valid]),
        fingerprint,
    )
