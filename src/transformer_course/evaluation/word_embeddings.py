"""What a trained embedding has learnt (chapter 3): nearest neighbours by cosine similarity.

An embedding is a table of vectors, one row per token: (V, d). Training moves rows that the model uses alike
towards each other, so a token's nearest rows say what the model treats it like. These functions measure that on
any embedding matrix, in float64, so that the ranking does not depend on the processor's rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["cosine_to", "group_share", "nearest", "rank_of", "word_piece"]


def word_piece(tokenizer, word: str) -> int | None:
    """The id of ``word`` as one BPE piece where it stands inside a sentence (after a space), or None when the
    tokenizer splits it into several pieces."""
    before = tokenizer.encode("I")
    ids = tokenizer.encode("I " + word)
    piece = ids[len(before) :]
    return piece[0] if len(piece) == 1 and ids[: len(before)] == before else None


def cosine_to(embedding: Tensor, index: int) -> Tensor:
    """(V,) float64: the cosine similarity of every row of ``embedding`` (V, d) with row ``index``."""
    if not 0 <= index < embedding.shape[0]:
        raise IndexError(f"row {index} of an embedding of {embedding.shape[0]} rows")
    rows = torch.nn.functional.normalize(embedding.detach().double(), dim=1)  # (V, d), unit length
    return rows @ rows[index]


def _to_the_others(embedding: Tensor, index: int) -> Tensor:
    """``cosine_to`` with row ``index`` itself left out (-inf): a row is not its own neighbour."""
    sims = cosine_to(embedding, index)
    sims[index] = -float("inf")
    return sims


def nearest(embedding: Tensor, index: int, k: int = 5) -> tuple[list[int], list[float]]:
    """The ``k`` rows most similar to row ``index`` (itself left out), most similar first, with their cosines."""
    top = _to_the_others(embedding, index).topk(k)
    return top.indices.tolist(), top.values.tolist()


def rank_of(embedding: Tensor, index: int, other: int) -> int:
    """Where row ``other`` comes among the neighbours of row ``index``: 1 for the nearest (itself left out)."""
    sims = _to_the_others(embedding, index)
    return int((sims > sims[other]).sum().item()) + 1


def group_share(embedding: Tensor, group: list[int], k: int = 5) -> float:
    """Of the ``k`` nearest neighbours of each member of ``group``, the share that are members too. By chance it
    would be about (len(group) - 1) / V."""
    if len(group) < 2:
        raise ValueError("a group needs two members at least")
    members = set(group)
    hits = sum(sum(j in members for j in nearest(embedding, i, k)[0]) for i in group)
    return hits / (k * len(group))
