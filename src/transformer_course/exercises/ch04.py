"""Chapter 4 exercises: the additive score, the attention weights and context, an attention decoder step, and
an experiment: a decoder state that steers the attention to a chosen position."""

from __future__ import annotations

import math

import torch

from ..grading.registry import Case, Exercise, Mistake, describe, randn, register
from ..models import bahdanau as ref

NOTEBOOK = "04_bahdanau_attention.ipynb"


def _mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


# 4.1 the additive score -----------------------------------------------------------------------------


def _score_args(g: torch.Generator, b: int, t: int, d_dec: int, d_enc: int, d_att: int) -> tuple:
    return (
        randn(g, b, d_dec),
        randn(g, b, t, d_enc),
        randn(g, d_att, d_dec, scale=0.7),
        randn(g, d_att, d_enc, scale=0.7),
        randn(g, d_att),
    )


def _score_cases(g: torch.Generator) -> list[Case]:
    return [
        # The first case has H_dec = H_enc, so that swapping W and U gives wrong numbers rather than a shape error.
        Case("B = 2, T = 3, H_dec = 4, H_enc = 4, A = 3", _score_args(g, 2, 3, 4, 4, 3)),
        Case("B = 1, T = 4, H_dec = 3, H_enc = 5, A = 2", _score_args(g, 1, 4, 3, 5, 2)),
        Case("B = 3, T = 6, H_dec = 4, H_enc = 2, A = 5", _score_args(g, 3, 6, 4, 2, 5)),
        Case("B = 2, T = 1, H_dec = 6, H_enc = 6, A = 3", _score_args(g, 2, 1, 6, 6, 3)),
    ]


def _score_no_tanh(s, h, W, U, v):
    return ((s @ W.T)[:, None, :] + h @ U.T) @ v


def _score_swapped(s, h, W, U, v):
    return torch.tanh((s @ U.T)[:, None, :] + h @ W.T) @ v


def _score_no_v(s, h, W, U, v):
    return torch.tanh((s @ W.T)[:, None, :] + h @ U.T).sum(-1)


# 4.2 weights and context ----------------------------------------------------------------------------


def _context_cases(g: torch.Generator) -> list[Case]:
    return [
        Case("B = 2, T = 4, no mask", (randn(g, 2, 4, scale=2.0), randn(g, 2, 4, 3))),
        Case(
            "B = 3, T = 5, lengths 5, 3 and 1",
            (randn(g, 3, 5, scale=2.0), randn(g, 3, 5, 4)),
            {"mask": _mask([5, 3, 1], 5)},
        ),
        Case(
            "B = 2, T = 6, lengths 2 and 6", (randn(g, 2, 6, scale=2.0), randn(g, 2, 6, 2)), {"mask": _mask([2, 6], 6)}
        ),
    ]


def _masked(scores, mask):
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def _context_batch_axis(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=0)
    return (w[:, :, None] * h).sum(1), w


def _context_last_state(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=-1)
    return h[:, -1], w


def _context_mask_ignored(scores, h, mask=None):
    return ref.attention_context(scores, h, None)


def _context_mask_inverted(scores, h, mask=None):
    return ref.attention_context(scores, h, None if mask is None else ~mask)


def _context_unweighted(scores, h, mask=None):
    w = torch.softmax(_masked(scores, mask), dim=-1)
    return h.sum(1), w


# 4.3 the attention decoder step ---------------------------------------------------------------------


def _step_state(g: torch.Generator, vocab: int, d_emb: int, d_hidden: int, d_enc: int, d_att: int) -> dict:
    s = 1 / math.sqrt(d_hidden)
    return {
        "embedding.weight": randn(g, vocab, d_emb),
        "W.weight": randn(g, d_att, d_hidden, scale=0.8),
        "U.weight": randn(g, d_att, d_enc, scale=0.8),
        "v.weight": randn(g, 1, d_att),
        "cell.weight_ih": randn(g, 3 * d_hidden, d_emb + d_enc, scale=s),
        "cell.weight_hh": randn(g, 3 * d_hidden, d_hidden, scale=s),
        "cell.bias_ih": randn(g, 3 * d_hidden, scale=s),
        "cell.bias_hh": randn(g, 3 * d_hidden, scale=s),
        "out.weight": randn(g, vocab, d_hidden + d_enc, scale=s),
        "out.bias": randn(g, vocab, scale=0.1),
    }


