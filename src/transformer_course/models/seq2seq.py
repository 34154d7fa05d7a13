"""The RNN encoder-decoder (chapter 3): an encoder that reads the whole input into one final state,
a decoder that writes the output one token at a time from it, teacher forcing and greedy decoding.

Shapes: B batch, T_x source length, T_y target length, H hidden size, V target vocabulary size.
Masks are boolean, True at real tokens. Token ids <pad> = 0, <bos> = 1, <eos> = 2 (see data/).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..data.batching import shift_right

__all__ = ["DecoderStep", "Encoder", "Seq2Seq", "greedy_decode", "last_state", "shift_right", "teacher_forcing"]


def last_state(states: Tensor, mask: Tensor) -> Tensor:
    """The state at each sequence's last real token. states (B, T, H), mask (B, T) -> (B, H)."""
    lengths = mask.long().sum(dim=1)  # (B,)
    if bool((lengths == 0).any()):
        raise ValueError("every sequence needs at least one real token")
    return states[torch.arange(states.shape[0], device=states.device), lengths - 1]


class Encoder(nn.Module):
    """Embedding and a one-layer GRU that reads the source left to right.

    src (B, T_x) token ids, src_mask (B, T_x) bool -> states (B, T_x, H), final (B, H)
    ``final`` is the state after the last *real* token of each sequence, not after its padding.
    """

    def __init__(self, vocab_size: int, d_emb: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        states, _ = self.rnn(self.embedding(src))  # (B, T_x, H); padding comes last, so real states ignore it
        return states, last_state(states, src_mask)


class DecoderStep(nn.Module):
    """One step of the decoder: the previous token and state in, scores for the next token and the new state out.

    y_prev (B,) ids, h (B, H) -> logits (B, V), h_new (B, H)
    """

    def __init__(self, vocab_size: int, d_emb: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.cell = nn.GRUCell(d_emb, d_hidden)
        self.out = nn.Linear(d_hidden, vocab_size)

    def forward(self, y_prev: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        h_new = self.cell(self.embedding(y_prev), h)  # (B, H)
        return self.out(h_new), h_new


def teacher_forcing(step: Callable, h0: Tensor, targets: Tensor, bos_id: int) -> Tensor:
    """Run the decoder over the whole target with teacher forcing.

    At step t the decoder gets the *true* previous token (<bos> at t = 0, else targets[:, t-1]) and
    predicts targets[:, t]. step(y_prev (B,), h (B, H)) -> (logits (B, V), h); targets (B, T_y).
    Returns logits (B, T_y, V).
    """
    inputs = shift_right(targets, bos_id)  # (B, T_y)
    h, logits = h0, []
    for t in range(targets.shape[1]):
        step_logits, h = step(inputs[:, t], h)
        logits.append(step_logits)
    return torch.stack(logits, dim=1)


def greedy_decode(step: Callable, h0: Tensor, bos_id: int, max_len: int) -> Tensor:
    """Decode greedily: feed the decoder its own most likely token at every step, starting from <bos>.

    Returns the logits of every step (B, max_len, V); the tokens it chose and fed back are
    ``logits.argmax(-1)``. Every sequence runs for max_len steps; what follows its first <eos> is
    ignored by the decoders of data/.
    """
    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long, device=h0.device)
    h, logits = h0, []
    for _ in range(max_len):
        step_logits, h = step(y, h)
        y = step_logits.argmax(dim=-1)  # (B,): the most likely next token goes back in
        logits.append(step_logits)
    return torch.stack(logits, dim=1)


def run_cell_over_sequence(cell: nn.GRUCell, inputs: Tensor, h0: Tensor) -> Tensor:
    """The states (B, T, H) of a GRUCell run step by step over inputs (B, T, E) from h0 (B, H), in one fused call.

    nn.GRU computes the same recurrence as a loop of nn.GRUCell, in one optimised kernel; we lend it the
    cell's weights for the call (torch.func.functional_call), so the model keeps a single set of them.
    """
    template = nn.GRU(cell.input_size, cell.hidden_size, batch_first=True, device="meta")
    weights = {
        "weight_ih_l0": cell.weight_ih,
        "weight_hh_l0": cell.weight_hh,
        "bias_ih_l0": cell.bias_ih,
        "bias_hh_l0": cell.bias_hh,
    }
    states, _ = torch.func.functional_call(template, weights, (inputs, h0[None]))
    return states


class Seq2Seq(nn.Module):
    """The encoder-decoder without attention: the decoder sees the source only through the encoder's final state."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, d_emb: int = 32, d_hidden: int = 128, bos_id: int = 1, eos_id: int = 2
    ) -> None:
        super().__init__()
        self.encoder = Encoder(src_vocab, d_emb, d_hidden)
        self.decoder = DecoderStep(tgt_vocab, d_emb, d_hidden)
        self.bos_id, self.eos_id = bos_id, eos_id

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits (B, T_y, V) for the targets tgt (B, T_y)."""
        _, final = self.encoder(src, src_mask)
        # The same as teacher_forcing(self.decoder, final, tgt, self.bos_id), faster: the GRU runs over the
        # whole shifted target in one call, and the output layer once over every step.
        inputs = self.decoder.embedding(shift_right(tgt, self.bos_id))  # (B, T_y, E)
        states = run_cell_over_sequence(self.decoder.cell, inputs, final)  # (B, T_y, H)
        return self.decoder.out(states)

    @torch.no_grad()
    def generate(self, src: Tensor, src_mask: Tensor, max_len: int) -> tuple[Tensor, None]:
        """Greedy tokens (B, L), L <= max_len: decoding stops once every sequence has written <eos>.

        A sequence that has written <eos> leaves the batch: the decoder steps only the rows still writing
        (in a batch of test sentences about half of the row-steps came after a row's <eos>). Its remaining
        positions hold <eos>.
        """
        _, h = self.encoder(src, src_mask)  # (B, H)
        tokens = torch.full((src.shape[0], max_len), self.eos_id, dtype=torch.long, device=src.device)
        live = torch.arange(src.shape[0], device=src.device)  # (n,): the batch rows still writing
        y = torch.full((src.shape[0],), self.bos_id, dtype=torch.long, device=src.device)
        steps = 0
        while steps < max_len and live.numel() > 0:
            logits, h = self.decoder(y, h)  # (n, V), (n, H)
            y = logits.argmax(dim=-1)
            tokens[live, steps] = y
            steps += 1
            going = y != self.eos_id
            if not bool(going.all()):
                live, y, h = live[going], y[going], h[going]
        return tokens[:, :steps], None
