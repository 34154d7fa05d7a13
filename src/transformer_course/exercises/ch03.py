"""Chapter 3 exercises: the encoder, a decoder step, teacher forcing, greedy decoding, corpus BLEU, and two
hypotheses that fool a BLEU with a part missing (an analysis exercise, judged rather than compared).

Exercise 3.5's cases are the course's own test sentences (token lists, 13a-tokenised), every reference of each,
with hypotheses made from references by edits that each part of BLEU answers for: repeated words (the clip),
cut endings (the brevity penalty), several references (the closest length).
"""

from __future__ import annotations

import functools
import math

import torch

from ..evaluation import bleu as bleu_ref
from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, randn, register
from ..models import seq2seq as ref

NOTEBOOK = "03_encoder_decoder.ipynb"
BOS = 1


def _ids(g: torch.Generator, vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(3, vocab, shape, generator=g)


def _mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


def _gru_state(g: torch.Generator, prefix: str, suffix: str, d_in: int, d_hidden: int) -> dict:
    s = 1 / math.sqrt(d_hidden)
    return {
        f"{prefix}weight_ih{suffix}": randn(g, 3 * d_hidden, d_in, scale=s),
        f"{prefix}weight_hh{suffix}": randn(g, 3 * d_hidden, d_hidden, scale=s),
        f"{prefix}bias_ih{suffix}": randn(g, 3 * d_hidden, scale=s),
        f"{prefix}bias_hh{suffix}": randn(g, 3 * d_hidden, scale=s),
    }


# 3.1 the encoder --------------------------------------------------------------------------------


def _encoder_state(g: torch.Generator, vocab: int, d_emb: int, d_hidden: int) -> dict:
    return {"embedding.weight": randn(g, vocab, d_emb), **_gru_state(g, "rnn.", "_l0", d_emb, d_hidden)}


def _encoder_cases(g: torch.Generator) -> list[Case]:
    init = {"vocab_size": 9, "d_emb": 4, "d_hidden": 5}
    return [
        Case(
            "one sequence of length 6, no padding",
            (_ids(g, 9, 1, 6), _mask([6], 6)),
            init=init,
            state=_encoder_state(g, 9, 4, 5),
        ),
        Case(
            "batch of 3, lengths 7, 4 and 2 (padded)",
            (_ids(g, 9, 3, 7), _mask([7, 4, 2], 7)),
            init=init,
            state=_encoder_state(g, 9, 4, 5),
        ),
        Case(
            "batch of 2, lengths 1 and 5",
            (_ids(g, 9, 2, 5), _mask([1, 5], 5)),
            init=init,
            state=_encoder_state(g, 9, 4, 5),
        ),
    ]


class _EncoderLastPosition(ref.Encoder):
    def forward(self, src, src_mask):
        states, _ = self.rnn(self.embedding(src))
        return states, states[:, -1]


class _EncoderFirstPosition(ref.Encoder):
    def forward(self, src, src_mask):
        states, _ = self.rnn(self.embedding(src))
        return states, states[:, 0]


# 3.2 a decoder step -----------------------------------------------------------------------------


def _step_state(g: torch.Generator, vocab: int, d_emb: int, d_hidden: int) -> dict:
    return {
        "embedding.weight": randn(g, vocab, d_emb),
        **_gru_state(g, "cell.", "", d_emb, d_hidden),
        "out.weight": randn(g, vocab, d_hidden, scale=1 / math.sqrt(d_hidden)),
        "out.bias": randn(g, vocab, scale=0.1),
    }


def _step_cases(g: torch.Generator) -> list[Case]:
    init = {"vocab_size": 7, "d_emb": 3, "d_hidden": 5}
    return [
        Case(f"batch of {b}", (_ids(g, 7, b), randn(g, b, 5)), init=init, state=_step_state(g, 7, 3, 5))
        for b in (1, 4, 2)
    ]


class _StepOldState(ref.DecoderStep):
    def forward(self, y_prev, h):
        h_new = self.cell(self.embedding(y_prev), h)
        return self.out(h), h_new


class _StepReturnsOldState(ref.DecoderStep):
    def forward(self, y_prev, h):
        h_new = self.cell(self.embedding(y_prev), h)
        return self.out(h_new), h


# 3.3 teacher forcing and 3.4 greedy decoding: functions of a given decoder step ----------------------


def _given_step(g: torch.Generator, vocab: int, d_emb: int, d_hidden: int) -> ref.DecoderStep:
    step = ref.DecoderStep(vocab, d_emb, d_hidden).double()
    step.load_state_dict(_step_state(g, vocab, d_emb, d_hidden))
    # How the grader rebuilds this input inside its sandbox, from exercise 3.2's code: see host/cases.py, _encode_input.
    step.course_given = ("3.2", (vocab, d_emb, d_hidden))  # type: ignore[assignment]  # a plain attribute
    return step.eval()


def _tf_cases(g: torch.Generator) -> list[Case]:
    cases = []
    for b, t in ((1, 4), (3, 5), (2, 1)):
        cases.append(
            Case(f"batch of {b}, target length {t}", (_given_step(g, 8, 3, 4), randn(g, b, 4), _ids(g, 8, b, t), BOS))
        )
    return cases


def _tf_unshifted(step, h0, targets, bos_id):
    h, out = h0, []
    for t in range(targets.shape[1]):
        logits, h = step(targets[:, t], h)
        out.append(logits)
    return torch.stack(out, dim=1)


def _tf_own_predictions(step, h0, targets, bos_id):
    return _greedy_logits(step, h0, bos_id, targets.shape[1])


def _greedy_logits(step, h0, bos_id, n):
    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)
    h, out = h0, []
    for _ in range(n):
        logits, h = step(y, h)
        y = logits.argmax(-1)
        out.append(logits)
    return torch.stack(out, dim=1)


