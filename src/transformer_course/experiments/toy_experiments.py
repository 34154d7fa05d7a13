"""The small experiments of chapters 3 and 4: normalising dates and copying digit strings, with and without
attention, each trained once and kept in the model cache (chapter 4 loads chapter 3's models: same
configuration, same key).

They train with ``train_toy``: Adam at a constant learning rate, gradient clipping, and a stop as soon as a
score is reached. The translation models train with ``training.fit`` (warm-up and decay, token-count batches,
time budgets); these tasks need none of that, and a loop this short is one a reader can follow in full.

Shapes: B batch, T target length, V target vocabulary size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data import batching, date_splits, dates, digits, make_batches
from ..data.dates import CharVocab, date_vocabs
from ..data.digits import digit_vocab, make_digit_pairs
from ..evaluation import metrics
from ..evaluation import translate as evaluation
from ..evaluation.metrics import char_accuracy, exact_match
from ..evaluation.translate import translate
from ..models import bahdanau, seq2seq
from ..models.bahdanau import AttentionSeq2Seq
from ..models.seq2seq import Seq2Seq
from ..training.budget import TOY_THREADS, reproducible, torch_threads
from ..training.configs import COPY_EXPERIMENT, DATE_EXPERIMENT
from ..training.model_cache import cached_training

__all__ = ["CopyRun", "DateRun", "copy_experiment", "date_experiment", "pair_batches", "sequence_loss", "train_toy"]


@dataclass
class DateRun:
    """What ``date_experiment`` returns."""

    model: nn.Module
    history: dict  # train_toy's record: step, loss per step, evaluations (step, seconds, accuracy), seconds
    loaded: bool  # True when the model cache answered
    config: dict
    accuracy: float  # exact match on the held-out dates
    test_pairs: list[tuple[str, str]]
    src_vocab: CharVocab
    tgt_vocab: CharVocab


@dataclass
class CopyRun:
    """What ``copy_experiment`` returns."""

    model: nn.Module
    history: dict
    loaded: bool
    config: dict
    by_length: dict[int, tuple[int, float, float]]  # input length -> (strings, characters right, exactly right)
    test_pairs: list[tuple[str, str]]
    outputs: list[str]
    vocab: CharVocab


def sequence_loss(logits: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
    """Mean cross-entropy over the real target tokens. logits (B, T, V), tgt and tgt_mask (B, T)."""
    loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="none")
    mask = tgt_mask.flatten().to(loss.dtype)
    return (loss * mask).sum() / mask.sum()


def train_toy(
    model: nn.Module,
    batches: Sequence,
    steps: int,
    lr: float = 3e-3,
    clip: float = 1.0,
    seed: int = 0,
    evaluate: Callable[[nn.Module], float] | None = None,
    eval_every: int = 0,
    stop_at: float | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Adam with gradient clipping for ``steps`` updates, cycling through ``batches`` (reshuffled each epoch).

    With ``evaluate`` and ``eval_every``, the model is scored every ``eval_every`` steps (and at the end);
    with ``stop_at``, training stops as soon as the score reaches it. Returns the history:
    {'step', 'loss', 'eval': [(step, seconds, score)], 'seconds'}.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history: dict = {"loss": [], "eval": [], "step": 0}
    start = time.perf_counter()
    order: list[int] = []
    model.train()
    for step in range(1, steps + 1):
        if not order:
            order = torch.randperm(len(batches), generator=generator).tolist()
        batch = batches[order.pop()]
        logits = model(batch.src, batch.src_mask, batch.tgt)
        logits = logits[0] if isinstance(logits, tuple) else logits
        loss = sequence_loss(logits, batch.tgt, batch.tgt_mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        history["loss"].append(loss.item())
        history["step"] = step
        if evaluate is not None and eval_every and (step % eval_every == 0 or step == steps):
            model.eval()
            score = evaluate(model)
            model.train()
            history["eval"].append((step, time.perf_counter() - start, score))
            if log:
                log(f"step {step:5d}  loss {loss.item():.3f}  score {score:.4f}  {time.perf_counter() - start:5.1f} s")
            if stop_at is not None and score >= stop_at:
                break
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


def _code() -> tuple:
    """The modules whose source builds, trains and scores these models: the model cache's key."""
    import sys

    return (seq2seq, bahdanau, sys.modules[__name__], evaluation, batching, dates, digits, metrics)


