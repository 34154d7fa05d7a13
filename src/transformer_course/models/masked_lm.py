"""The encoder alone (chapter 10): a masked language model, BERT's objective on the course's English sentences.

    ids (B, T) ─ embedding · √d_model + positions ─► EncoderLayer × N ─► LayerNorm ─► embedding^T ─► logits

GPT reads left to right and predicts the next token; BERT reads the whole sentence at once and recovers tokens
that were hidden from it. The model is chapter 8's encoder (``transformer_layers.Encoder``) with nothing new: its
self-attention gets the padding mask only, no causal mask, so every position reads both sides. The output layer
is the embedding matrix (tied), as in ``language_model.TransformerLM``.

The tokenizer has no mask token, so the model reserves one: ``mask_id`` = V, an embedding row after the
tokenizer's V tokens. It can be read but never predicted: the output layer uses rows 0 .. V - 1 only.

The objective (``mask_tokens``, BERT's recipe): choose ``rate`` (15 %) of each sentence's real tokens, never
<pad>, <bos>, <eos> or <unk>, and at least one per sentence; replace 80 % of the chosen by [MASK], 10 % by a
random token, and leave 10 % unchanged (so that the model cannot tell which visible tokens it will be asked
about); the loss is the cross-entropy of the original token at the chosen positions only (``masked_loss``).
Only those positions go through the output layer, a sixth of what a language model computes there.
``fill_blank`` asks the model for the words that fit the one "____" of a sentence.

``mlm_train`` trains it on the English side of the Tatoeba split and records the run
(``python -m transformer_course.mlm_train --steps N --seed S --out run.json``).

Shapes: B batch, T length, N chosen (target) positions, d = d_model, V the tokenizer's vocabulary. Masks are
boolean, True = a real token; padding goes at the end of each row (right padding).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_ids, positive_int
from ..data.tokenize import BPETokenizer
from .lm_loss import lm_mask
from .packed_attention import Packing, unpack
from .positional import PositionalEncoding
from .transformer_layers import Encoder

__all__ = [
    "BLANK",
    "SPECIAL_IDS",
    "MaskedLM",
    "blank_ids",
    "check_rate",
    "fill_blank",
    "mask_tokens",
    "masked_loss",
    "masked_token_loss",
]

# Never chosen as targets, never drawn as random replacements: the tokenizer's <pad>, <bos>, <eos>, <unk>.
SPECIAL_IDS = (BPETokenizer.pad_id, BPETokenizer.bos_id, BPETokenizer.eos_id, BPETokenizer.unk_id)
BLANK = "____"  # what ``fill_blank`` replaces by [MASK]
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of the chosen tokens; the remaining 10 % stay unchanged


def check_rate(rate: object) -> float:
    """``rate`` as a float if it is a number strictly between 0 and 1, else ValueError."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 < rate < 1.0:
        raise ValueError(f"rate must be a number strictly between 0 and 1 (BERT's is 0.15), got {rate!r}")
    return float(rate)


# The model -------------------------------------------------------------------------------------------------------


