"""Using a trained translation model, whatever its architecture: greedy outputs decoded to text, and its size.

Every model of the course has the same interface: ``model.generate(src (B, T_x), src_mask (B, T_x), max_len)``
returns greedy tokens (B, L) and its attention weights (B, L, T_x), or None for a model without attention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ._checks import Model
from .data.batching import length_batches, pad_sequences

__all__ = ["count_parameters", "translate"]


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def translate(
    model: Model,
    src_seqs: Sequence[Sequence[int]],
    tgt_vocab,
    max_len: int | Callable[[int], int],
    batch_size: int = 500,
    pad_id: int = 0,
    return_weights: bool = False,
):
    """Greedy outputs of ``model`` for token-id sequences, decoded to text (and the attention weights if asked).

    The sequences go in batches of similar length, on the model's device. ``max_len`` is the most tokens to
    write, or a function of a batch's longest source length that gives it.
    """
    model.eval()
    device = next(model.parameters()).device
    texts: list[str] = [""] * len(src_seqs)
    weights: list = [None] * len(src_seqs)
    for group in length_batches([len(s) for s in src_seqs], batch_size, shuffle=False):
        src, mask = pad_sequences([src_seqs[i] for i in group], pad_id)
        limit = max_len(src.shape[1]) if callable(max_len) else max_len
        tokens, attn = model.generate(src.to(device), mask.to(device), limit)
        for row, i in enumerate(group):
            texts[i] = tgt_vocab.decode(tokens[row].tolist())
            if attn is not None:
                weights[i] = attn[row, :, : len(src_seqs[i])]
    return (texts, weights) if return_weights else texts
