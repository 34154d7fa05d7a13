"""Sampling from a language model (chapter 10): temperature, top-k and nucleus (top-p) filtering, and generation.

``filter_logits`` turns next-token logits into the exact distribution that is sampled from, in three steps:

1. temperature: p = softmax(logits / temperature); below 1 sharpens the distribution, above 1 flattens it;
2. top-k: keep the tokens whose logit is at least the k-th largest; tokens tied with the k-th are all kept,
   so more than k tokens survive when there is a tie at the boundary;
3. top-p (nucleus): of what is left, renormalised, keep the smallest set of most probable tokens whose mass
   reaches p, again keeping every token tied in probability with the last one needed.

Then the kept tokens are renormalised. Keeping ties whole makes the result independent of the order of the
vocabulary (permuting the logits permutes the probabilities), and at least one token (the most probable)
always survives. A mass within a few rounding errors of p counts as reaching it: 64 machine epsilons of the
logits' dtype (of float32 for half-precision logits, which are filtered in float32), so that hand-worked
boundaries (0.5 + 0.25 = 0.75) behave as they do on paper.

``generate`` extends prompts token by token, either feeding only the new token to a key/value cache
(``model.start_cache()``, ``model.step(cache, ids)``) or recomputing the whole prefix at every step
(``model.last_logits(ids)``); ``language_model.TransformerLM`` and ``lm_baselines.RNNLM`` have both.

Shapes: B rows, V vocabulary, T_p prompt length, L new tokens.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Literal, overload

import torch
from torch import Tensor

from .._checks import check_ids, positive_int

__all__ = ["filter_logits", "generate", "sample_next"]


def _check_options(temperature: object, top_k: object, top_p: object) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be positive and finite, got {temperature!r} (greedy=True for argmax)")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 or None, got {top_k!r}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)):
            raise TypeError(f"top_p must be a number in (0, 1] or None, got {type(top_p).__name__}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def _check_logits(logits: object) -> Tensor:
    if not isinstance(logits, Tensor) or not logits.is_floating_point():
        what = logits.dtype if isinstance(logits, Tensor) else type(logits).__name__
        raise TypeError(f"logits must be a floating-point tensor (..., V), got {what}")
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}")
    if bool(torch.isnan(logits).any()) or bool((logits == math.inf).any()):
        raise ValueError("logits must not hold NaN or +inf")
    if bool((logits == -math.inf).all(dim=-1).any()):
        raise ValueError("a row of logits is all -inf: no token is possible")
    return logits


def filter_logits(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """logits (..., V) -> the probabilities sampled from (..., V), in the logits' dtype (see the module's
    docstring for the rules). top_k >= V and top_p = 1 keep every token; -inf logits have probability zero."""
    _check_options(temperature, top_k, top_p)
    return _filter(_check_logits(logits), temperature, top_k, top_p)


def _filter(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None) -> Tensor:
    dtype = logits.dtype
    logits = logits.float() / temperature if dtype in (torch.float16, torch.bfloat16) else logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, -math.inf)  # ties with the k-th stay
    probs = torch.softmax(logits, dim=-1)  # (..., V)
    if top_p is not None and top_p < 1:
        tol = 64 * torch.finfo(probs.dtype).eps
        sorted_probs = probs.sort(dim=-1, descending=True).values  # (..., V)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the more probable tokens
        needed = before < top_p - tol  # a token is needed while the mass before it falls short of p
        needed[..., 0] = True  # the most probable token, always
        last = needed.sum(dim=-1, keepdim=True) - 1  # (..., 1): index of the last token needed
        threshold = sorted_probs.gather(-1, last)  # its probability: everything as probable stays
        probs = probs.masked_fill(probs < threshold, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs.to(dtype)


def sample_next(
    logits: Tensor,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
) -> Tensor:
    """One token per row: logits (B, V) -> ids (B,) int64, drawn from ``filter_logits``' distribution with
    ``generator`` (a fixed seed gives fixed samples), or with ``greedy`` the argmax (the first one on ties)."""
    _check_options(temperature, top_k, top_p)
    if _check_logits(logits).dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    return _draw(logits, generator, temperature, top_k, top_p, greedy)


def _draw(
    logits: Tensor,
    generator: torch.Generator | None,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    greedy: bool,
) -> Tensor:
    if greedy:
        return logits.argmax(dim=-1)  # (B,)
    probs = _filter(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


@overload
def generate(
    model: Any,
    prompt_ids: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = ...,
    top_k: int | None = ...,
    top_p: float | None = ...,
    greedy: bool = ...,
    generator: torch.Generator | None = ...,
    eos_id: int | None = ...,
    use_cache: bool = ...,
    return_logits: Literal[False] = ...,
) -> Tensor: ...


@overload
def generate(
    model: Any,
    prompt_ids: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = ...,
    top_k: int | None = ...,
    top_p: float | None = ...,
    greedy: bool = ...,
    generator: torch.Generator | None = ...,
    eos_id: int | None = ...,
    use_cache: bool = ...,
    return_logits: Literal[True],
) -> tuple[Tensor, Tensor]: ...


@torch.no_grad()
def generate(
    model: Any,
    prompt_ids: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
    return_logits: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Extend prompt_ids (B, T_p) (every row as long, no padding) by up to ``max_new_tokens`` tokens.

    Returns ids (B, T_p + L), L <= max_new_tokens, and with ``return_logits`` also the raw next-token logits of
    every step (B, L, V), before any filtering. Generation stops once every row has written ``eos_id`` (never if
    None); a row that has finished holds ``eos_id`` after it. With ``use_cache`` each step feeds only the new token
    and reads the earlier keys and values from the model's cache; without, it recomputes the whole prefix: the
    same logits, more slowly. The model is run in eval mode and given back in the mode it was in.
    """
    _check_options(temperature, top_k, top_p)
    positive_int("max_new_tokens", max_new_tokens)
    needed = ("start_cache", "step") if use_cache else ("last_logits",)
    if not all(callable(getattr(model, name, None)) for name in needed):
        raise TypeError(f"generate needs a model with {' and '.join(needed)}, got {type(model).__name__}")
    max_len = getattr(model, "max_len", None)
    check_ids("prompt_ids", prompt_ids, None, "", sys.maxsize if max_len is None else max_len)
    if max_len is not None and prompt_ids.shape[1] + max_new_tokens - 1 > max_len:
        raise ValueError(
            f"a prompt of {prompt_ids.shape[1]} tokens and {max_new_tokens} new ones need "
            f"{prompt_ids.shape[1] + max_new_tokens - 1} positions, more than the model's max_len={max_len}"
        )
    was_training = model.training
    model.eval()
    try:
        ids, steps = prompt_ids.long(), []
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # (B,)
        cache = model.start_cache() if use_cache else None
        new = ids  # what the cache has not seen yet: the whole prompt, then one token at a time
        for _ in range(max_new_tokens):
            logits = model.step(cache, new)[:, -1] if use_cache else model.last_logits(ids)  # (B, V)
            steps.append(logits)
            if len(steps) == 1:  # the model's first logits, checked once rather than at every step
                _check_logits(logits)
            token = _draw(logits, generator, temperature, top_k, top_p, greedy)  # (B,)
            if eos_id is not None:
                token = token.masked_fill(done, eos_id)
                done = done | (token == eos_id)
            new = token[:, None]
            ids = torch.cat([ids, new], dim=1)
            if eos_id is not None and bool(done.all()):
                break
        return (ids, torch.stack(steps, dim=1)) if return_logits else ids
    finally:
        model.train(was_training)
