"""The translation models by kind ("seq2seq", "bahdanau", "transformer"): how a configuration of ``configs``
becomes a model (``build_model``), and which of the package's modules hold its code (the model cache's key,
with the modules that train it: ``translation``). A new kind of model is added here, in both tables."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["BUILDERS", "MODEL_CODE", "build_model"]


def _seq2seq(config: dict, vocab_size: int) -> nn.Module:
    from .seq2seq import Seq2Seq

    return Seq2Seq(vocab_size, vocab_size, config["d_emb"], config["d_hidden"])


def _bahdanau(config: dict, vocab_size: int) -> nn.Module:
    from .bahdanau import AttentionSeq2Seq

    return AttentionSeq2Seq(
        vocab_size,
        vocab_size,
        config["d_emb"],
        config["d_hidden"],
        config["d_att"],
        d_readout=config.get("d_readout"),
        tie=config.get("tie", False),
    )


def _transformer(config: dict, vocab_size: int) -> nn.Module:
    from .transformer import Transformer

    keys = (
        "d_model",
        "n_heads",
        "n_encoder_layers",
        "n_decoder_layers",
        "d_ff",
        "dropout",
        "norm_first",
        "tie_embeddings",
    )
    return Transformer(vocab_size, vocab_size, **{k: config[k] for k in keys if k in config})


# A configuration's "model" -> the function that builds it (the chapters' modules are imported when used).
BUILDERS: dict[str, Callable[[dict, int], nn.Module]] = {
    "seq2seq": _seq2seq,
    "bahdanau": _bahdanau,
    "transformer": _transformer,
}
# ... and the modules whose source builds and runs it: with the shared ones of _code, its cache key
MODEL_CODE = {
    "seq2seq": ("seq2seq",),
    "bahdanau": ("seq2seq", "bahdanau"),
    "transformer": (
        "_checks",
        "attention",
        "multihead",
        "positional",
        "transformer_layers",
        "transformer",
        "incremental",
    ),
}  # incremental: generate() decodes the stored test translations with it


def build_model(config: dict, vocab_size: int, seed: int = 0) -> nn.Module:
    kind = config["model"]
    if kind not in BUILDERS:
        raise ValueError(f"unknown model kind {kind!r}: expected 'seq2seq', 'bahdanau' or 'transformer'")
    torch.manual_seed(seed)
    return BUILDERS[kind](config, vocab_size)
