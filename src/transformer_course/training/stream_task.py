"""Chapter 11's language-modelling task: running text cut into windows, rather than chapter 10's one sentence a row.

Chapter 11 asks how a model trained on 64 tokens reads 256 or 4,096, so it needs text longer than a sentence. The
distinct English sentences of each part of the split (``lm_data.language_model_data``) are joined in their order,
each ``pieces <eos>``, into one token stream per part. Training draws ``rows`` windows of ``context + 1`` tokens at
random offsets (a generator of its own, seeded); held-out text is cut into consecutive windows (``windows``).

Shapes: R rows, L window length (context + 1: the inputs and, shifted by one, the targets).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor, nn

from .._checks import positive_int
from ..data.lm_data import Sequences

__all__ = ["StreamTask", "stream", "windows"]


def stream(sequences: Sequences) -> Tensor:
    """One int64 token stream (N,): each sequence without its leading <bos>, ending with its <eos>."""
    return torch.tensor([t for ids in sequences.ids for t in ids[1:]], dtype=torch.int64)


def windows(tokens: Tensor, length: int) -> Tensor:
    """The stream cut into consecutive windows of ``length`` tokens, (N // length, length); the tail is dropped."""
    positive_int("length", length)
    n = tokens.numel() // length
    if n == 0:
        raise ValueError(f"a stream of {tokens.numel()} tokens holds no window of {length}")
    return tokens[: n * length].view(n, length)


class StreamTask:
    """``loop.fit``'s task: each step, ``rows`` windows of ``context + 1`` tokens drawn uniformly from the stream,
    and the model's mean next-token loss over all their positions (``ScaleLM.loss``)."""

    def __init__(self, tokens: Tensor, context: int, rows: int, seed: int, evaluate: Any = None) -> None:
        self.tokens, self.context, self.rows = tokens, positive_int("context", context), positive_int("rows", rows)
        if tokens.numel() <= context:
            raise ValueError(f"the stream has {tokens.numel()} tokens: too few for windows of {context + 1}")
        self.generator = torch.Generator().manual_seed(seed)
        self.evaluate = evaluate

    def next_batch(self) -> tuple[Tensor, int]:
        starts = torch.randint(0, self.tokens.numel() - self.context, (self.rows,), generator=self.generator)
        ids = self.tokens[starts[:, None] + torch.arange(self.context + 1)]  # (R, context + 1)
        return ids, self.rows * self.context

    def loss(self, model: nn.Module, batch: Tensor) -> Tensor:
        return cast(Any, model).loss(batch)  # a ScaleLM: the mean next-token loss of the windows

    def state(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