def _step_cases(g: torch.Generator) -> list[Case]:
    init = {"vocab_size": 7, "d_emb": 3, "d_hidden": 4, "d_enc": 5, "d_att": 6}
    cases = []
    for b, t, lengths in ((1, 3, [3]), (3, 5, [5, 2, 4]), (2, 4, [1, 4])):
        args = (torch.randint(3, 7, (b,), generator=g), randn(g, b, 4), randn(g, b, t, 5))
        cases.append(
            Case(
                f"B = {b}, T = {t}, lengths {lengths}",
                args,
                {"mask": _mask(lengths, t)},
                init,
                _step_state(g, 7, 3, 4, 5, 6),
            )
        )
    return cases


class _StepQueryNewState(ref.AttentionDecoderStep):
    """Attention queried with a state updated without the context first."""

    def forward(self, y_prev, s, h, mask=None, keys=None):
        scores = ref.additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])
        context, weights = ref.attention_context(scores, h, mask)
        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)
        scores = ref.additive_score(s_new, h, self.W.weight, self.U.weight, self.v.weight[0])
        context, weights = ref.attention_context(scores, h, mask)
        return self.out(torch.cat([s_new, context], -1)), s_new, weights


class _StepLastState(ref.AttentionDecoderStep):
    def forward(self, y_prev, s, h, mask=None, keys=None):
        scores = ref.additive_score(s, h, self.W.weight, self.U.weight, self.v.weight[0])
        _, weights = ref.attention_context(scores, h, mask)
        context = h[:, -1]
        s_new = self.cell(torch.cat([self.embedding(y_prev), context], -1), s)
        return self.out(torch.cat([s_new, context], -1)), s_new, weights


class _StepMaskIgnored(ref.AttentionDecoderStep):
    def forward(self, y_prev, s, h, mask=None, keys=None):
        return super().forward(y_prev, s, h, None)


# 4.4 an experiment: steer the attention with the decoder state ----------------------------------------

STEER_THRESHOLD = 0.9  # the weight the steered state must put on the target position
_STEER_ROOM = 6.0  # how far, at least, the target's keys lead the others' (see _steer_room)


def _steer_room(h, U, v, j: int) -> float:
    """How much of a lead position j's keys give it: 0 when no decoder state can single it out.

    The score v . tanh(q + k) grows with each coordinate of the key k = U h_j where v is positive and falls
    where v is negative, so a position whose key another's beats on every coordinate never wins, whatever the
    state. On a coordinate where j's key leads all the others by some lead, a query that puts the steep part
    of the tanh in that gap gives j up to 2 |v_a| tanh(lead / 2) over every other position, and a query far
    out on the other coordinates makes them count alike for all positions: the room is the sum of those gains.
    """
    keys = (h[0] @ U.T) * v.sign()  # (T, A): larger is better on every coordinate
    others = torch.cat([keys[:j], keys[j + 1 :]]).max(dim=0).values
    lead = (keys[j] - others).clamp(min=0)
    return (2 * v.abs() * torch.tanh(lead / 2)).sum().item()


def _steer_cases(g: torch.Generator) -> list[Case]:
    cases = []
    for t, d, a, where in ((5, 16, 16, "the first"), (8, 24, 20, "an inner"), (12, 32, 24, "the last")):
        j = {"the first": 0, "the last": t - 1}.get(where)
        if j is None:
            j = int(torch.randint(1, t - 1, (1,), generator=g))
        # Draw until position j can be singled out with room to spare, so that a state in [-1, 1] that puts
        # more than the threshold on it exists (a key beaten on every coordinate cannot win, whatever s is), and
        # until the task's own method reaches it: on 1 case in 900 (seed 120's first), gradient ascent from the
        # zero state stalled at a weight of 0.116, where every other case reached 0.988 or more.
        for _ in range(200):
            h = torch.tanh(randn(g, 1, t, d, scale=1.5))  # encoder states in (-1, 1), as a GRU's are
            W, U, v = randn(g, a, d), randn(g, a, d, scale=0.5), randn(g, a, scale=3.0)
            if _steer_room(h, U, v, j) >= _STEER_ROOM and _reached(h, W, U, v, j):
                break
        cases.append(Case(f"T = {t}, H = {d}, A = {a}, target j = {j} ({where} position)", (h, W, U, v, j)))
    return cases


