"""Chapter 10's configurations, typed: the language models of ``lm_train`` (``LANGUAGE_MODELS``, by name) and the
masked language model of ``mlm_train`` (``MASKED_LM``).

They share the translation models' base (``base_config.RunConfig``: batches, schedule, budget), so that one
``loop.fit`` reads them all, and one override syntax changes them (``--set KEY=VALUE``). A run records its
configuration without the budget (``recorded``): the command line gives that (``--steps``), and the run's
``steps`` says what it trained.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from .base_config import RunConfig

__all__ = [
    "LANGUAGE_MODELS",
    "LM_TYPES",
    "MASKED_LM",
    "BigramConfig",
    "LMConfig",
    "MaskedLMConfig",
    "RNNLMConfig",
    "TransformerLMConfig",
    "recorded",
]

TASKS = ("lm", "translation")  # the English sentences, or "English <bos> Spanish" with the loss on the Spanish


@dataclass(frozen=True, kw_only=True)
class LMConfig:
    """A language model of chapter 10: what it learns (``TASKS``), its kind of model and the BPE's size."""

    KIND: ClassVar[str] = ""  # the ``model`` of this type's configurations
    task: str
    model: str
    vocab: int  # BPE vocabulary size

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        if self.model != self.KIND:
            raise ValueError(f"model of a {type(self).__name__} is {self.KIND!r}, got {self.model!r}")


@dataclass(frozen=True, kw_only=True)
class BigramConfig(LMConfig):
    """The count-based bigram model: fitted, not trained, so without schedule or budget."""

    KIND: ClassVar[str] = "bigram"


@dataclass(frozen=True, kw_only=True)
class TransformerLMConfig(RunConfig, LMConfig):
    """A decoder-only Transformer (``language_model.TransformerLM``)."""

    KIND: ClassVar[str] = "transformer"
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    dropout: float
    max_len: int  # the longest sequence, in tokens (the positional encodings' length)


@dataclass(frozen=True, kw_only=True)
class RNNLMConfig(RunConfig, LMConfig):
    """Chapter 2's recurrent network as a language model (``language_model.RNNLM``)."""

    KIND: ClassVar[str] = "rnn"
    d_embed: int
    d_hidden: int
    n_layers: int
    dropout: float


@dataclass(frozen=True, kw_only=True)
class MaskedLMConfig(RunConfig):
    """The masked language model (``masked_lm.MaskedLM``), and what its runs mask and show."""

    vocab: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    dropout: float
    max_len: int
    rate: float  # the share of tokens chosen as targets at each step (BERT's 15 %)
    examples: int  # held-out sentences with one word blanked out, in the run's record


LM_TYPES: dict[str, type[LMConfig]] = {"bigram": BigramConfig, "transformer": TransformerLMConfig, "rnn": RNNLMConfig}

LANGUAGE_MODELS: dict[str, LMConfig] = {
    "lm-transformer-cpu": TransformerLMConfig(
        task="lm", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=4, d_ff=768, dropout=0.0,
        max_tokens=600, peak_lr=0.002, warmup=150, max_len=64,
    ),
    # chosen at equal time on validation (runs/sweep-lm-transformer-cpu.json): half the layers, so each step costs
    # about 0.73 of the GRU's and 2,600 steps take the GRU's 1,900; twice the peak learning rate
    "lm-transformer-2layer-cpu": TransformerLMConfig(
        task="lm", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=2, d_ff=768, dropout=0.0,
        max_tokens=600, peak_lr=0.004, warmup=150, max_len=64,
    ),
    "lm-rnn-cpu": RNNLMConfig(
        task="lm", model="rnn", vocab=8000, d_embed=256, d_hidden=512, n_layers=1, dropout=0.0,
        max_tokens=600, peak_lr=0.008, warmup=80,
    ),
    "lm-bigram": BigramConfig(task="lm", model="bigram", vocab=8000),
    "tlm-transformer-cpu": TransformerLMConfig(
        task="translation", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=4, d_ff=768,
        dropout=0.0, max_tokens=1200, peak_lr=0.002, warmup=150, max_len=160,
    ),
}  # fmt: skip

# 2000 steps took 5 minutes of training on one thread of a 2-core machine shared with other runs
# (runs/mlm-transformer-cpu-seed0.json): about 0.15 s a step.
MASKED_LM = MaskedLMConfig(
    vocab=8000, d_model=128, n_heads=4, n_layers=3, d_ff=512, dropout=0.0, max_len=128,
    max_tokens=600, peak_lr=0.002, warmup=150, rate=0.15, examples=8,
)  # fmt: skip


def recorded(config: Any) -> dict:
    """A configuration as a run records it, in plain values: every key but the budget (``steps``, ``seconds``)."""
    return {f.name: getattr(config, f.name) for f in fields(config) if f.name not in ("steps", "seconds")}