class MaskedLM(nn.Module):
    """An encoder-only Transformer that predicts every position's token from both sides.

    forward(ids (B, T) int64 in 0 .. V (V = mask_id), mask (B, T) bool or None) -> logits (B, T, V); without a
    mask the padding is where ids == pad_id. Padding goes at the end of each row; its logits are zero.
    ``logits_at(ids, mask, where)`` computes the output layer at the positions ``where`` (B, T) only: (N, V).
    norm_first=True (the default, as in TransformerLM; BERT itself is post-norm) puts the LayerNorm before each sub-layer and one at the end.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        max_len: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        *,
        pad_id: int = BPETokenizer.pad_id,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id={pad_id} is outside the vocabulary 0 .. {vocab_size - 1}")
        self.config: dict[str, Any] = dict(
            vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
            max_len=max_len, dropout=dropout, norm_first=norm_first, pad_id=pad_id,
        )  # fmt: skip
        self.d_model, self.pad_id, self.mask_id = d_model, pad_id, vocab_size  # [MASK]: the row after the vocabulary
        self.max_len = positive_int("max_len", max_len)
        self.embed = nn.Embedding(vocab_size + 1, d_model, padding_idx=pad_id)  # (V + 1, d): + [MASK]
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        # Chapter 8's encoder, unchanged: N EncoderLayers, and a final LayerNorm when pre-norm.
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))  # (V,); the weight is the embedding's (tied)
        # As TransformerLM: Glorot-uniform matrices in the layers, embeddings N(0, 1/d), the pad row zero.
        for p in self.encoder.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()

    def _mask(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        return lm_mask(ids, mask, self.pad_id, self.vocab_size + 1, self.max_len)  # ids may hold [MASK] = V

    def _states(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Packing]:
        """The final states of the real positions, packed (N_real, d), and their Packing."""
        attn_mask = mask[:, None, None, :]  # (B, 1, 1, T): every query sees every real key, before and after it
        packing = Packing(mask)
        x = packing.pack(self.positional(self.embed(ids) * math.sqrt(self.d_model)))  # (N_real, d)
        return self.encoder(x, attn_mask, packing), packing

    def _logits(self, states: Tensor) -> Tensor:
        """(..., d) -> (..., V): tied to the embedding rows of the vocabulary; [MASK] is never predicted."""
        return F.linear(states, self.embed.weight[: self.vocab_size], self.out_bias)

    def forward(self, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        states, packing = self._states(ids, self._mask(ids, mask))
        return unpack(self._logits(states), packing)  # (B, T, V)

    def logits_at(self, ids: Tensor, mask: Tensor | None, where: Tensor) -> Tensor:
        """The logits of the positions where ``where`` (B, T) bool is True, in row-major order: (N, V)."""
        mask = self._mask(ids, mask)
        if not isinstance(where, Tensor) or where.dtype != torch.bool or where.shape != ids.shape:
            raise ValueError(f"where must be a boolean tensor of the shape of ids, {tuple(ids.shape)}")
        if bool((where & ~mask).any()):
            raise ValueError("where marks a padding position: only real tokens can be predicted")
        states, packing = self._states(ids, mask)
        return self._logits(states[packing.pack(where)])  # (N, V)


# The objective ---------------------------------------------------------------------------------------------------


def mask_tokens(
    ids: Tensor,
    pad_mask: Tensor,
    rate: float,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    *,
    special_ids: Sequence[int] = SPECIAL_IDS,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption of ids (B, T) with padding mask (B, T) (True = real token) -> (corrupted ids (B, T),
    targets (B, T) bool: the chosen positions, whose original token the model must recover).

    Each real token other than ``special_ids`` is chosen with probability ``rate``; a row where none was chosen
    gets one (its candidate with the smallest draw), so that every sentence counts. Of the chosen: 80 % become
    ``mask_id``, 10 % a token drawn uniformly from 0 .. vocab_size - 1 less the specials and ``mask_id``, 10 %
    stay. ``generator`` makes the draw reproducible (the validation positions)."""
    check_ids("ids", ids, pad_mask, "pad_mask", sys.maxsize)  # types and shapes; any length
    rate = check_rate(rate)
    specials = torch.tensor(list(special_ids), dtype=ids.dtype, device=ids.device)
    candidates = pad_mask & ~torch.isin(ids, specials)  # (B, T)
    has_candidate = candidates.any(dim=1)  # (B,)
    if not bool(has_candidate.all()):
        row = int((~has_candidate).nonzero()[0])
        raise ValueError(
            f"row {row} of ids has no real token to mask: only padding and special tokens ({list(special_ids)})"
        )
    regular = torch.tensor(
        [i for i in range(vocab_size) if i not in set(special_ids) and i != mask_id], device=ids.device
    )  # (R,) the tokens a random replacement is drawn from
    if len(regular) == 0:
        raise ValueError(f"vocab_size={vocab_size} leaves no ordinary token to draw random replacements from")
    draw = torch.rand(ids.shape, generator=generator, device=ids.device)  # (B, T): chosen where < rate
    targets = candidates & (draw < rate)
    # A row that drew nothing takes its candidate with the smallest draw (the "most nearly chosen" one).
    first = draw.masked_fill(~candidates, 2.0).argmin(dim=1)  # (B,)
    forced = torch.zeros_like(targets).scatter_(1, first[:, None], True) & ~targets.any(dim=1, keepdim=True)
    targets = targets | forced
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)  # (B, T): which corruption
    random_ids = regular[torch.randint(len(regular), ids.shape, generator=generator, device=ids.device)]  # (B, T)
    corrupted = ids.masked_fill(targets & (kind < MASK_SHARE), mask_id)
    randomised = targets & (kind >= MASK_SHARE) & (kind < MASK_SHARE + RANDOM_SHARE)
    return torch.where(randomised, random_ids, corrupted), targets


