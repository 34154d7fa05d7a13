"""Chapter 10's tasks for ``loop.fit`` (``tasks.Task``): a language model learning each next token
(``NextTokenTask``), and a masked language model learning the tokens hidden from it (``MaskedTokenTask``).

Both read the training sentences in batches of similar length (``lm_data.lm_batches``), a new order at every pass
over them (seeded ``seed * 1000 + pass``), taken from the first batch on: ``SentenceBatches``. Shapes: B batch,
T length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn

from ..data.lm_data import LMBatch, Sequences, lm_batches
from ..models.language_model import next_token_loss
from ..models.masked_lm import MaskedLM, check_rate, masked_loss

__all__ = ["MaskedTokenTask", "NextTokenTask", "SentenceBatches", "curve_of"]


class SentenceBatches:
    """The training sentences in batches of at most ``max_tokens`` positions (padding counted), pass after pass."""

    def __init__(self, sentences: Sequences, max_tokens: int, pad_id: int, seed: int) -> None:
        self.sentences, self.max_tokens, self.pad_id, self.seed = sentences, max_tokens, pad_id, seed
        self.epoch = 0  # passes started
        self.left: list[LMBatch] = []  # the batches left in this pass, the next one last

    def _pass(self, epoch: int) -> list[LMBatch]:
        batches = lm_batches(self.sentences, self.max_tokens, self.pad_id, seed=self.seed * 1000 + epoch)
        return batches[::-1]  # popped from the end: the pass's first batch comes first

    def next(self) -> LMBatch:
        if not self.left:  # a new pass over the training sentences, in a new order
            self.left = self._pass(self.epoch)
            self.epoch += 1
        return self.left.pop()

    def state(self) -> dict:
        return {"epoch": self.epoch, "left": len(self.left)}

    def load_state(self, state: dict) -> None:
        """Go on from ``state()``: the pass is drawn again from its seed, less the batches already taken."""
        self.epoch = state["epoch"]
        self.left = self._pass(self.epoch - 1)[: state["left"]] if self.epoch else []


class NextTokenTask:
    """A language model (``TransformerLM``, ``RNNLM``) learning each next token: the mean loss over the positions
    of each batch's loss mask. ``evaluate(model)``: the held-out figures, a dict."""

    def __init__(
        self,
        sentences: Sequences,
        max_tokens: int,
        pad_id: int,
        seed: int,
        evaluate: Callable[[nn.Module], Any] | None = None,
    ) -> None:
        self.batches = SentenceBatches(sentences, max_tokens, pad_id, seed)
        self.pad_id, self.evaluate = pad_id, evaluate

    def next_batch(self) -> tuple[Any, int]:
        batch = self.batches.next()
        return batch, int(batch.loss_mask.sum())  # the positions the loss counts

    def loss(self, model: nn.Module, batch: Any) -> Tensor:
        return next_token_loss(model, batch.ids, batch.ids != self.pad_id, batch.loss_mask)  # ids (B, T)

    def state(self) -> dict:
        return self.batches.state()

    def load_state(self, state: dict) -> None:
        self.batches.load_state(state)


class MaskedTokenTask(NextTokenTask):
    """A masked language model (``MaskedLM``) learning the tokens it is not shown: each step masks its batch anew
    (BERT's recipe at ``rate``), with a generator of its own seeded ``seed``, and the loss is over those targets."""

    def __init__(
        self,
        sentences: Sequences,
        max_tokens: int,
        pad_id: int,
        seed: int,
        rate: float,
        evaluate: Callable[[nn.Module], Any] | None = None,
    ) -> None:
        super().__init__(sentences, max_tokens, pad_id, seed, evaluate)
        self.rate = check_rate(rate)
        self.masks = torch.Generator().manual_seed(seed)  # the training masks: a new draw at every step

    def next_batch(self) -> tuple[Any, int]:
        batch = self.batches.next()
        return batch, int((batch.ids != self.pad_id).sum())  # the tokens the model reads (its targets are drawn later)

    def loss(self, model: nn.Module, batch: Any) -> Tensor:
        return masked_loss(cast(MaskedLM, model), batch.ids, batch.ids != self.pad_id, self.masks, self.rate)

    def state(self) -> dict:
        return {**self.batches.state(), "masks": self.masks.get_state()}

    def load_state(self, state: dict) -> None:
        self.batches.load_state(state)
        self.masks.set_state(state["masks"])


def curve_of(history: dict) -> list[dict]:
    """The curve a run records, from ``fit``'s history: at each evaluation the step, the training time, the loss of
    that step's batch and the held-out figures (the task's ``evaluate`` gives a dict)."""
    return [
        {"step": step, "seconds": seconds, "train_loss": history["loss"][step - 1], **figures}
        for step, seconds, figures in history["eval"]
    ]
