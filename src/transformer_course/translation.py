"""English-to-Spanish translation on Tatoeba (chapters 3, 4, 8 and 9): the data, the models, their
configurations for a CPU and a GPU, training with the model cache, and held-out evaluation.

Every model is trained on the same split, with the same tokenizer, and evaluated the same way: greedy
decoding, detokenised, corpus BLEU against all the references of each sentence. Two held-out sets, both
disjoint by English sentence from the training pairs and from each other: a validation set of 2,000
sentences, on which every choice is tuned (configurations, learning rates, beam widths) and training
curves are drawn, and the test set (every other held-out sentence of the test split), decoded only to
report a final figure.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from torch import nn

from .configs import CONFIGS
from .data.batching import Batch, token_batches
from .data.tatoeba import SPA_TSV_SHA256, multi_reference, tatoeba_split, validation_sentences
from .data.tokenize import BPETokenizer, train_bpe
from .evaluation import count_parameters, translate
from .metrics import bleu_by_length, corpus_bleu
from .model_cache import cache_dir, cached_training
from .models import DEFAULT_VOCAB, MODEL_CODE, TrainingConfig, build_model, typed
from .training import Settings, fit, pick_device

__all__ = [
    "TranslationData",
    "TranslationRun",
    "beam_translations",
    "data_for",
    "evaluate_bleu",
    "load_data",
    "tokenizer_file",
    "translation_experiment",
]

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


@dataclass
class TranslationRun:
    """What ``translation_experiment`` returns: a trained model, how it trained and how it translates."""

    name: str  # the configuration's name in CONFIGS
    model: nn.Module
    history: dict  # the training loop's record: steps, loss and learning rate per step, evaluations, seconds
    loaded: bool  # True when the model cache answered, False when it trained now
    bleu: float  # greedy corpus BLEU on the test set
    valid_bleu: float | None  # the same on the validation set
    config: dict  # the configuration it trained with, overrides included
    parameters: int
    hypotheses: list[str]  # its greedy translation of every test sentence
    decode_seconds: float | None  # how long decoding the test set took
    by_length: list[tuple[int, int, int, float | None]]  # (shortest, longest + 1, sentences, BLEU or None) by length
    data: TranslationData
    device: str


def tokenizer_file(vocab_size: int = VOCAB_SIZE) -> Path:
    """Where the course's BPE of this size, learned from the training half of the split, is kept (the model cache):
    ``load_data`` learns it once, and ``make gpu-pack`` sends this very file to the GPU machine."""
    key = hashlib.sha256(f"{SPA_TSV_SHA256} {vocab_size} split=0.05/0.05/0".encode()).hexdigest()[:12]
    return cache_dir() / f"bpe-{key}.json"


def _tokenizer(texts: list[str], vocab_size: int) -> BPETokenizer:
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


def data_for(config: TrainingConfig, seed: int = 0) -> TranslationData:
    """The data a typed configuration trains on: its batch size in tokens, its vocabulary."""
    return load_data(config.max_tokens, seed, config.vocab)


@lru_cache(maxsize=4)
def _load_data(max_tokens: int, seed: int, vocab_size: int) -> TranslationData:
    split = tatoeba_split()
    texts = [en for en, _ in split.train] + [es for _, es in split.train]
    tokenizer = _tokenizer(texts, vocab_size)
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


def max_output_length(src_len: int) -> int:
    """Greedy decoding stops at <eos> or at this many tokens: Spanish runs a little longer than English."""
    return int(1.5 * src_len) + 10


# Sentences per batch when the test set is decoded; a batch's longest source sets the length limit of all its
# outputs, so only the same batches give the same translations.
TEST_BATCH = 256


def greedy_translations(model: nn.Module, data: TranslationData, sources: list[list[int]] | None = None) -> list[str]:
    """Greedy translations of every distinct test sentence (or of ``sources``), decoded to text."""
    sources = data.test_ids if sources is None else sources
    return translate(model, sources, data.tokenizer, max_output_length, TEST_BATCH, data.tokenizer.pad_id)


def beam_translations(
    model: nn.Module, data: TranslationData, sources: list[list[int]], beam_size: int, alpha: float, rows: int = 256
) -> list[str]:
    """Beam-search translations (chapter 9: ``beam_size`` beams, length penalty ``alpha``) of token-id sources, as
    text. Sentences of similar length go together, ``rows // beam_size`` at a time (every beam is a row)."""
    from .data.batching import length_batches, pad_sequences
    from .decoding import beam_search

    device = next(model.parameters()).device
    texts = [""] * len(sources)
    for group in length_batches([len(s) for s in sources], max(1, rows // beam_size), shuffle=False):
        src, mask = pad_sequences([sources[i] for i in group], data.tokenizer.pad_id)
        limit = max_output_length(src.shape[1])
        result = beam_search(model, src.to(device), mask.to(device), beam_size, limit, alpha, data.tokenizer.eos_id)
        for i, tokens in zip(group, result.tokens):
            texts[i] = data.tokenizer.decode(tokens)
    return texts


def evaluate_bleu(model: nn.Module, data: TranslationData, part: str = "valid") -> float:
    """Greedy corpus BLEU on the validation set (the default: what tuning and training curves read) or the test set."""
    sources, references = data.held_out(part)
    return corpus_bleu(greedy_translations(model, data, sources), references)


def _code(kind: str) -> tuple:
    """The modules whose source builds, trains and scores a model of this kind: the model cache's key."""
    import importlib
    import sys

    from . import evaluation, metrics, models, training
    from .data import batching, tatoeba, tokenize

    own = tuple(importlib.import_module(f"{__package__}.{name}") for name in MODEL_CODE[kind])
    return (*own, models, sys.modules[__name__], training, evaluation, metrics, batching, tatoeba, tokenize)


def translation_experiment(
    name: str,
    seconds: float | None = None,
    steps: int | None = None,
    eval_every_seconds: float = 0.0,
    device: str | None = None,
    log: Callable | None = None,
    progress: bool = True,
    **overrides,
) -> TranslationRun:
    """Train (or load from the cache) the configuration ``name`` of CONFIGS, then score it on the test set.

    The training curve (``eval_every_seconds``) and ``valid_bleu`` are on the validation set; ``bleu`` and
    ``by_length`` on the test set, decoded once, after training."""
    config = {**CONFIGS[name], **overrides}  # as stored with the model (the cache key holds it verbatim)
    if seconds is not None or steps is not None:
        config["steps"], config["seconds"] = steps, seconds
    cfg = typed(config)
    data = data_for(cfg)
    dev = pick_device(device)
    settings = Settings.from_config(cfg, eval_every_seconds=eval_every_seconds)

    def build() -> nn.Module:
        return build_model(cfg, len(data.tokenizer)).to(dev)

    def train(model: nn.Module) -> dict:
        evaluate = (lambda m: evaluate_bleu(m, data, "valid")) if eval_every_seconds else None
        history = fit(model, data.train, settings, evaluate=evaluate, device=dev, progress=progress, log=log)
        history["valid_bleu"] = evaluate_bleu(model, data, "valid")
        # The test translations are kept with the model, so that loading it from the cache costs no decoding.
        start = time.perf_counter()
        history["test_hypotheses"] = greedy_translations(model, data)
        history["decode_seconds"] = time.perf_counter() - start
        return history

    key_config = {**config, "device": dev.type}
    model, history, loaded = cached_training(
        f"tatoeba-{name}", key_config, data.fingerprint, build, train, _code(cfg.model)
    )
    model.to(dev)
    hypotheses, decode_seconds = history.get("test_hypotheses"), history.get("decode_seconds")
    if hypotheses is None or len(hypotheses) != len(data.test_sources):  # an entry from before they were kept
        start = time.perf_counter()
        hypotheses = greedy_translations(model, data)
        decode_seconds = time.perf_counter() - start
    bleu = corpus_bleu(hypotheses, data.test_references)
    lengths = [len(ids) for ids in data.test_ids]
    return TranslationRun(
        name=name,
        model=model,
        history=history,
        loaded=loaded,
        bleu=bleu,
        valid_bleu=history.get("valid_bleu"),
        config=config,
        parameters=count_parameters(model),
        hypotheses=hypotheses,
        decode_seconds=decode_seconds,
        by_length=bleu_by_length(hypotheses, data.test_references, lengths, [1, 6, 9, 12, 16, 100]),
        data=data,
        device=str(dev),
    )