def _tf_state_reset(step, h0, targets, bos_id):
    inputs = ref.shift_right(targets, bos_id)
    return torch.stack([step(inputs[:, t], h0)[0] for t in range(targets.shape[1])], dim=1)


def _greedy_cases(g: torch.Generator) -> list[Case]:
    return [
        Case(f"batch of {b}, {n} steps", (_given_step(g, 9, 4, 6), randn(g, b, 6, scale=2.0), BOS, n))
        for b, n in ((1, 5), (4, 6), (3, 1))
    ]


def _greedy_always_bos(step, h0, bos_id, max_len):
    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)
    h, out = h0, []
    for _ in range(max_len):
        logits, h = step(y, h)
        out.append(logits)
    return torch.stack(out, dim=1)


def _greedy_state_reset(step, h0, bos_id, max_len):
    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long)
    out = []
    for _ in range(max_len):
        logits, _ = step(y, h0)
        y = logits.argmax(-1)
        out.append(logits)
    return torch.stack(out, dim=1)


# 3.5 corpus BLEU ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _test_sentences() -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Every test sentence's references, tokenised: ((ref tokens, ...), ...), in file order."""
    from ..data.tatoeba import multi_reference, tatoeba_split

    return tuple(
        tuple(tuple(bleu_ref.tokenize_13a(r)) for r in refs) for _, refs in multi_reference(tatoeba_split().test)
    )


def _pick(g: torch.Generator, n: int, min_refs: int = 1, min_len: int = 4) -> list[tuple[tuple[str, ...], ...]]:
    pool = [refs for refs in _test_sentences() if len(refs) >= min_refs and len(refs[0]) >= min_len]
    return [pool[i] for i in torch.randperm(len(pool), generator=g)[:n].tolist()]


def _repeat(g: torch.Generator, tokens) -> list[str]:
    # a word said twice: more copies of it than any reference holds, which only the clip refuses to credit
    i = int(torch.randint(len(tokens), (1,), generator=g))
    return list(tokens[: i + 1]) + [tokens[i]] + list(tokens[i + 1 :])


