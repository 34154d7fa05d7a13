"""Using a trained translation model, whatever its architecture: greedy outputs decoded to text, its size, and its
translations and BLEU on the course's held-out sets (greedy, or beam search with chapter 9's length penalty).

Every model of the course has the same interface: ``model.generate(src (B, T_x), src_mask (B, T_x), max_len)``
returns greedy tokens (B, L) and its attention weights (B, L, T_x), or None for a model without attention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .._checks import Model
from ..data.batching import length_batches, pad_sequences
from ..data.translation import TranslationData
from ..decoding.search import max_output_length
from .metrics import corpus_bleu

__all__ = ["beam_translations", "count_parameters", "evaluate_bleu", "greedy_translations", "translate"]


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
    from ..decoding.search import beam_search

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
