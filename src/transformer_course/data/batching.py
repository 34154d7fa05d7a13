"""Padding, masks and batches of similar lengths.

Masks follow the course convention: boolean, ``True`` at a real token, ``False`` at padding.
A target sequence ``y`` becomes ``y + <eos>``; the decoder's inputs (``<bos>`` followed by the target
shifted right by one, ``shift_right``: teacher forcing, chapter 3) are made by the models themselves, so that
every model of the course, recurrent or not, reads the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Batch", "length_batches", "make_batch", "make_batches", "pad_sequences", "shift_right", "token_batches"]


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """(ids (B, T) int64, mask (B, T) bool) for sequences padded on the right to the longest one."""
    if not seqs:
        raise ValueError("cannot pad an empty list of sequences")
    t = max(len(s) for s in seqs)
    if t == 0:
        raise ValueError("every sequence is empty")
    lengths = torch.tensor([len(s) for s in seqs])  # (B,)
    mask = torch.arange(t) < lengths[:, None]  # (B, T): True at the first len(s) positions of row s
    ids = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    # One tensor from all the tokens, written through the mask in row-major order: a tensor per row made
    # loading the Tatoeba batches take 10 s of a notebook's start.
    ids[mask] = torch.tensor([token for s in seqs for token in s], dtype=torch.long)
    return ids, mask


@dataclass
class Batch:
    """src (B, T_x), src_mask (B, T_x), tgt (B, T_y) = target + <eos>, tgt_mask (B, T_y); True = real token."""

    src: Tensor
    src_mask: Tensor
    tgt: Tensor
    tgt_mask: Tensor

    def __len__(self) -> int:
        return self.src.shape[0]

    def to(self, device) -> Batch:
        return Batch(*(t.to(device) for t in (self.src, self.src_mask, self.tgt, self.tgt_mask)))


def make_batch(src_seqs: Sequence[Sequence[int]], tgt_seqs: Sequence[Sequence[int]], pad_id: int, eos_id: int) -> Batch:
    if len(src_seqs) != len(tgt_seqs):
        raise ValueError(f"{len(src_seqs)} sources but {len(tgt_seqs)} targets")
    src, src_mask = pad_sequences(src_seqs, pad_id)
    tgt, tgt_mask = pad_sequences([list(t) + [eos_id] for t in tgt_seqs], pad_id)
    return Batch(src, src_mask, tgt, tgt_mask)


def length_batches(lengths: Sequence[int], batch_size: int, shuffle: bool = True, seed: int = 0) -> list[list[int]]:
    """Indices grouped into batches of similar length, so that little of each batch is padding.

    The indices are sorted by length (ties broken at random when shuffling), cut into batches of
    ``batch_size``, and the order of the batches is shuffled.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])  # stable: equal lengths keep their shuffled order
    groups = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(groups)
    return groups


def make_batches(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    batch_size: int,
    pad_id: int,
    eos_id: int,
    shuffle: bool = True,
    seed: int = 0,
) -> list[Batch]:
    """Padded batches of pairs of similar source length."""
    groups = length_batches([len(s) for s in src_seqs], batch_size, shuffle, seed)
    return [make_batch([src_seqs[i] for i in g], [tgt_seqs[i] for i in g], pad_id, eos_id) for g in groups]


def token_batches(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    max_tokens: int,
    pad_id: int,
    eos_id: int,
    shuffle: bool = True,
    seed: int = 0,
) -> list[Batch]:
    """Batches by token count, as in the Transformer paper: pairs sorted by length, and each batch as many
    pairs as fit in ``max_tokens`` counting padding (B * max(T_x, T_y + 1) <= max_tokens), so short
    sentences come in big batches and long ones in small. The order of the batches is shuffled."""
    if len(src_seqs) != len(tgt_seqs):
        raise ValueError(f"{len(src_seqs)} sources but {len(tgt_seqs)} targets")
    rng = random.Random(seed)
    order = list(range(len(src_seqs)))
    if shuffle:
        rng.shuffle(order)
    size = [max(len(src_seqs[i]), len(tgt_seqs[i]) + 1) for i in range(len(src_seqs))]  # +1: the <eos>
    order.sort(key=lambda i: (len(src_seqs[i]), len(tgt_seqs[i])))
    groups: list[list[int]] = []
    group: list[int] = []
    longest = 0
    for i in order:
        if size[i] > max_tokens:
            raise ValueError(f"pair {i} has {size[i]} tokens, more than max_tokens={max_tokens}")
        if group and max(longest, size[i]) * (len(group) + 1) > max_tokens:
            groups.append(group)
            group, longest = [], 0
        group.append(i)
        longest = max(longest, size[i])
    if group:
        groups.append(group)
    if shuffle:
        rng.shuffle(groups)
    return [make_batch([src_seqs[i] for i in g], [tgt_seqs[i] for i in g], pad_id, eos_id) for g in groups]


def shift_right(targets: Tensor, bos_id: int) -> Tensor:
    """Decoder inputs for teacher forcing: <bos> followed by the targets without their last token."""
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([bos, targets[:, :-1]], dim=1)