def _cut(g: torch.Generator, tokens) -> list[str]:
    # the ending dropped: a short hypothesis, whose precision alone would not suffer
    keep = max(2, len(tokens) - 1 - int(torch.randint(len(tokens) // 2 + 1, (1,), generator=g)))
    return list(tokens[:keep])


def _bleu_case(label: str, pairs) -> Case:
    hypotheses = [list(h) for h, _ in pairs]
    references = [[list(r) for r in refs] for _, refs in pairs]
    return Case(label, (hypotheses, references))


def _bleu_cases(g: torch.Generator) -> list[Case]:
    worked = (
        "el gato está sobre la alfombra .".split(),
        ["el gato está en la alfombra .".split(), "hay un gato sobre la alfombra .".split()],
    )
    repeated = [(_repeat(g, refs[0]), refs) for refs in _pick(g, 120)]
    several = [(_repeat(g, refs[0]), refs[1:]) for refs in _pick(g, 80, min_refs=3)]
    cut = [(_cut(g, refs[0]), refs) for refs in _pick(g, 100, min_len=6)]
    short = [(list(refs[0][:3]), refs) for refs in _pick(g, 20)]  # no hypothesis holds a 4-gram
    mixed = repeated[:40] + cut[:40] + [(list(refs[0]), refs) for refs in _pick(g, 40, min_refs=2)]
    return [
        _bleu_case("one sentence, two references (the worked example)", [worked]),
        _bleu_case("120 test sentences, each hypothesis a reference with one word said twice", repeated),
        _bleu_case("80 sentences with 3+ references, scored against all but the first", several),
        _bleu_case("100 sentences, each hypothesis a reference with its ending cut", cut),
        _bleu_case("20 hypotheses of three words: no 4-gram to match", short),
        _bleu_case("120 sentences: repeated words, cut endings and exact references mixed", mixed),
    ]


def _bleu_unclipped(hypotheses, references):
    return _bleu_from(*bleu_ref.bleu_statistics(hypotheses, references, clip=False))


def _bleu_from(matches, totals, c, r, brevity=True, mean="geometric"):
    if c == 0 or (mean == "geometric" and min(matches) == 0):
        return 0.0
    p = [m / t if t else 0.0 for m, t in zip(matches, totals)]
    score = math.exp(sum(map(math.log, p)) / len(p)) if mean == "geometric" else sum(p) / len(p)
    return 100 * score * (math.exp(1 - r / c) if brevity and c < r else 1.0)


def _bleu_no_brevity(hypotheses, references):
    return _bleu_from(*bleu_ref.bleu_statistics(hypotheses, references), brevity=False)


def _bleu_arithmetic(hypotheses, references):
    return _bleu_from(*bleu_ref.bleu_statistics(hypotheses, references), mean="arithmetic")


def _bleu_sentence_average(hypotheses, references):
    return sum(bleu_ref.bleu([h], [r]) for h, r in zip(hypotheses, references)) / len(hypotheses)


def _bleu_first_reference_length(hypotheses, references):
    matches, totals, c, _ = bleu_ref.bleu_statistics(hypotheses, references)
    return _bleu_from(matches, totals, c, sum(len(refs[0]) for refs in references))


# 3.6 fool a BLEU with a part missing ----------------------------------------------------------------

FOOLED = 2.0  # the broken BLEU must score the hypothesis at least this many times higher than BLEU does
AT_LEAST = 20.0  # ... and at least this high, so that two zeros do not count


def _fool_cases(g: torch.Generator) -> list[Case]:
    # test sentences whose every reference has 8 tokens or more, so that a short hypothesis can be far shorter
    pool = [refs for refs in _pick(g, 400) if min(len(r) for r in refs) >= 8]
    one = [refs for refs in pool if len(refs) == 1][:2]
    several = [refs for refs in pool if len(refs) >= 2][:1]
    chosen = one + several
    return [
        Case(
            f"{len(refs)} reference{'s' if len(refs) > 1 else ''}: {' '.join(refs[0])[:50]}", ([list(r) for r in refs],)
        )
        for refs in chosen
    ]


def fool_bleu(references):
    """Two hypotheses for one sentence: one that only the clip sees through, one that only the brevity penalty does.

    references: a list of token lists -> (hypothesis for the BLEU without clipping, hypothesis for the BLEU
    without the brevity penalty), each a list of tokens.
    """
    shortest = min(references, key=len)
    repeated = list(shortest[:4]) * 5  # one matched 4-gram, said five times: credited once by the clip
    prefix = list(shortest[:4])  # every n-gram matches, but it is less than half the reference's length
    return repeated, prefix


def _judge_fooled(case: Case, answer) -> str | None:
    (references,) = case.args
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return f"the answer should be a pair of hypotheses (two lists of tokens), got {registry.describe(answer)}"
    for i, hypothesis in enumerate(answer):
        if not isinstance(hypothesis, (list, tuple)) or not all(isinstance(w, str) for w in hypothesis):
            return f"hypothesis {i + 1} should be a list of tokens (strings), got {registry.describe(hypothesis)}"
        if not 1 <= len(hypothesis) <= 200:
            return f"hypothesis {i + 1} should hold between 1 and 200 tokens, got {len(hypothesis)}"
    for hypothesis, broken, missing in (
        (answer[0], _bleu_unclipped, "without the clip"),
        (answer[1], _bleu_no_brevity, "without the brevity penalty"),
    ):
        hypothesis = list(hypothesis)
        fooled, real = broken([hypothesis], [references]), bleu_ref.bleu([hypothesis], [references])
        if fooled < AT_LEAST or fooled < FOOLED * real:
            return (
                f"the BLEU {missing} gives '{' '.join(hypothesis)[:80]}' {fooled:.1f} and BLEU {real:.1f}; it must "
                f"give at least {AT_LEAST:g} and {FOOLED:g} times BLEU's score"
            )
    return None


def _fool_with(first, second):
    return lambda references: (first(min(references, key=len)), second(min(references, key=len)))


register(
    Exercise(
        id="3.1",
        title="the encoder",
        idea=(
            "a sequence's summary is the encoder's state after its last real token; the padding after it must "
            "not change it."
        ),
        points=3,
        name="Encoder",
        kind="module",
        parts={(0,): 'the tensor of outputs', (1,): 'the final state'},
        reference=ref.Encoder,
        make_cases=_encoder_cases,
        mistakes=(
            Mistake(
                "`final` is the state at the last position, which is padding for the shorter sequences: take "
                "each sequence's state at its own last real token (lengths - 1).",
                _EncoderLastPosition,
            ),
            Mistake(
                "`final` is the state after the first token; the encoder's summary is its state after the last "
                "real token.",
                _EncoderFirstPosition,
            ),
        ),
    ),
    Exercise(
        id="3.2",
        title="a decoder step",
        idea=(
            "a step embeds the previous token, updates the state with the cell, and scores the vocabulary from "
            "the new state."
        ),
        points=2,
        name="DecoderStep",
        kind="module",
        parts={(0,): 'the tensor of logits', (1,): 'the new state h_new'},
        reference=ref.DecoderStep,
        make_cases=_step_cases,
        mistakes=(
            Mistake(
                "the logits come from the old state h: compute them from the new state that the cell returns.",
                _StepOldState,
            ),
            Mistake("return the new state h_new, not the state you were given.", _StepReturnsOldState),
        ),
    ),
    Exercise(
        id="3.3",
        title="teacher forcing",
        idea=(
            "in training, the input at step t is the true previous token (<bos> at the start), whatever the "
            "decoder predicted, and the state carries on from step to step."
        ),
        points=3,
        name="teacher_forcing",
        kind="function",
        reference=ref.teacher_forcing,
        make_cases=_tf_cases,
        mistakes=(
            Mistake(
                "the inputs are not shifted: at step t the decoder must get the previous token (<bos> at t = 0, "
                "then targets[:, t-1]), not the token it has to predict.",
                _tf_unshifted,
            ),
            Mistake(
                "the decoder is fed its own predictions: with teacher forcing it gets the true previous token.",
                _tf_own_predictions,
            ),
            Mistake(
                "every step starts again from h0: carry the state returned by one step into the next.", _tf_state_reset
            ),
        ),
    ),
    Exercise(
        id="3.4",
        title="greedy decoding",
        idea=(
            "at test time there is no reference: each step reads the token that the step before chose, and the "
            "state carries on."
        ),
        points=2,
        name="greedy_decode",
        kind="function",
        reference=ref.greedy_decode,
        make_cases=_greedy_cases,
        mistakes=(
            Mistake(
                "every step gets <bos> as input: feed back the token chosen at the previous step.", _greedy_always_bos
            ),
            Mistake(
                "every step starts again from h0: carry the state returned by one step into the next.",
                _greedy_state_reset,
            ),
        ),
    ),
    Exercise(
        id="3.5",
        title="corpus BLEU",
        idea=(
            "count each order of n-grams over the whole corpus before dividing, credit an n-gram at most as "
            "often as one reference holds it, average the four precisions in log space, and penalise output "
            "shorter than the closest references."
        ),
        points=3,
        name="bleu",
        kind="function",
        reference=bleu_ref.bleu,
        make_cases=_bleu_cases,
        mistakes=(
            Mistake(
                "every n-gram of the hypothesis that occurs in a reference is credited, however often it repeats: "
                "clip each n-gram's count at the most times it occurs in any one reference.",
                _bleu_unclipped,
            ),
            Mistake(
                "short hypotheses are not penalised: multiply by the brevity penalty exp(1 - r/c) when the "
                "hypotheses' total length c is below r.",
                _bleu_no_brevity,
            ),
            Mistake(
                "the four precisions are averaged arithmetically: BLEU takes their geometric mean, "
                "exp of the mean of their logarithms (so one order without a match makes it 0).",
                _bleu_arithmetic,
            ),
            Mistake(
                "this is the mean of sentence-level scores: corpus BLEU adds up the matches, the n-gram counts "
                "and the lengths over all sentences first, and computes one score from the totals.",
                _bleu_sentence_average,
            ),
            Mistake(
                "r is the first reference's length: take, for each sentence, the reference length closest to "
                "the hypothesis's (the shorter of two equally close).",
                _bleu_first_reference_length,
            ),
        ),
    ),
    Exercise(
        id="3.6",
        title="two ways to fool a broken BLEU",
        idea=(
            "each part of BLEU is there to refuse one kind of cheap hypothesis; for each broken version, ask what "
            "it no longer refuses, and build a hypothesis that has exactly that fault and nothing else wrong."
        ),
        points=3,
        name="fool_bleu",
        kind="function",
        reference=fool_bleu,
        make_cases=_fool_cases,
        judge=_judge_fooled,
        mistakes=(
            Mistake(
                "a reference itself scores 100 with every version: a hypothesis that fools a broken BLEU must have "
                "the fault its missing part would punish.",
                lambda references: (list(references[0]), list(references[0])),
            ),
            Mistake(
                "hypotheses shorter than four tokens have no 4-gram to match, so every version gives 0: keep at "
                "least one matched 4-gram.",
                _fool_with(lambda r: [r[0]] * 3, lambda r: list(r[:3])),
            ),
            Mistake(
                "one word repeated matches unigrams only, and BLEU's geometric mean is 0 without a 4-gram match, "
                "broken or not: repeat a longer piece of the reference.",
                _fool_with(lambda r: [r[0]] * 20, lambda r: list(r[:4])),
            ),
            Mistake(
                "a hypothesis only a word or two shorter than the reference loses little to the brevity penalty: "
                "the penalty, exp(1 - r/c), bites when c is well below r.",
                _fool_with(lambda r: list(r[:4]) * 5, lambda r: list(r[:-1])),
            ),
        ),
    ),
)
