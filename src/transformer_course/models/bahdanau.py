"""Additive (Bahdanau) attention and the attention decoder (chapter 4).

At every decoder step the previous decoder state s scores every encoder state h_j with

    e_j = v^T tanh(W s + U h_j),

a softmax turns the scores into weights alpha_j that sum to one (padding gets weight 0), and the
context c = sum_j alpha_j h_j is fed to the decoder together with the previous token
{cite}`bahdanau2015neural`. Luong's multiplicative score e_j = s^T W h_j is included for comparison.

Shapes: B batch, T source length, H_dec decoder state size, H_enc encoder state size, A attention size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import shift_right
from .seq2seq import Encoder

__all__ = [
    "AttentionDecoderStep",
    "AttentionSeq2Seq",
    "BidirectionalEncoder",
    "additive_score",
    "attention_context",
    "gru_update",
    "multiplicative_score",
]


def additive_score(s: Tensor, h: Tensor, W: Tensor, U: Tensor, v: Tensor) -> Tensor:
    """e[b, j] = v . tanh(W s[b] + U h[b, j]).

    s (B, H_dec), h (B, T, H_enc), W (A, H_dec), U (A, H_enc), v (A,) -> scores (B, T)
    """
    query = s @ W.T  # (B, A)
    keys = h @ U.T  # (B, T, A)
    return torch.tanh(query[:, None, :] + keys) @ v  # (B, T)


def multiplicative_score(s: Tensor, h: Tensor, W: Tensor) -> Tensor:
    """Luong's 'general' score e[b, j] = s[b]^T W h[b, j]. s (B, H_dec), h (B, T, H_enc), W (H_dec, H_enc) -> (B, T)."""
    return ((h @ W.T) @ s[:, :, None]).squeeze(-1)


