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
``transformer_torch`` copies weights to and from ``nn.Transformer`` and holds the tests' reference model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import causal_mask, scaled_dot_product_attention
from .multihead import merge_heads, split_heads
from .positional import PositionalEncoding
from .seq2seq import shift_right

__all__ = ["Attention", "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward", "Packing", "Transformer",
           "decoder_inputs"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_sizes(d_model: int, n_heads: int, dropout: float) -> None:
    _positive_int("d_model", d_model)
    _positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}: each head gets d_model / n_heads dimensions")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


class Packing:
    """The real tokens of a padded batch, so that the position-wise parts of a layer skip the padding.

    Everything in a layer but attention treats each position on its own (the projections, the feed-forward
    network, LayerNorm, dropout, the residual sums), so padding positions need not be computed at all:
    ``pack`` keeps the N real positions of a (B, T, ...) tensor as (N, ...), ``unpack`` puts N rows back in
    place, with zeros at the padding. Only attention needs the (B, T) layout: it unpacks its queries, keys and
    values and packs its output. With a third of the positions padding, a training step does about a third
    fewer multiply-adds (nn.TransformerEncoder skips padding too, with nested tensors, but only in inference).
    """

    def __init__(self, mask: Tensor) -> None:  # (B, T) bool, True = real token
        self.shape = tuple(mask.shape)
        flat = mask.flatten()
        self.index = None if bool(flat.all()) else flat.nonzero().squeeze(1)  # (N,) positions in the flat (B T)

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...)"""
        return x.flatten(0, 1) if self.index is None else x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zeros at padding positions"""
        if self.index is not None:
            x = x.new_zeros(self.shape[0] * self.shape[1], *x.shape[1:]).index_copy(0, self.index, x)
        return x.unflatten(0, self.shape)


def _unpack(x: Tensor, packing: Packing | None) -> Tensor:
    return x if packing is None else packing.unpack(x)


class Attention(nn.Module):
    """Multi-head attention (chapter 6) with W_Q, W_K and W_V fused into one (3 d, d) matrix ``w_qkv``.

    Self-attention projects its input with the whole matrix: one matrix product instead of three.
    Cross-attention projects the decoder's states with the W_Q rows and the memory with the W_K, W_V rows.
    The rows are stacked as in ``nn.MultiheadAttention.in_proj_weight``, so weights copy across unchanged.
    The projections are methods of their own so that a key/value cache (chapter 9) can keep k and v and
    project only new positions; ``attend`` does the rest.

    forward(x (B, T_q, d), memory (B, T_k, d) or None for self-attention, mask broadcastable to
    (B, h, T_q, T_k) or None, need_weights) -> (output (B, T_q, d), weights (B, h, T_q, T_k) or None).
    Given a Packing of the queries (of the memory), x (memory) is packed, (N_q, d), and so is the output.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, use_sdpa: bool = True) -> None:
        super().__init__()
        _check_sizes(d_model, n_heads, dropout)
        self.d_model, self.n_heads = d_model, n_heads
        self.w_qkv = nn.Linear(d_model, 3 * d_model)  # rows: W_Q, then W_K, then W_V
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout  # on the attention weights, while training (as nn.MultiheadAttention does)
        self.use_sdpa = use_sdpa

    def project_qkv(self, x: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, d) -> q, k, v, each (B, h, T, d_k), from one matrix product."""
        qkv = _unpack(self.w_qkv(x), packing)  # (B, T, 3 d)
        return tuple(split_heads(t, self.n_heads) for t in qkv.chunk(3, dim=-1))

    def project_q(self, x: Tensor, packing: Packing | None = None) -> Tensor:
        """x (B, T_q, d) -> q (B, h, T_q, d_k), with the W_Q rows of w_qkv."""
        d = self.d_model
        return split_heads(_unpack(F.linear(x, self.w_qkv.weight[:d], self.w_qkv.bias[:d]), packing), self.n_heads)

    def project_kv(self, memory: Tensor, packing: Packing | None = None) -> tuple[Tensor, Tensor]:
        """memory (B, T_k, d) -> k, v, each (B, h, T_k, d_k), with the W_K and W_V rows of w_qkv."""
        d = self.d_model
        kv = _unpack(F.linear(memory, self.w_qkv.weight[d:], self.w_qkv.bias[d:]), packing)  # (B, T_k, 2 d)
        return tuple(split_heads(t, self.n_heads) for t in kv.chunk(2, dim=-1))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, need_weights: bool = False,
               packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        """Attention over heads already split, then merge and W_O: -> (B, T_q, d), weights or None."""
        p = self.dropout if self.training else 0.0
        if self.use_sdpa and not need_weights:
            # PyTorch's fused kernel never materialises the weights; its boolean masks also mean True = may attend.
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, mask)  # chapter 5's, which returns the weights
            if p:
                out = F.dropout(weights, p) @ v  # dropout on the weights, as the fused kernel does
        out = merge_heads(out)  # (B, T_q, d)
        return self.w_o(out if packing is None else packing.pack(out)), weights

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        if memory is None:
            q, k, v = self.project_qkv(x, packing)
        else:
            q, (k, v) = self.project_q(x, packing), self.project_kv(memory, memory_packing)
        return self.attend(q, k, v, mask, need_weights, packing)


