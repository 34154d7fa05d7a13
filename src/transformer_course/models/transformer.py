"""The Transformer encoder-decoder of "Attention is all you need" (chapter 8), built from the course's pieces.

    source ids (B, T_x) ─ embedding · √d_model + positions ─► EncoderLayer × N ─► memory (B, T_x, d_model)
                                                                                        │ keys and values
    target ids shifted right (B, T_y) ─ embedding · √d_model + positions ─► DecoderLayer × N ─► linear ─► logits

An encoder layer is self-attention then a position-wise feed-forward network; a decoder layer is masked
self-attention, cross-attention (queries from the decoder, keys and values from the memory), then the
feed-forward network. Every sub-layer sits in a residual connection with a LayerNorm: after the sum
("post-norm", the paper's, the default) or before the sub-layer ("pre-norm", ``norm_first=True``, which then
needs one more LayerNorm at the end of each stack, as in ``nn.Transformer``).

The model has the interface of every translation model of the course (``seq2seq.Seq2Seq``,
``bahdanau.AttentionSeq2Seq``), so one training loop trains them all:
``forward(src, src_mask, tgt) -> logits``, where ``tgt`` is the targets followed by <eos> and the model
shifts them right itself, and ``generate(src, src_mask, max_len) -> (tokens, cross-attention weights)``.

Shapes: B batch, T_x source length, T_y target length, d = d_model, h heads, V target vocabulary.
Masks are boolean, True = a real token / may attend. Only keys are ever masked, never queries: every query
keeps at least one key (its sequence's first token), so no softmax row is empty and nothing is NaN. Padding
positions are not computed at all outside attention (``Packing``): they come out as zeros.
The layers are in ``transformer_layers``, their attention in ``packed_attention``; ``transformer_torch`` copies weights to and from ``nn.Transformer`` and holds the tests' reference model.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
from torch import Tensor, nn

from .._checks import check_heads, check_ids, check_values, positive_int
from ..data.batching import shift_right
from .attention import causal_mask
from .incremental import greedy_decode
from .packed_attention import PackedMultiHeadAttention, Packing, unpack
from .positional import PositionalEncoding
from .transformer_layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "PackedMultiHeadAttention",
    "Packing",
    "Transformer",
    "decoder_inputs",
]


def decoder_inputs(tgt: Tensor, bos_id: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """What the decoder reads when it learns to produce tgt (B, T) = y_1 ... y_n <eos> <pad> ... (teacher forcing).

    Returns tgt_in (B, T) = <bos> y_1 ... (the targets shifted right: position t reads y_t and predicts y_{t+1})
    and its self-attention mask (B, 1, T, T): query t may attend key j when j <= t (causal) and tgt_in[:, j]
    is a real token (padding keys hidden; padding queries keep their first key, <bos>).
    """
    tgt_in = shift_right(tgt, bos_id)
    causal = causal_mask(tgt.shape[1], device=tgt.device)  # (T, T)
    return tgt_in, causal & (tgt_in != pad_id)[:, None, None, :]  # (B, 1, T, T)


class Transformer(nn.Module):
    """The encoder-decoder Transformer, with the course's model interface.

    forward(src (B, T_x) int64, src_mask (B, T_x) bool, tgt (B, T_y) int64 = targets + <eos>) -> logits (B, T_y, V)
    encode(src, src_mask) -> memory (B, T_x, d); decode(memory, src_mask, tgt_in, tgt_mask=None) -> logits;
    generate(src, src_mask, max_len) -> greedy tokens (B, L), cross-attention weights (B, L, T_x), L <= max_len.

    tie_embeddings=True shares one matrix between the target embedding and the output layer, and with the
    source embedding too when the vocabularies are one (src_vocab == tgt_vocab). use_sdpa=False computes
    attention with chapter 5's function instead of PyTorch's fused kernel (slower, for teaching and checking).
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 256,
        n_heads: int = 4,
        n_encoder_layers: int = 3,
        n_decoder_layers: int = 3,
        d_ff: int = 1024,
        dropout: float = 0.1,
        norm_first: bool = False,
        tie_embeddings: bool = False,
        max_len: int = 512,
        bos_id: int = 1,
        pad_id: int = 0,
        use_sdpa: bool = True,
    ) -> None:
        super().__init__()
        check_heads(d_model, n_heads, dropout)
        for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
            if positive_int(name, vocab) <= max(bos_id, pad_id):
                raise ValueError(f"{name}={vocab} is too small to hold bos_id={bos_id} and pad_id={pad_id}")
        if bos_id == pad_id:
            raise ValueError(f"bos_id and pad_id must differ, got {bos_id} for both")
        self.config: dict[str, Any] = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            d_model=d_model,
            n_heads=n_heads,
            n_encoder_layers=n_encoder_layers,
            n_decoder_layers=n_decoder_layers,
            d_ff=d_ff,
            dropout=dropout,
            norm_first=norm_first,
            tie_embeddings=tie_embeddings,
            max_len=max_len,
            bos_id=bos_id,
            pad_id=pad_id,
        )
        self.d_model, self.max_len, self.bos_id, self.pad_id = d_model, positive_int("max_len", max_len), bos_id, pad_id
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.src_embed = (
            self.tgt_embed
            if tie_embeddings and src_vocab == tgt_vocab
            else nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        )
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(n_encoder_layers, d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
        self.decoder = Decoder(n_decoder_layers, d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
        self.out = nn.Linear(d_model, tgt_vocab)
        self._reset_parameters()
        if tie_embeddings:
            self.out.weight = self.tgt_embed.weight  # one Parameter: logits are dot products with the embeddings

    def _reset_parameters(self) -> None:
        # Glorot-uniform matrices in the layers, as nn.Transformer; embeddings N(0, 1/d), so that after the
        # scaling by sqrt(d) they are about as large as the positional encoding (and, tied, give logits of order 1).
        for p in (*self.encoder.parameters(), *self.decoder.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for embedding in dict.fromkeys([self.src_embed, self.tgt_embed]):  # once each, in a fixed order
            nn.init.normal_(embedding.weight, std=self.d_model**-0.5)
            with torch.no_grad():
                embedding.weight[self.pad_id].zero_()

    def _embed(self, embedding: nn.Embedding, ids: Tensor) -> Tensor:
        # Scaled by sqrt(d_model) as in the paper (section 3.4), then positions added, then dropout.
        return self.positional(embedding(ids) * math.sqrt(self.d_model))

    def _packing(self, mask: Tensor) -> Packing | None:
        """How the position-wise parts skip padding: only real tokens are computed (see Packing). A subclass
        that returns None computes every position, as a model written plainly does."""
        return Packing(mask)

    def _encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Packing | None]:
        """-> memory, of the real source tokens only (N_x, d) when packed, else (B, T_x, d); its Packing."""
        x, packing = self._embed(self.src_embed, src), self._packing(src_mask)
        x = x if packing is None else packing.pack(x)
        return self.encoder(x, src_mask[:, None, None, :], packing), packing  # mask (B, 1, 1, T_x): padding keys

    def _decode_states(
        self,
        memory: Tensor,
        memory_packing: Packing | None,
        src_mask: Tensor,
        tgt_in: Tensor,
        self_mask: Tensor,
        packing: Packing | None,
    ) -> Tensor:
        """-> the last decoder layer's states, (N_y, d) when packed, else (B, T, d)."""
        y = self._embed(self.tgt_embed, tgt_in)
        y = y if packing is None else packing.pack(y)
        return self.decoder(y, memory, self_mask, src_mask[:, None, None, :], packing, memory_packing)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, T_x) ids, src_mask (B, T_x) bool -> memory (B, T_x, d_model), zero at padding positions."""
        check_ids("src", src, src_mask, "src_mask", self.max_len)
        check_values([("src", src, self.src_vocab)], [("src_mask", src_mask)])
        memory, packing = self._encode(src, src_mask)
        return unpack(memory, packing)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_mask: Tensor | None = None) -> Tensor:
        """memory (B, T_x, d), src_mask (B, T_x), decoder inputs tgt_in (B, T) starting with <bos>, their padding
        mask tgt_mask (B, T) (None: no padding) -> logits (B, T, V), zero at padding positions (they are not
        computed); position t sees tgt_in[:, :t + 1] only."""
        check_ids("tgt_in", tgt_in, tgt_mask, "tgt_mask", self.max_len)
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.shape[2] != self.d_model:
            raise ValueError(
                f"memory must be a tensor (B, T_x, d_model={self.d_model}), got "
                f"{tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__}"
            )
        if not isinstance(src_mask, Tensor) or src_mask.dtype != torch.bool or src_mask.shape != memory.shape[:2]:
            raise ValueError(f"src_mask must be a boolean tensor of shape {tuple(memory.shape[:2])} (B, T_x)")
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]} but memory {memory.shape[0]}")
        check_values(
            [("tgt_in", tgt_in, self.tgt_vocab)],
            [("src_mask", src_mask)] + ([("tgt_mask", tgt_mask)] if tgt_mask is not None else []),
        )
        self_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)  # (T, T)
        packing = None
        if tgt_mask is not None:
            self_mask, packing = self_mask & tgt_mask[:, None, None, :], self._packing(tgt_mask)
        states = self._decode_states(memory, None, src_mask, tgt_in, self_mask, packing)
        return unpack(self.out(states), packing)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits (B, T_y, V) for tgt (B, T_y), the targets followed by <eos> and padding.

        The logits of padding positions (where the decoder's input is <pad>) are not computed: zero."""
        check_ids("src", src, src_mask, "src_mask", self.max_len)
        check_ids("tgt", tgt, None, "", self.max_len)
        if tgt.shape[0] != src.shape[0]:
            raise ValueError(f"src has batch size {src.shape[0]} but tgt {tgt.shape[0]}")
        check_values([("src", src, self.src_vocab), ("tgt", tgt, self.tgt_vocab)], [("src_mask", src_mask)])
        tgt_in, self_mask = decoder_inputs(tgt, self.bos_id, self.pad_id)
        memory, src_packing = self._encode(src, src_mask)
        packing = self._packing(tgt_in != self.pad_id)
        states = self._decode_states(memory, src_packing, src_mask, tgt_in, self_mask, packing)
        return unpack(self.out(states), packing)  # (B, T_y, V)

    @torch.no_grad()
    def generate(
        self, src: Tensor, src_mask: Tensor, max_len: int, eos_id: int | None = 2, use_cache: bool = True
    ) -> tuple[Tensor, Tensor]:
        """Greedy decoding: tokens (B, L) int64, and the last decoder layer's cross-attention weights,
        averaged over heads, at every step (B, L, T_x), L <= max_len. Decoding stops once every sequence
        has written ``eos_id`` (never when it is None); after a sequence's first <eos> its tokens are <eos>
        and its weights zero (the decoders of data/ stop at the first <eos>). With ``use_cache`` (chapter
        9's ``incremental.greedy_decode``) each step computes only the new position, reading earlier keys and
        values from a cache; without it the whole prefix is recomputed at every step, as below: the same
        tokens, more slowly."""
        check_ids("src", src, src_mask, "src_mask", self.max_len)
        if positive_int("max_len", max_len) > self.max_len:
            raise ValueError(f"max_len={max_len} is more than the model's max_len={self.max_len} positions")
        check_values([("src", src, self.src_vocab)], [("src_mask", src_mask)])
        if use_cache:
            return cast("tuple[Tensor, Tensor]", greedy_decode(self, src, src_mask, max_len, eos_id, with_weights=True))
        memory, src_packing = self._encode(src, src_mask)
        last = cast(DecoderLayer, self.decoder.layers[-1])
        stored, last.store_cross_weights = last.store_cross_weights, True
        tokens = torch.full((src.shape[0], 1), self.bos_id, dtype=torch.long, device=src.device)
        weights: list[Tensor] | Tensor  # one (B, T_x) per step, then stacked
        weights = []
        try:
            for _ in range(max_len):
                self_mask = causal_mask(tokens.shape[1], device=tokens.device)  # no padding while generating
                states = self._decode_states(memory, src_packing, src_mask, tokens, self_mask, None)  # (B, t, d)
                next_token = self.out(states[:, -1]).argmax(dim=-1)  # (B,): only the last position is new
                tokens = torch.cat([tokens, next_token[:, None]], dim=1)
                assert last.last_cross_weights is not None  # stored: store_cross_weights is True
                weights.append(last.last_cross_weights[:, :, -1].mean(dim=1))  # (B, T_x)
                if eos_id is not None and bool((tokens[:, 1:] == eos_id).any(dim=1).all()):
                    break
        finally:
            last.store_cross_weights = stored
        tokens, weights = tokens[:, 1:], torch.stack(weights, dim=1)  # (B, L), (B, L, T_x)
        if eos_id is not None:  # as with the cache: after a row's first <eos>, <eos> and no weights
            ended = (tokens == eos_id).long()
            after = ended.cumsum(dim=1) - ended > 0  # (B, L): an <eos> came before this position
            tokens, weights = tokens.masked_fill(after, eos_id), weights.masked_fill(after[..., None], 0.0)
        return tokens, weights
