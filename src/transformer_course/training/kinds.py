"""The translation models by kind ("seq2seq", "bahdanau", "transformer"): each kind's configuration type, how a
configuration of ``configs`` becomes a model (``build_model``), and which of the package's modules hold its
code (the model cache's key, with the modules that train it: ``translation``). A new kind of model is added
here, as one entry of ``KINDS`` (its configuration type, its builder, its modules), and its configurations in
``configs``: nothing else changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..data.translation import DEFAULT_VOCAB
from .base_config import RunConfig, checked, keys

__all__ = [
    "BUILDERS",
    "KINDS",
    "Kind",
    "DEFAULT_VOCAB",
    "MODEL_CODE",
    "SCHEMAS",
    "BahdanauConfig",
    "Seq2SeqConfig",
    "TrainingConfig",
    "TransformerConfig",
    "build_model",
    "config_keys",
    "typed",
]


# The configurations' types: one per kind of model, under the base every trained configuration shares
# (``base_config.RunConfig``: batches, schedule, budget). CONFIGS holds plain dicts (they go verbatim into run files
# and cache keys); ``typed`` reads one into its dataclass, which says what keys a kind has, which it may leave out
# (with their defaults) and what type each takes, and refuses anything else with a clear message.
@dataclass(frozen=True, kw_only=True)
class TrainingConfig(RunConfig):
    model: str  # the kind: a key of KINDS
    smoothing: float = 0.1  # label smoothing
    vocab: int = DEFAULT_VOCAB  # BPE vocabulary size, shared by both languages


@dataclass(frozen=True, kw_only=True)
class Seq2SeqConfig(TrainingConfig):
    d_emb: int
    d_hidden: int


@dataclass(frozen=True, kw_only=True)
class BahdanauConfig(TrainingConfig):
    d_emb: int
    d_hidden: int
    d_att: int
    d_readout: int | None = None  # None: no readout layer, the output layer reads the state directly
    tie: bool = False  # the output layer shares the target embedding's matrix
    bidirectional: bool = False  # Bahdanau's encoder: a GRU each way, the attention reads both (2 x d_hidden)


@dataclass(frozen=True, kw_only=True)
class TransformerConfig(TrainingConfig):
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    dropout: float
    norm_first: bool
    tie_embeddings: bool


def config_keys(kind: str) -> list[str]:
    """Every key a configuration of this kind may have."""
    return keys(KINDS[kind].schema)


def typed(config: dict) -> TrainingConfig:
    """``config`` as its kind's dataclass; a ValueError that names the key for an unknown, missing or ill-typed one."""
    kind = config.get("model")
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}: expected one of {', '.join(map(repr, KINDS))}")
    return checked(KINDS[kind].schema, config, kind)


def _seq2seq(cfg: Seq2SeqConfig, vocab_size: int) -> nn.Module:
    from ..models.seq2seq import Seq2Seq

    return Seq2Seq(vocab_size, vocab_size, cfg.d_emb, cfg.d_hidden)


def _bahdanau(cfg: BahdanauConfig, vocab_size: int) -> nn.Module:
    from ..models.bahdanau import AttentionSeq2Seq

    return AttentionSeq2Seq(
        vocab_size,
        vocab_size,
        cfg.d_emb,
        cfg.d_hidden,
        cfg.d_att,
        d_readout=cfg.d_readout,
        tie=cfg.tie,
        bidirectional=cfg.bidirectional,
    )


def _transformer(cfg: TransformerConfig, vocab_size: int) -> nn.Module:
    from ..models.transformer import Transformer

    return Transformer(
        vocab_size,
        vocab_size,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        n_encoder_layers=cfg.n_encoder_layers,
        n_decoder_layers=cfg.n_decoder_layers,
        d_ff=cfg.d_ff,
        dropout=cfg.dropout,
        norm_first=cfg.norm_first,
        tie_embeddings=cfg.tie_embeddings,
    )


@dataclass(frozen=True)
class Kind:
    """A kind of translation model: what its configurations hold, how one becomes a model, where its code is."""

    schema: type[TrainingConfig]
    # (typed configuration, vocabulary size) -> a fresh model. Any: each builder takes its own schema's type.
    build: Callable[[Any, int], nn.Module]
    # The modules whose source builds and runs it (names in the package): with the shared ones of
    # experiments.translation._code, its cache key
    # (incremental: generate() decodes the test translations stored with a model).
    code: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "seq2seq": Kind(Seq2SeqConfig, _seq2seq, ("models.seq2seq",)),
    "bahdanau": Kind(BahdanauConfig, _bahdanau, ("models.seq2seq", "models.bahdanau")),
    "transformer": Kind(
        TransformerConfig,
        _transformer,
        (
            "_checks",
            "models.attention",
            "models.multihead",
            "models.positional",
            "models.packed_attention",
            "models.transformer_layers",
            "models.transformer",
            "models.incremental",
        ),
    ),
}
# The same, table by table.
SCHEMAS: dict[str, type[TrainingConfig]] = {name: kind.schema for name, kind in KINDS.items()}
BUILDERS: dict[str, Callable[[TrainingConfig, int], nn.Module]] = {name: kind.build for name, kind in KINDS.items()}
MODEL_CODE: dict[str, tuple[str, ...]] = {name: kind.code for name, kind in KINDS.items()}


def build_model(config: dict | TrainingConfig, vocab_size: int, seed: int = 0) -> nn.Module:
    """A fresh model of the configuration ``config`` (a dict of ``configs``, or one already ``typed``), its weights
    drawn from ``seed``."""
    cfg = config if isinstance(config, TrainingConfig) else typed(config)
    torch.manual_seed(seed)
    return KINDS[cfg.model].build(cfg, vocab_size)