class FeedForward(nn.Module):
    """The position-wise feed-forward network, Linear(d, d_ff), ReLU, Linear(d_ff, d): (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, _positive_int("d_ff", d_ff))
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class _Layer(nn.Module):
    """What encoder and decoder layers share: the residual connection around each sub-layer."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        _check_sizes(d_model, n_heads, dropout)
        self.norm_first = norm_first
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ff_norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # on each sub-layer's output, before it joins the residual stream

    def residual(self, x: Tensor, sublayer, norm: nn.LayerNorm) -> Tensor:
        if self.norm_first:  # x + sublayer(norm(x)): the residual stream itself is never normalised
            return x + self.dropout(sublayer(norm(x)))
        return norm(x + self.dropout(sublayer(x)))  # the paper's: normalise after the sum


class EncoderLayer(_Layer):
    """Self-attention, then the feed-forward network, each in a residual connection with a LayerNorm.

    forward(x (B, T_x, d), mask broadcastable to (B, h, T_x, T_x), e.g. (B, 1, 1, T_x), or None) -> (B, T_x, d);
    given a Packing of the positions, x and the output are packed, (N, d).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 use_sdpa: bool = True) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = Attention(d_model, n_heads, dropout, use_sdpa)
        self.self_attn_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, mask: Tensor | None = None, packing: Packing | None = None) -> Tensor:
        x = self.residual(x, lambda h: self.self_attn(h, mask=mask, packing=packing)[0], self.self_attn_norm)
        return self.residual(x, self.ff, self.ff_norm)


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention over the memory, then the feed-forward network.

    forward(y (B, T_y, d), memory (B, T_x, d), self_mask broadcastable to (B, h, T_y, T_y) (causal and target
    padding), memory_mask broadcastable to (B, h, T_y, T_x) (source padding)) -> (B, T_y, d).
    With ``store_cross_weights = True`` the layer keeps the cross-attention weights of its last call in
    ``last_cross_weights`` (B, h, T_y, T_x), for attention maps (computed without the fused kernel then).
    Given Packings of the target and source positions, y, memory and the output are packed.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 use_sdpa: bool = True) -> None:
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = Attention(d_model, n_heads, dropout, use_sdpa)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.cross_attn = Attention(d_model, n_heads, dropout, use_sdpa)
        self.cross_attn_norm = nn.LayerNorm(d_model)
        self.store_cross_weights = False
        self.last_cross_weights: Tensor | None = None

    def _cross(self, y: Tensor, memory: Tensor, mask: Tensor | None, packing: Packing | None,
               memory_packing: Packing | None) -> Tensor:
        out, weights = self.cross_attn(y, memory, mask, self.store_cross_weights, packing, memory_packing)  # queries: y
        if self.store_cross_weights:
            self.last_cross_weights = weights
        return out

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> Tensor:
        y = self.residual(y, lambda h: self.self_attn(h, mask=self_mask, packing=packing)[0], self.self_attn_norm)
        y = self.residual(y, lambda h: self._cross(h, memory, memory_mask, packing, memory_packing), self.cross_attn_norm)
        return self.residual(y, self.ff, self.ff_norm)


class Encoder(nn.Module):
    """N encoder layers, and for pre-norm a final LayerNorm: (B, T_x, d), mask -> memory (B, T_x, d)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, use_sdpa: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
                                    for _ in range(_positive_int("n_encoder_layers", n_layers)))
        # Pre-norm layers only ever add to the residual stream: normalise it once, at the end.
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None = None, packing: Packing | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, packing)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N decoder layers, and for pre-norm a final LayerNorm: (B, T_y, d), memory, masks -> (B, T_y, d)."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False, use_sdpa: bool = True) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, use_sdpa)
                                    for _ in range(_positive_int("n_decoder_layers", n_layers)))
        self.norm = nn.LayerNorm(d_model) if norm_first else None

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                packing: Packing | None = None, memory_packing: Packing | None = None) -> Tensor:
        for layer in self.layers:
            y = layer(y, memory, self_mask, memory_mask, packing, memory_packing)
        return y if self.norm is None else self.norm(y)


