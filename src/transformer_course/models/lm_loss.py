"""The objective of chapter 10's language models: next-token prediction with shifted targets.

Position t of ids (B, T) reads ids[:, :t + 1] and predicts ids[:, t + 1]: the inputs are ids[:, :-1], the
targets ids[:, 1:]. A target counts unless it is padding, and with a ``loss_mask`` (B, T), aligned with ids,
only where that mask is True: translation as language modelling reads "English <sep> Spanish <eos>" and is
scored on the Spanish tokens alone (``mask_after``). Every language model of the chapter (``language_model``,
``lm_baselines``) computes its loss here, so that their losses and perplexities are measured the same way.

Shapes: B batch, T length, V vocabulary. Masks are boolean, True = a real token; padding goes at the end of
each row (right padding).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_ids, check_values

__all__ = ["lm_mask", "mask_after", "next_token_loss", "shift_targets"]


def mask_after(ids: Tensor, sep_id: int) -> Tensor:
    """(B, T) bool, True strictly after each row's first ``sep_id``: the targets that count when "source <sep>
    target" is scored on the target only (a row without ``sep_id`` counts nothing)."""
    seen = (ids == sep_id).long().cumsum(dim=1)  # (B, T): how many separators up to and including t
    return (seen - (ids == sep_id).long()) > 0


def lm_mask(ids: Tensor, mask: Tensor | None, pad_id: int | None, vocab_size: int, max_len: int) -> Tensor:
    """Check a language model's input ids (B, T) and return its padding mask (B, T): ``mask`` if given, else
    True where ids != pad_id (everywhere if pad_id is None). Padding must come at the end of each row."""
    check_ids("ids", ids, mask, "mask", max_len)
    if mask is None:
        mask = torch.ones_like(ids, dtype=torch.bool) if pad_id is None else ids != pad_id
    check_values([("ids", ids, vocab_size)])
    if not bool(mask[:, 0].all()) or bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("padding must come at the end of each row, after at least one real token")
    return mask


def shift_targets(ids: Tensor, mask: Tensor, loss_mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Inputs and targets of next-token prediction for ids (B, T), mask (B, T) (True = real token):
    inputs ids[:, :-1] (B, T - 1), their mask, targets ids[:, 1:] (B, T - 1), and which targets count (B, T - 1):
    the real ones, and of those only where ``loss_mask`` (B, T), aligned with ids, is True."""
    counted = mask[:, 1:] if loss_mask is None else mask[:, 1:] & loss_mask[:, 1:]
    return ids[:, :-1], mask[:, :-1], ids[:, 1:], counted


def next_token_loss(
    model: Any, ids: Tensor, mask: Tensor, loss_mask: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Cross-entropy of ``model(inputs, input_mask)`` (B, T - 1, V) against the shifted targets, over the counted
    targets only: their mean (``reduction="mean"``) or sum (``"sum"``, for perplexities over many batches)."""
    if ids.shape[1] < 2:
        raise ValueError(
            f"the loss needs sequences of at least 2 tokens (an input and a target), got {tuple(ids.shape)}"
        )
    if loss_mask is not None and (
        not isinstance(loss_mask, Tensor) or loss_mask.dtype != torch.bool or loss_mask.shape != ids.shape
    ):
        raise ValueError(f"loss_mask must be a boolean tensor of the shape of ids, {tuple(ids.shape)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    inputs, input_mask, targets, counted = shift_targets(ids, mask, loss_mask)
    if not bool(counted.any()):
        raise ValueError("no target counts: every target is padding or outside loss_mask")
    logits = model(inputs, input_mask)  # (B, T - 1, V)
    return F.cross_entropy(logits[counted], targets[counted], reduction=reduction)  # over the N counted targets