def attention_context(scores: Tensor, h: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention weights over the source positions and the context vector.

    scores (B, T), h (B, T, H_enc), mask (B, T) bool, True at real tokens
    -> context (B, H_enc) = sum_j weights[:, j] h[:, j], weights (B, T) summing to one over j.
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # padding gets exactly zero weight
    weights = torch.softmax(scores, dim=-1)  # over the source positions, not the batch
    context = (weights[:, :, None] * h).sum(dim=1)  # (B, H_enc)
    return context, weights


def gru_update(from_input: Tensor, from_state: Tensor, s: Tensor) -> Tensor:
    """The new state of a GRU cell from its two projections, as nn.GRUCell computes it.

    from_input = W_ih x + b_ih (B, 3H), from_state = W_hh s + b_hh (B, 3H), s (B, H) -> (B, H); the three
    blocks of 3H are the reset gate r, the update gate z and the candidate n, in nn.GRUCell's order.
    """
    i_r, i_z, i_n = from_input.chunk(3, dim=-1)
    h_r, h_z, h_n = from_state.chunk(3, dim=-1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (s - n)  # = (1 - z) * n + z * s


class BidirectionalEncoder(nn.Module):
    """Bahdanau's encoder: a GRU reads the source left to right, another right to left.

    src (B, T_x) token ids, src_mask (B, T_x) bool -> states (B, T_x, 2H), s0 (B, H)
    The state at position j is [forward_j, backward_j]: forward_j has read x_1..x_j, backward_j has read
    x_j..x_T (the words after j too), so the annotation of a word sums up the whole sentence around it
    {cite}`bahdanau2015neural`. Padding is packed away, so the backward GRU starts at each sequence's last
    real token, not at its padding. The decoder starts from s0 = tanh(W [forward_T, backward_1]): both
    directions' final states through a small learned layer.
    """

    def __init__(self, vocab_size: int, d_emb: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True, bidirectional=True)  # nn.GRU's own weight names
        self.init = nn.Linear(2 * d_hidden, d_hidden)  # [forward_T, backward_1] -> the decoder's first state

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        lengths = src_mask.long().sum(dim=1)  # (B,)
        if bool((lengths == 0).any()):
            raise ValueError("every sequence needs at least one real token")
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, final = self.rnn(packed)  # final (2, B, H): forward after x_T, backward after x_1
        states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        s0 = torch.tanh(self.init(torch.cat([final[0], final[1]], dim=-1)))  # (B, H)
        return states, s0  # (B, T_x, 2H) with zeros at padding, (B, H)


class AttentionDecoderStep(nn.Module):
    """One decoder step with additive attention.

    y_prev (B,) ids, s (B, H) previous state, h (B, T, H_enc) encoder states, mask (B, T)
    -> logits (B, V), s_new (B, H), weights (B, T)

    The previous state s queries the encoder states; the context and the embedded previous token
    go into the GRU cell; the output layer sees the new state and the context. With ``d_readout``,
    the output goes through a smaller tanh layer first, as in Bahdanau's readout (this keeps the
    big V-wide layer cheap for an 8,000-token vocabulary), and ``tie=True`` then shares the output
    layer's weight with the target embedding (d_readout must equal d_emb).
    """

    def __init__(
        self,
        vocab_size: int,
        d_emb: int,
        d_hidden: int,
        d_enc: int,
        d_att: int,
        d_readout: int | None = None,
        tie: bool = False,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.W = nn.Linear(d_hidden, d_att, bias=False)
        self.U = nn.Linear(d_enc, d_att, bias=False)
        self.v = nn.Linear(d_att, 1, bias=False)
        self.cell = nn.GRUCell(d_emb + d_enc, d_hidden)
        if d_readout is None:
            if tie:
                raise ValueError("tie=True needs a readout layer of size d_emb (d_readout=d_emb)")
            self.readout = None
            self.out = nn.Linear(d_hidden + d_enc, vocab_size)
        else:
            if tie and d_readout != d_emb:
                raise ValueError(
                    f"to tie the output layer to the embedding, d_readout ({d_readout}) must equal d_emb ({d_emb})"
                )
            self.readout = nn.Linear(d_hidden + d_enc, d_readout)
            self.out = nn.Linear(d_readout, vocab_size)
            if tie:
                self.out.weight = self.embedding.weight

    def attend(
        self, y_prev: Tensor, s: Tensor, h: Tensor, mask: Tensor | None = None, keys: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The step without its output layer: (s_new (B, H), context (B, H_enc), weights (B, T)).

        ``keys`` = self.U(h) may be passed in precomputed: it does not change from step to step.
        """
        if keys is None:
            scores = additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])  # (B, T)
        else:
            scores = torch.tanh(self.W(s)[:, None, :] + keys) @ self.v.weight[0]  # the same, faster
        context, weights = attention_context(scores, h, mask)  # (B, H_enc), (B, T)
        s_new = self.cell(torch.cat([self.embedding(y_prev), context], dim=-1), s)  # (B, H)
        return s_new, context, weights

    def project(self, s_new: Tensor, context: Tensor) -> Tensor:
        """Logits (..., V) from the new state (..., H) and the context (..., H_enc)."""
        features = torch.cat([s_new, context], dim=-1)
        if self.readout is not None:
            features = torch.tanh(self.readout(features))
        return self.out(features)

    def forward(
        self, y_prev: Tensor, s: Tensor, h: Tensor, mask: Tensor | None = None, keys: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        s_new, context, weights = self.attend(y_prev, s, h, mask, keys)
        return self.project(s_new, context), s_new, weights


class AttentionSeq2Seq(nn.Module):
    """The encoder of chapter 3 with an attention decoder: every encoder state stays available at every step.

    ``bidirectional=True`` swaps in Bahdanau's BidirectionalEncoder: the attention's keys and values, the
    context that the GRU cell and the output layer read, are then its 2H-wide states.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_emb: int = 32,
        d_hidden: int = 128,
        d_att: int = 64,
        bos_id: int = 1,
        d_readout: int | None = None,
        tie: bool = False,
        eos_id: int = 2,
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        if bidirectional:
            self.encoder: nn.Module = BidirectionalEncoder(src_vocab, d_emb, d_hidden)
        else:
            self.encoder = Encoder(src_vocab, d_emb, d_hidden)
        d_enc = 2 * d_hidden if bidirectional else d_hidden
        self.decoder = AttentionDecoderStep(tgt_vocab, d_emb, d_hidden, d_enc, d_att, d_readout, tie)
        self.bos_id, self.eos_id = bos_id, eos_id

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced logits (B, T_y, V) and attention weights (B, T_y, T_x).

        The same numbers as calling ``self.decoder.attend`` at every step (tested), arranged to train faster:
        every step's embedding lookup and the embedding's share of the GRU's input projection are done at
        once before the loop, and the output layer once after it. Only what depends on the previous state
        stays in the loop: the query, the attention, the context's share of the input and the GRU update.
        """
        h, s = self.encoder(src, src_mask)  # (B, T_x, H_enc), (B, H)
        dec, cell = self.decoder, self.decoder.cell
        keys = dec.U(h)  # (B, T_x, A), computed once
        emb = dec.embedding(shift_right(tgt, self.bos_id))  # (B, T_y, E)
        d_emb = emb.shape[-1]
        # The GRU's input is [embedding, context]; its input projection splits into those two parts.
        from_tokens = F.linear(emb, cell.weight_ih[:, :d_emb], cell.bias_ih)  # (B, T_y, 3H)
        w_context = cell.weight_ih[:, d_emb:]  # (3H, H_enc)
        v = dec.v.weight[0]  # (A,)
        states, contexts, weights = [], [], []
        for t in range(tgt.shape[1]):
            scores = torch.tanh(dec.W(s)[:, None, :] + keys) @ v  # (B, T_x)
            c, w = attention_context(scores, h, src_mask)  # (B, H_enc), (B, T_x)
            s = gru_update(from_tokens[:, t] + F.linear(c, w_context), F.linear(s, cell.weight_hh, cell.bias_hh), s)
            states.append(s)
            contexts.append(c)
            weights.append(w)
        # The output layer runs once over all steps: one big matrix product instead of T_y small ones.
        logits = dec.project(torch.stack(states, dim=1), torch.stack(contexts, dim=1))  # (B, T_y, V)
        return logits, torch.stack(weights, dim=1)

    @torch.no_grad()
    def generate(self, src: Tensor, src_mask: Tensor, max_len: int) -> tuple[Tensor, Tensor]:
        """Greedy tokens (B, L) and the attention weights (B, L, T_x) of every step, L <= max_len.

        Decoding stops early once every sequence has written <eos>. A sequence that has written it leaves
        the batch, so that the decoder steps only the rows still writing; its remaining positions hold <eos>
        and zero weights.
        """
        h, s = self.encoder(src, src_mask)  # (B, T_x, H_enc), (B, H)
        keys = self.decoder.U(h)  # (B, T_x, d_att)
        B, T_x = src.shape
        tokens = torch.full((B, max_len), self.eos_id, dtype=torch.long, device=src.device)
        weights = torch.zeros(B, max_len, T_x, dtype=h.dtype, device=src.device)
        live = torch.arange(B, device=src.device)  # (n,): the batch rows still writing
        y = torch.full((B,), self.bos_id, dtype=torch.long, device=src.device)
        mask, steps = src_mask, 0
        while steps < max_len and live.numel() > 0:
            logits, s, w = self.decoder(y, s, h, mask, keys)  # (n, V), (n, H), (n, T_x)
            y = logits.argmax(dim=-1)
            tokens[live, steps], weights[live, steps] = y, w
            steps += 1
            going = y != self.eos_id
            if not bool(going.all()):
                live, y, s, h, mask, keys = live[going], y[going], s[going], h[going], mask[going], keys[going]
        return tokens[:, :steps], weights[:, :steps]
