"""How sure a model is: the entropy of its next-token distributions (chapter 9, exercise 9.5).

The entropy of a distribution p over the vocabulary, H(p) = -sum_v p(v) log p(v), is 0 nats when one token has all
the probability and log |V| when every token is equally likely. Averaged over the positions of a model's own output,
it says how much the model hesitated while writing it: where it hesitates, a search has alternatives to weigh, and
beam search changes greedy decoding's answer more often. Chapter 9's evaluation page uses it to show why a student
trained on a teacher's translations is surer than one trained on people's.
"""

from __future__ import annotations

import torch

__all__ = ["entropies", "mean_entropy"]


def entropies(logits: torch.Tensor) -> torch.Tensor:
    """H(softmax(logits)) in nats over the last axis: (..., V) -> (...).

    Computed from log_softmax, never as p * log(p) of a softmax: a token whose probability underflows to 0 would
    give 0 * -inf = nan, where its true contribution is 0.
    """
    log_p = torch.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def mean_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean entropy (nats) of the next-token distributions at the positions where ``mask`` is True.

    logits: (B, T, V) scores before the softmax; mask: (B, T) bool, True at the real positions (padding False).
    Every counted position weighs the same, so a long sentence counts more than a short one. Returns a 0-dim tensor.
    """
    if logits.dim() != 3 or mask.shape != logits.shape[:2]:
        raise ValueError(
            f"logits (B, T, V) and mask (B, T) expected, got {tuple(logits.shape)} and {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True at real positions), got {mask.dtype}")
    if not mask.any():
        raise ValueError("the mask counts no position: there is nothing to average")
    return entropies(logits[mask]).mean()  # (N, V) -> (N,) -> ()
