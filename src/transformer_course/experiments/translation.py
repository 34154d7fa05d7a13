"""English-to-Spanish translation on Tatoeba (chapters 3, 4, 8 and 9): train a model by name (its configuration
in ``training.configs``) or load it from the model cache, then score it on the held-out test set.

Every model is trained on the same split (``data.translation``), with the same tokenizer, and evaluated the
same way (``evaluation.translate``): greedy decoding, detokenised, corpus BLEU against all the references of
each sentence. This module re-exports the names of both that the chapters use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..data.translation import VOCAB_SIZE, TranslationData, data_for, load_data, tokenizer_file
from ..decoding.search import max_output_length
from ..evaluation.metrics import bleu_by_length, corpus_bleu
from ..evaluation.translate import beam_translations, count_parameters, evaluate_bleu, greedy_translations
from ..training.budget import REPRODUCIBLE_THREADS, fixed_budget, reproducible, torch_threads
from ..training.configs import CONFIGS
from ..training.kinds import MODEL_CODE, build_model, typed
from ..training.loop import Settings, fit, pick_device
from ..training.model_cache import cached_training

__all__ = [
    "VOCAB_SIZE",
    "TranslationData",
    "TranslationRun",
    "beam_translations",
    "data_for",
    "evaluate_bleu",
    "greedy_translations",
    "load_data",
    "max_output_length",
    "tokenizer_file",
    "translation_experiment",
]


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


def _code(kind: str) -> tuple:
    """The modules whose source builds, trains and scores a model of this kind: the model cache's key."""
    import importlib
    import sys

    from ..data import batching, tatoeba, tokenize
    from ..data import translation as data
    from ..evaluation import metrics
    from ..evaluation import translate as evaluation
    from ..training import base_config, tasks
    from ..training import kinds as models
    from ..training import loop as training

    own = tuple(importlib.import_module(f"transformer_course.{name}") for name in MODEL_CODE[kind])
    shared = (models, base_config, sys.modules[__name__], training, tasks, evaluation, metrics)
    return (*own, *shared, batching, tatoeba, tokenize, data)


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

    The budget is the configuration's own (five minutes for the CPU models), or ``seconds`` or ``steps``. Under
    test and when stored outputs are made (``training.budget.reproducible()``), a time budget on a CPU becomes the
    steps it buys on the machine that made the stored runs, trained on one thread as they were. The training curve
    (``eval_every_seconds``) and ``valid_bleu`` are on the validation set; ``bleu`` and ``by_length`` on the test
    set, decoded once, after training."""
    config = {**CONFIGS[name], **overrides}  # as stored with the model (the cache key holds it verbatim)
    dev = pick_device(device)
    threads = None  # the caller's
    if seconds is not None or steps is not None:
        config["steps"], config["seconds"] = steps, seconds
    elif reproducible() and dev.type == "cpu":  # the steps are a CPU's; a GPU run keeps its minutes
        config, threads = fixed_budget(name, config), REPRODUCIBLE_THREADS
    cfg = typed(config)
    data = data_for(cfg)
    settings = Settings.from_config(cfg, eval_every_seconds=eval_every_seconds)

    def build() -> nn.Module:
        return build_model(cfg, len(data.tokenizer)).to(dev)

    def train(model: nn.Module) -> dict:
        evaluate = (lambda m: evaluate_bleu(m, data, "valid")) if eval_every_seconds else None
        with torch_threads(threads):
            history = fit(model, data.train, settings, evaluate=evaluate, device=dev, progress=progress, log=log)
        history["valid_bleu"] = evaluate_bleu(model, data, "valid")
        # The test translations are kept with the model, so that loading it from the cache costs no decoding.
        start = time.perf_counter()
        history["test_hypotheses"] = greedy_translations(model, data)
        history["decode_seconds"] = time.perf_counter() - start
        return history

    key_config = {**config, "device": dev.type, **({"threads": threads} if threads else {})}
    model, history, loaded = cached_training(
        f"tatoeba-{name}",
        key_config,
        data.fingerprint,
        build,
        train,
        _code(cfg.model),
        steps=config.get("steps"),
        seconds=config.get("seconds"),
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