def _build(attention: bool, src_vocab: int, tgt_vocab: int, cfg: dict) -> nn.Module:
    torch.manual_seed(cfg["seed"])
    if attention:
        return AttentionSeq2Seq(src_vocab, tgt_vocab, cfg["d_emb"], cfg["d_hidden"], cfg["d_att"])
    return Seq2Seq(src_vocab, tgt_vocab, cfg["d_emb"], cfg["d_hidden"])


def pair_batches(pairs: list[tuple[str, str]], src_vocab: CharVocab, tgt_vocab: CharVocab, cfg: dict) -> list:
    """Training batches of (source, target) string pairs, each side encoded with its vocabulary: ``cfg["batch_size"]``
    pairs of similar length per batch, shuffled with ``cfg["seed"]``."""
    return make_batches(
        [src_vocab.encode(a) for a, _ in pairs],
        [tgt_vocab.encode(b) for _, b in pairs],
        cfg["batch_size"],
        src_vocab.pad_id,
        tgt_vocab.eos_id,
        seed=cfg["seed"],
    )


def _threads() -> int | None:
    """The threads a small experiment trains on: the kernel's own, or under ``reproducible()`` the threads its stored
    outputs were made with (``budget.TOY_THREADS``), so that a kernel on one thread reproduces them."""
    return TOY_THREADS if reproducible() else None


def date_experiment(attention: bool, log: Callable | None = None, **overrides) -> DateRun:
    """Train (or load) a date normaliser; returns the model, its training record, its accuracy and the data."""
    cfg = {**DATE_EXPERIMENT, **overrides, "attention": attention}
    train_pairs, test_pairs = date_splits(cfg["n_train"], cfg["n_test"], seed=cfg["seed"])
    src_vocab, tgt_vocab = date_vocabs()
    batches = pair_batches(train_pairs, src_vocab, tgt_vocab, cfg)
    test_src = [src_vocab.encode(a) for a, _ in test_pairs]
    targets = [b for _, b in test_pairs]

    def accuracy(model: nn.Module) -> float:
        return exact_match(translate(model, test_src, tgt_vocab, max_len=11), targets)

    threads = _threads()

    def fit(model: nn.Module) -> dict:
        with torch_threads(threads):
            return train_toy(
                model,
                batches,
                cfg["steps"],
                lr=cfg["lr"],
                seed=cfg["seed"],
                evaluate=accuracy,
                eval_every=cfg["eval_every"],
                stop_at=cfg["stop_at"],
                log=log,
            )

    name = "dates-attention" if attention else "dates-seq2seq"
    model, history, loaded = cached_training(
        name,
        {**cfg, **({"threads": threads} if threads else {})},
        f"date_splits{cfg['n_train'], cfg['n_test']}",
        lambda: _build(attention, len(src_vocab), len(tgt_vocab), cfg),
        fit,
        _code(),
    )
    return DateRun(model, history, loaded, cfg, accuracy(model), test_pairs, src_vocab, tgt_vocab)


def copy_experiment(attention: bool, **overrides) -> CopyRun:
    """Train (or load) a model that repeats strings of 4 to 24 digits; accuracy by input length."""
    cfg = {**COPY_EXPERIMENT, **overrides, "attention": attention}
    vocab = digit_vocab()
    train_pairs = make_digit_pairs(cfg["n_train"], cfg["min_len"], cfg["max_len"], seed=cfg["seed"])
    test_pairs = make_digit_pairs(cfg["n_test"], cfg["min_len"], cfg["max_len"], seed=cfg["seed"] + 1000)
    batches = pair_batches(train_pairs, vocab, vocab, cfg)

    threads = _threads()

    def fit(model: nn.Module) -> dict:
        with torch_threads(threads):
            return train_toy(model, batches, cfg["steps"], lr=cfg["lr"], seed=cfg["seed"])

    name = "copy-attention" if attention else "copy-seq2seq"
    key = {**cfg, **({"threads": threads} if threads else {})}
    model, history, loaded = cached_training(
        name, key, "make_digit_pairs", lambda: _build(attention, len(vocab), len(vocab), cfg), fit, _code()
    )
    outputs = translate(model, [vocab.encode(a) for a, _ in test_pairs], vocab, max_len=cfg["max_len"] + 1)
    by_length = {}
    for n in range(cfg["min_len"], cfg["max_len"] + 1):
        idx = [i for i, (a, _) in enumerate(test_pairs) if len(a) == n]
        if idx:
            preds, targets = [outputs[i] for i in idx], [test_pairs[i][1] for i in idx]
            by_length[n] = (len(idx), char_accuracy(preds, targets), exact_match(preds, targets))
    return CopyRun(model, history, loaded, cfg, by_length, test_pairs, outputs, vocab)