def _reached(h, W, U, v, j: int) -> bool:
    """Whether the reference's search puts a weight of 0.95 or more on position j: margin over the threshold."""
    return _steer_weights(steer_attention(h, W, U, v, j), h, W, U, v)[j].item() >= 0.95


def _steer_weights(s, h, W, U, v) -> torch.Tensor:
    return ref.attention_context(ref.additive_score(s, h, W, U, v), h)[1][0]  # (T,)


def steer_attention(h, W, U, v, j, steps: int = 200, lr: float = 0.1):
    """A decoder state s (1, H) in [-1, 1] whose additive attention puts its weight on position j.

    Gradient ascent on the log of the weight on j, by Adam from the zero state, clamping s to [-1, 1] after
    every step: the log rewards pulling the other positions' scores down as much as pushing j's up.
    """
    s = torch.zeros(1, W.shape[1], dtype=h.dtype, requires_grad=True)
    optimizer = torch.optim.Adam([s], lr=lr)
    for _ in range(steps):
        loss = -torch.log(_steer_weights(s, h, W, U, v)[j])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            s.clamp_(-1, 1)
    return s.detach()


def _judge_steer(case: Case, answer) -> str | None:
    h, W, U, v, j = case.args
    shape = (1, W.shape[1])
    if not isinstance(answer, torch.Tensor):
        return f"the answer should be a decoder state, a tensor of shape {shape}; got {describe(answer)}"
    if tuple(answer.shape) != shape:
        return f"the state should have shape {shape} (one sentence, H = {shape[1]}), got {tuple(answer.shape)}"
    if not answer.dtype.is_floating_point:
        return f"the state should be a floating-point tensor, got dtype {answer.dtype}"
    s = answer.detach().double().cpu()
    if not bool(torch.isfinite(s).all()):
        return f"the state has {int((~torch.isfinite(s)).sum())} entries that are NaN or infinite"
    k = int(s.abs().argmax())
    if s[0, k].abs().item() > 1 + 1e-6:
        return (
            f"entry {k} of the state is {s[0, k].item():.3g}, outside [-1, 1] ({int((s.abs() > 1 + 1e-6).sum())} "
            f"entries are): a GRU's state cannot leave that range, so the attention must be steered within it"
        )
    weights = _steer_weights(s, h, W, U, v)
    if weights[j].item() >= STEER_THRESHOLD:
        return None
    others = weights.clone()
    others[j] = -1.0
    i = int(others.argmax())
    return (
        f"the attention weight on position {j} is {weights[j].item():.3f} and the largest elsewhere is "
        f"{weights[i].item():.3f}, on position {i}; the weight on {j} must be at least {STEER_THRESHOLD}"
    )


def _steer_zero(h, W, U, v, j):
    return torch.zeros(1, W.shape[1], dtype=h.dtype)


def _steer_own_state(h, W, U, v, j):
    return h[:, j].clone()


def _steer_raw_score(h, W, U, v, j):
    """Gradient ascent on position j's own score, without a bound."""
    s = torch.zeros(1, W.shape[1], dtype=h.dtype, requires_grad=True)
    optimizer = torch.optim.Adam([s], lr=0.1)
    for _ in range(200):
        loss = -ref.additive_score(s, h, W, U, v)[0, j]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return s.detach()


def _steer_random(h, W, U, v, j):
    return torch.rand(1, W.shape[1], generator=torch.Generator().manual_seed(0), dtype=h.dtype) * 2 - 1