def _check_ids(name: str, ids: object, mask: object, mask_name: str, max_len: int) -> None:
    """Types and shapes, checked before anything runs, so that a mistake gets a message instead of a traceback."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        what = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be an int64 tensor of token ids (B, T), got {what}")
    if ids.dim() != 2 or 0 in ids.shape:
        raise ValueError(f"{name} must have shape (B, T) with B, T >= 1, got {tuple(ids.shape)}")
    if ids.shape[1] > max_len:
        raise ValueError(f"{name} has {ids.shape[1]} positions, more than the model's max_len={max_len}")
    if mask is None:
        return
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        what = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{mask_name} must be a boolean tensor (True = real token), got {what}")
    if mask.shape != ids.shape:
        raise ValueError(f"{mask_name} must have the shape of {name}, {tuple(ids.shape)}, got {tuple(mask.shape)}")


def _check_values(ids: list[tuple[str, Tensor, int]], masks: list[tuple[str, Tensor]] = ()) -> None:
    """Token ids in [0, V), and at least one real token in every row of each mask: one transfer for all checks."""
    stats = [s for _, x, _ in ids for s in (x.min(), x.max())] + [m.any(dim=1).all().long() for _, m in masks]
    values = torch.stack(stats).tolist()
    for i, (name, _, vocab) in enumerate(ids):
        low, high = values[2 * i], values[2 * i + 1]
        if low < 0 or high >= vocab:
            raise ValueError(f"{name} holds token ids from {low} to {high}, outside the vocabulary 0 .. {vocab - 1}")
    for (name, _), nonempty in zip(masks, values[2 * len(ids):]):
        if not nonempty:
            raise ValueError(f"every sequence needs at least one real token, but a row of {name} is all False")


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

    # Compute the position-wise parts on real tokens only (see Packing); False computes every position, so that
    # whole outputs, padding positions included, can be compared with a model that does (the grader's).
    skip_padding = True

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 256, n_heads: int = 4, n_encoder_layers: int = 3,
                 n_decoder_layers: int = 3, d_ff: int = 1024, dropout: float = 0.1, norm_first: bool = False,
                 tie_embeddings: bool = False, max_len: int = 512, bos_id: int = 1, pad_id: int = 0,
                 use_sdpa: bool = True) -> None:
        super().__init__()
        _check_sizes(d_model, n_heads, dropout)
        for name, vocab in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab)):
            if _positive_int(name, vocab) <= max(bos_id, pad_id):
                raise ValueError(f"{name}={vocab} is too small to hold bos_id={bos_id} and pad_id={pad_id}")
        if bos_id == pad_id:
            raise ValueError(f"bos_id and pad_id must differ, got {bos_id} for both")
        self.config = dict(src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=d_model, n_heads=n_heads,
                           n_encoder_layers=n_encoder_layers, n_decoder_layers=n_decoder_layers, d_ff=d_ff,
                           dropout=dropout, norm_first=norm_first, tie_embeddings=tie_embeddings, max_len=max_len,
                           bos_id=bos_id, pad_id=pad_id)
        self.d_model, self.max_len, self.bos_id, self.pad_id = d_model, _positive_int("max_len", max_len), bos_id, pad_id
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.src_embed = self.tgt_embed if tie_embeddings and src_vocab == tgt_vocab else \
            nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
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
        return Packing(mask) if self.skip_padding else None

    def _encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Packing | None]:
        """-> memory, of the real source tokens only (N_x, d) when packed, else (B, T_x, d); its Packing."""
        x, packing = self._embed(self.src_embed, src), self._packing(src_mask)
        x = x if packing is None else packing.pack(x)
        return self.encoder(x, src_mask[:, None, None, :], packing), packing  # mask (B, 1, 1, T_x): padding keys

    def _decode_states(self, memory: Tensor, memory_packing: Packing | None, src_mask: Tensor, tgt_in: Tensor,
                       self_mask: Tensor, packing: Packing | None) -> Tensor:
        """-> the last decoder layer's states, (N_y, d) when packed, else (B, T, d)."""
        y = self._embed(self.tgt_embed, tgt_in)
        y = y if packing is None else packing.pack(y)
        return self.decoder(y, memory, self_mask, src_mask[:, None, None, :], packing, memory_packing)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, T_x) ids, src_mask (B, T_x) bool -> memory (B, T_x, d_model), zero at padding positions."""
        _check_ids("src", src, src_mask, "src_mask", self.max_len)
        _check_values([("src", src, self.src_vocab)], [("src_mask", src_mask)])
        memory, packing = self._encode(src, src_mask)
        return _unpack(memory, packing)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_mask: Tensor | None = None) -> Tensor:
        """memory (B, T_x, d), src_mask (B, T_x), decoder inputs tgt_in (B, T) starting with <bos>, their padding
        mask tgt_mask (B, T) (None: no padding) -> logits (B, T, V), zero at padding positions (they are not
        computed); position t sees tgt_in[:, :t + 1] only."""
        _check_ids("tgt_in", tgt_in, tgt_mask, "tgt_mask", self.max_len)
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.shape[2] != self.d_model:
            raise ValueError(f"memory must be a tensor (B, T_x, d_model={self.d_model}), got "
                             f"{tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__}")
        if not isinstance(src_mask, Tensor) or src_mask.dtype != torch.bool or src_mask.shape != memory.shape[:2]:
            raise ValueError(f"src_mask must be a boolean tensor of shape {tuple(memory.shape[:2])} (B, T_x)")
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in has batch size {tgt_in.shape[0]} but memory {memory.shape[0]}")
        _check_values([("tgt_in", tgt_in, self.tgt_vocab)],
                      [("src_mask", src_mask)] + ([("tgt_mask", tgt_mask)] if tgt_mask is not None else []))
        self_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)  # (T, T)
        packing = None
        if tgt_mask is not None:
            self_mask, packing = self_mask & tgt_mask[:, None, None, :], self._packing(tgt_mask)
        states = self._decode_states(memory, None, src_mask, tgt_in, self_mask, packing)
        return _unpack(self.out(states), packing)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits (B, T_y, V) for tgt (B, T_y), the targets followed by <eos> and padding.

        The logits of padding positions (where the decoder's input is <pad>) are not computed: zero
        (unless skip_padding is False)."""
        _check_ids("src", src, src_mask, "src_mask", self.max_len)
        _check_ids("tgt", tgt, None, "", self.max_len)
        if tgt.shape[0] != src.shape[0]:
            raise ValueError(f"src has batch size {src.shape[0]} but tgt {tgt.shape[0]}")
        _check_values([("src", src, self.src_vocab), ("tgt", tgt, self.tgt_vocab)], [("src_mask", src_mask)])
        tgt_in, self_mask = decoder_inputs(tgt, self.bos_id, self.pad_id)
        memory, src_packing = self._encode(src, src_mask)
        packing = self._packing(tgt_in != self.pad_id)
        states = self._decode_states(memory, src_packing, src_mask, tgt_in, self_mask, packing)
        return _unpack(self.out(states), packing)  # (B, T_y, V)

    @torch.no_grad()
    def generate(self, src: Tensor, src_mask: Tensor, max_len: int, eos_id: int | None = 2,
                 use_cache: bool = True) -> tuple[Tensor, Tensor]:
        """Greedy decoding: tokens (B, L) int64, and the last decoder layer's cross-attention weights,
        averaged over heads, at every step (B, L, T_x), L <= max_len. Decoding stops once every sequence
        has written ``eos_id`` (never when it is None); after a sequence's first <eos> its tokens are <eos>
        and its weights zero (the decoders of data/ stop at the first <eos>). With ``use_cache`` (chapter
        9's ``decoding.greedy_decode``) each step computes only the new position, reading earlier keys and
        values from a cache; without it the whole prefix is recomputed at every step, as below: the same
        tokens, more slowly."""
        _check_ids("src", src, src_mask, "src_mask", self.max_len)
        if _positive_int("max_len", max_len) > self.max_len:
            raise ValueError(f"max_len={max_len} is more than the model's max_len={self.max_len} positions")
        _check_values([("src", src, self.src_vocab)], [("src_mask", src_mask)])
        if use_cache:
            from .decoding import greedy_decode

            return greedy_decode(self, src, src_mask, max_len, eos_id, with_weights=True)
        memory, src_packing = self._encode(src, src_mask)
        last = self.decoder.layers[-1]
        stored, last.store_cross_weights = last.store_cross_weights, True
        tokens = torch.full((src.shape[0], 1), self.bos_id, dtype=torch.long, device=src.device)
        weights = []
        try:
            for _ in range(max_len):
                self_mask = causal_mask(tokens.shape[1], device=tokens.device)  # no padding while generating
                states = self._decode_states(memory, src_packing, src_mask, tokens, self_mask, None)  # (B, t, d)
                next_token = self.out(states[:, -1]).argmax(dim=-1)  # (B,): only the last position is new
                tokens = torch.cat([tokens, next_token[:, None]], dim=1)
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
