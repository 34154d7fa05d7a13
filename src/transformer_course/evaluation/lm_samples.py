"""Samples from a trained language model at several decoding settings, and what they trade (chapter 10).

Greedy decoding writes the one most probable continuation; sampling at temperature T, from the top k tokens or from
the nucleus of mass p writes varied ones. What each setting buys is measured on many samples from <bos>:

- ``nll_per_token``: the samples' negative log-likelihood per token under the model itself at temperature 1 (the
  raw logits, before filtering): low means the model finds its own samples probable, the safe end of the trade;
- ``distinct_2``: distinct token bigrams over all bigrams of all samples, and ``unique``: the share of samples
  that no other sample repeats: high means varied text, the adventurous end;
- ``mean_tokens``: the samples' mean length in tokens, <eos> included.

``sample_report`` returns one row per setting with a few example sentences, for the trainer to store with its run
(``lm_train --samples``) so that the chapter reads them without the weights.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..decoding.sampling import generate

__all__ = ["SAMPLING_SETTINGS", "sample_report", "sample_statistics"]

# (name, options of sampling.generate): the settings the chapter compares.
SAMPLING_SETTINGS: tuple[tuple[str, dict], ...] = (
    ("greedy", {"greedy": True}),
    ("T = 0.5", {"temperature": 0.5}),
    ("T = 0.8", {"temperature": 0.8}),
    ("T = 1.0", {"temperature": 1.0}),
    ("T = 1.3", {"temperature": 1.3}),
    ("top-k 10", {"top_k": 10}),
    ("top-p 0.9", {"top_p": 0.9}),
)


def sample_statistics(ids: Tensor, logits: Tensor, eos_id: int) -> dict:
    """ids (N, 1 + L): <bos> then L generated tokens (<eos> repeated after a row's end); logits (N, L, V): the raw
    logits each token was drawn from. Statistics over each row's tokens up to and including its first <eos>."""
    new = ids[:, 1:]  # (N, L)
    ended = (new == eos_id).long().cumsum(dim=1)  # (N, L): <eos> seen up to and including t
    counted = (ended - (new == eos_id).long()) == 0  # (N, L): before or at the first <eos>
    logp = torch.log_softmax(logits.double(), dim=-1).gather(-1, new[..., None]).squeeze(-1)  # (N, L)
    rows = [row[keep].tolist() for row, keep in zip(new, counted)]
    bigrams = [(a, b) for r in rows for a, b in zip(r, r[1:])]
    texts = [tuple(r) for r in rows]
    return {
        "nll_per_token": float(-(logp * counted).sum() / counted.sum()),
        "distinct_2": len(set(bigrams)) / max(1, len(bigrams)),
        "unique": sum(texts.count(t) == 1 for t in texts) / len(texts),
        "mean_tokens": float(counted.sum()) / len(rows),
    }


@torch.no_grad()
def sample_report(
    model, tokenizer, n: int = 200, max_new_tokens: int = 30, seed: int = 0, examples: int = 4, settings=None
) -> list[dict]:
    """One row per setting of ``settings`` (default SAMPLING_SETTINGS): its name, options, statistics over n samples
    from <bos> (a generator seeded with ``seed``, the same for every setting) and the first ``examples`` as text."""
    rows = []
    for name, options in settings or SAMPLING_SETTINGS:
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.full((n, 1), tokenizer.bos_id, dtype=torch.long)  # (n, 1)
        ids, logits = generate(
            model,
            prompt,
            max_new_tokens,
            generator=generator,
            eos_id=tokenizer.eos_id,
            return_logits=True,
            **options,
        )
        stats = sample_statistics(ids, logits, tokenizer.eos_id)  # ids (n, 1 + L), logits (n, L, V)
        texts = [tokenizer.decode(row) for row in ids[:examples, 1:].tolist()]
        rows.append({"setting": name, "options": options, **stats, "examples": texts})
    return rows