register(
    Exercise(
        id="4.1",
        title="the additive score",
        idea=(
            "each encoder state is scored by a small network that sees it with the decoder state: project both "
            "into one space, add, squash, and read one number out."
        ),
        points=2,
        name="additive_score",
        kind="function",
        reference=ref.additive_score,
        make_cases=_score_cases,
        mistakes=(
            Mistake("the tanh is missing: e = v . tanh(W s + U h).", _score_no_tanh),
            Mistake("W and U are swapped: W multiplies the decoder state s, U the encoder states h.", _score_swapped),
            Mistake(
                "the scores are summed over the attention dimension instead of taking the dot product with v.",
                _score_no_v,
            ),
        ),
    ),
    Exercise(
        id="4.2",
        title="attention weights and context",
        idea=(
            "a softmax over the input positions turns the scores into weights, with padding excluded before it; "
            "the context is the weighted sum of the encoder states."
        ),
        points=3,
        name="attention_context",
        kind="function",
        parts={(0,): 'the context', (1,): 'the tensor of weights'},
        reference=ref.attention_context,
        make_cases=_context_cases,
        mistakes=(
            Mistake(
                "the softmax runs over the batch (dim=0): each sequence's weights over its source positions "
                "(dim=-1) must sum to one.",
                _context_batch_axis,
            ),
            Mistake(
                "the context is the last encoder state: it must be the weighted sum of all of them.",
                _context_last_state,
            ),
            Mistake(
                "the context is the plain sum of the states: weight each one by its attention weight.",
                _context_unweighted,
            ),
            Mistake("the mask is ignored: padding positions must get exactly zero weight.", _context_mask_ignored),
            Mistake(
                "the mask is inverted: True marks a real token, so fill the scores where the mask is False.",
                _context_mask_inverted,
            ),
        ),
    ),
    Exercise(
        id="4.3",
        title="an attention decoder step",
        idea=(
            "the previous state asks the question: score, weigh and sum the encoder states with your two "
            "functions, feed the context to the cell beside the embedding, and read the logits from the new "
            "state and the context."
        ),
        points=3,
        name="AttentionDecoderStep",
        kind="module",
        parts={(0,): 'the tensor of logits', (1,): 'the new state s_new', (2,): 'the tensor of attention weights'},
        reference=ref.AttentionDecoderStep,
        make_cases=_step_cases,
        mistakes=(
            Mistake(
                "the context uses only the last encoder state: use attention_context over all of them.", _StepLastState
            ),
            Mistake("the mask is not passed on: padding positions get attention.", _StepMaskIgnored),
            Mistake(
                "the attention is queried with the new state: Bahdanau's decoder queries with the previous state "
                "s, before the cell updates it.",
                _StepQueryNewState,
            ),
        ),
    ),
    Exercise(
        id="4.4",
        title="steer the attention",
        idea=(
            "the decoder state is the question the attention asks, so search for the state that asks for "
            "position j: climb the log of that position's weight by gradient ascent, keeping every entry of "
            "the state between minus one and one."
        ),
        points=3,
        name="steer_attention",
        kind="function",
        reference=steer_attention,
        make_cases=_steer_cases,
        judge=_judge_steer,
        mistakes=(
            Mistake(
                "the zero state asks nothing in particular: the weights then follow the keys alone, and position "
                "j wins only where its keys happen to score highest. Search for a state that raises its weight.",
                _steer_zero,
            ),
            Mistake(
                "the encoder state at j as the query is what a dot-product score would reward, a vector scoring "
                "highest against itself; the additive score adds W s to U h_j and squashes, so s = h_j favours "
                "no position in particular. Measure the weight and climb it.",
                _steer_own_state,
            ),
            Mistake(
                "raising position j's own score also raises the others' (they share W s), and without a bound "
                "the state leaves [-1, 1], where a GRU's state cannot go. Climb the log of j's weight, which "
                "pushes the other scores down too, and clamp the state to [-1, 1] after every step.",
                _steer_raw_score,
            ),
            Mistake(
                "a random state looks somewhere at random: search, starting anywhere, for the state that puts "
                "the weight on position j.",
                _steer_random,
            ),
        ),
    ),
)