def masked_token_loss(
    model: MaskedLM, corrupted: Tensor, pad_mask: Tensor, targets: Tensor, original: Tensor, reduction: str = "mean"
) -> Tensor:
    """Cross-entropy of the original tokens at the target positions, read from the corrupted ids: the mean over
    the N targets (``"mean"``) or their sum (``"sum"``, for figures over many batches)."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if not bool(targets.any()):
        raise ValueError("no target position: nothing to predict")
    logits = model.logits_at(corrupted, pad_mask, targets)  # (N, V)
    return F.cross_entropy(logits, original[targets], reduction=reduction)


def masked_loss(
    model: MaskedLM,
    ids: Tensor,
    pad_mask: Tensor,
    generator: torch.Generator | None = None,
    rate: float = 0.15,
    *,
    special_ids: Sequence[int] = SPECIAL_IDS,
    reduction: str = "mean",
) -> Tensor:
    """The masked-language-model loss of a batch ids (B, T): corrupt it (``mask_tokens``, a fresh draw from
    ``generator``), then the cross-entropy of the original tokens at the chosen positions."""
    corrupted, targets = mask_tokens(
        ids, pad_mask, rate, model.mask_id, model.vocab_size, generator, special_ids=special_ids
    )
    return masked_token_loss(model, corrupted, pad_mask, targets, ids, reduction)


# Filling in a blank ----------------------------------------------------------------------------------------------


def blank_ids(tokenizer: BPETokenizer, text_with_blank: str, mask_id: int) -> tuple[list[int], int]:
    """<bos> pieces [MASK] pieces <eos>, and the position of [MASK]. A space before the blank belongs to the
    masked token, as byte-level BPE attaches a space to the word after it ("I like ____" -> "I", " like", [MASK])."""
    if not isinstance(text_with_blank, str) or text_with_blank.count(BLANK) != 1:
        raise ValueError(f"the text must hold exactly one blank {BLANK!r}, got {text_with_blank!r}")
    left, right = text_with_blank.split(BLANK)
    left = left[:-1] if left.endswith(" ") else left
    before, after = tokenizer.encode(left) if left else [], tokenizer.encode(right) if right else []
    return [tokenizer.bos_id, *before, mask_id, *after, tokenizer.eos_id], len(before) + 1


@torch.no_grad()
def fill_blank(
    model: MaskedLM, tokenizer: BPETokenizer, text_with_blank: str, k: int = 3, whole_word: bool = True
) -> list[tuple[str, float]]:
    """The k most likely single tokens for the one "____" of the text, with their probabilities, most likely
    first: [(" word", p), ...] as the token reads, its leading space included. Special tokens are never ranked.

    [MASK] hides the whole piece, its leading space too, so the model also offers pieces that continue the word
    before ("I ____" -> "'m"). With ``whole_word`` (the default) only the pieces that fit the blank's spacing are
    ranked, and the probabilities renormalised over them: after a space, the pieces that start with one (byte-level
    BPE writes a word after a space as " word"); at the start or after another character, those that do not."""
    positive_int("k", k)
    ids, position = blank_ids(tokenizer, text_with_blank, model.mask_id)
    was_training = model.training
    model.eval()
    x = torch.tensor([ids], device=model.embed.weight.device)  # (1, T)
    where = torch.zeros_like(x, dtype=torch.bool)
    where[0, position] = True
    logits = model.logits_at(x, None, where)[0]  # (V,)
    model.train(was_training)
    texts = [tokenizer.decode([i]) for i in range(len(logits))]  # each token as it reads (specials: "")
    spaced = text_with_blank.split(BLANK)[0].endswith(" ")
    ruled_out = [
        i
        for i, t in enumerate(texts)
        if i in SPECIAL_IDS or not t or (whole_word and t.startswith(" ") != spaced)
    ]  # fmt: skip
    logits[ruled_out] = -math.inf
    top = logits.softmax(dim=-1).topk(min(k, len(logits) - len(ruled_out)))
    return [(texts[i], p) for i, p in zip(top.indices.tolist(), top.values.tolist())]
