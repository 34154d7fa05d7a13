"""Chapter 10's exercises: the references agree with the course's modules, and exercise 10.6 (a temperature as
probable as real sentences) is judged by measurement: its judge, its reference answer and its known mistakes.

The wrong answers of tests/wrong_answers/ch10.py are also run here, in-process and on many seeds, in a namespace
with math and torch only, so that they are checked before the chapter's notebook exists (tests/test_wrong_answers.py
runs them in the notebook's namespace, through the grader's static check)."""

import math
from collections import Counter

import pytest
import torch

from transformer_course.data import bpe, bpe_step
from transformer_course.exercises import ch10
from transformer_course.grading import registry
from transformer_course.grading.host.fallback import package_fallback
from transformer_course.grading.static_check import static_problem
from transformer_course.models import lm_baselines, lm_loss
from wrong_answers.ch10 import WRONG_ROUNDS

EX = registry.get("10.6")
CASES = EX.cases(registry.PUBLIC_SEED) + EX.cases(registry.HIDDEN_SEED)
IDS = [f"10.{i}" for i in range(1, 7)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_the_reference_passes_the_public_and_hidden_cases(case):
    answer = EX.reference(*case.args)
    assert registry.verdict(EX, case, answer) is None
    assert abs(answer - 1) > 0.1  # the cases are drawn so that the model's own temperature is not the answer


@pytest.mark.parametrize("mistake", EX.mistakes, ids=lambda m: m.implementation.__name__)
def test_each_mistake_fails_a_public_case(mistake):
    verdicts = [registry.verdict(EX, c, mistake.implementation(*c.args)) for c in EX.cases(registry.PUBLIC_SEED)]
    assert any(isinstance(v, str) and v for v in verdicts)


def test_the_judge_says_why_in_numbers():
    case = EX.cases(registry.PUBLIC_SEED)[0]
    log_table, valid, max_len = case.args
    target = ch10.validation_nll(log_table, valid)
    at_one = ch10.sample_nll(log_table, 1.0, max_len)
    verdict = registry.verdict(EX, case, 1.0)
    assert f"at T = 1 the samples' NLL per token under the model is {at_one:.3f} nats" in verdict
    assert f"the validation sentences' {target:.3f}" in verdict and f"{abs(at_one - target):.3f} nats" in verdict


def _monte_carlo_nll(log_table, temperature, max_len, n=4000, seed=0):
    """The samples' NLL per token under the model, estimated from n sentences sampled at the temperature (the
    same seed at every temperature, so that the bisection sees a smooth function)."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(log_table / temperature, dim=-1)
    last = torch.full((n,), ch10.BOS, dtype=torch.long)
    alive = torch.ones(n, dtype=torch.bool)
    total, tokens = 0.0, 0
    for _ in range(max_len):
        token = torch.multinomial(probs[last], 1, generator=g).squeeze(1)
        total -= float(log_table[last, token][alive].sum())
        tokens += int(alive.sum())
        alive = alive & (token != ch10.EOS)
        last = token
        if not alive.any():
            break
    return total / tokens


def test_an_honest_answer_by_sampling_passes():
    # A student without the dynamic programme: bisection on a Monte-Carlo estimate from 4000 sentences.
    for case in EX.cases(registry.PUBLIC_SEED):
        log_table, valid, max_len = case.args
        target = ch10.validation_nll(log_table, valid)
        low, high = math.log(0.05), math.log(20.0)
        for _ in range(14):
            mid = (low + high) / 2
            low, high = (mid, high) if _monte_carlo_nll(log_table, math.exp(mid), max_len) < target else (low, mid)
        assert registry.verdict(EX, case, math.exp((low + high) / 2)) is None, case.label


def test_the_exact_nll_agrees_with_sampling():
    case = EX.cases(registry.PUBLIC_SEED)[1]
    log_table, _, max_len = case.args
    for temperature in (0.5, 1.0, 2.0):
        exact = ch10.sample_nll(log_table, temperature, max_len)
        assert _monte_carlo_nll(log_table, temperature, max_len, n=20000) == pytest.approx(exact, abs=0.03)


@pytest.mark.parametrize(
    "answer",
    ["1.0", None, [1.0], math.nan, math.inf, -1.0, 0, True, torch.ones(3), torch.tensor(math.nan)],
    ids=["string", "None", "list", "NaN", "inf", "negative", "zero", "bool", "tensor of 3", "NaN tensor"],
)
def test_garbage_gets_a_sentence_not_an_exception(answer):
    case = EX.cases(registry.PUBLIC_SEED)[0]
    problem = EX.judge(case, answer)
    assert isinstance(problem, str) and problem and "could not be measured" not in problem


def test_a_tensor_or_an_int_is_measured_as_a_number():
    case = EX.cases(registry.PUBLIC_SEED)[0]
    answer = EX.reference(*case.args)
    assert EX.judge(case, torch.tensor(answer)) is None
    assert "at T = 1 " in EX.judge(case, 1)


# --- the references of the compared exercises agree with the course's modules -----------------------------------


def test_merge_step_replays_the_first_merges_of_learn_merges():
    # Until a tie involves a merged symbol: learn_merges breaks ties by id, and a merged symbol's id comes after
    # every byte character's ('th' after 'Ġ'), while 10.1 compares strings ('th' before 'Ġ').
    texts = ["the cat sat on the mat", "that hat is the best hat", "a fat cat, a thin rat"] * 3
    words = Counter(" ".join(w) for w in (bpe._to_chars(x) for t in texts for x in bpe.WORD.findall(t)))
    merges, _ = bpe.learn_merges(texts, len(bpe.SPECIALS) + len(bpe.ALPHABET) + 6, min_frequency=1)
    replayed, state = [], dict(words)
    for _ in range(len(merges)):
        pair, state = bpe_step.merge_step(state)
        replayed.append(pair)
    assert replayed[:2] == merges[:2] and replayed[2:] != merges[2:]


def test_merge_step_merges_left_to_right_without_overlap_and_adds_counts_of_words_that_meet():
    assert bpe_step.merge_step({"a a a": 2, "b a": 1}) == (("a", "a"), {"aa a": 2, "b a": 1})
    assert bpe_step.merge_step({"a b": 1, "b c": 1}) == (("a", "b"), {"ab": 1, "b c": 1})  # a tie: the smallest pair
    assert bpe_step.merge_step({"x y z": 3, "xy z": 2}) == (("x", "y"), {"xy z": 5})


@pytest.mark.parametrize("seed", range(3))
def test_lm_loss_is_next_token_loss(seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 7, 9, generator=g, dtype=torch.float64)
    ids = torch.randint(3, 9, (3, 7), generator=g)
    loss_mask = lm_loss.mask_after(ids, 4) | (torch.rand(3, 7, generator=g) < 0.3)
    loss_mask[:, -1] = True  # a target counts in every row

    class Fixed(torch.nn.Module):
        def forward(self, inputs, mask):
            return logits[:, : inputs.shape[1]]

    mask = torch.ones_like(ids, dtype=torch.bool)
    expected = lm_loss.next_token_loss(Fixed(), ids, mask, loss_mask)
    assert ch10.lm_loss(logits, ids, loss_mask).item() == pytest.approx(expected.item(), abs=1e-12)


@pytest.mark.parametrize("case", registry.get("10.4").cases(registry.PUBLIC_SEED), ids=lambda c: c.label)
def test_the_bigram_table_is_bigram_lms_on_pad_free_sentences(case):
    sequences, vocab, k = case.args
    model = lm_baselines.BigramLM(vocab, k).fit(sequences)
    assert torch.allclose(ch10.bigram_log_probs(*case.args), model.log_table(), atol=1e-12, rtol=0)


def test_the_per_word_perplexity_is_the_per_token_one_to_the_power_tokens_per_word():
    per_token, per_word = ch10.perplexities(3000.0, 1500, 1000)
    assert per_word == pytest.approx(per_token**1.5, rel=1e-12)


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_course_code_that_replaces_a_failed_answer_passes(exercise_id):
    ex = registry.get(exercise_id)
    namespace: dict = {}
    exec(compile(package_fallback(ex), f"<course code {ex.id}>", "exec"), namespace)
    for case in ex.cases(registry.PUBLIC_SEED):
        assert registry.verdict(ex, case, registry.run_case(ex, namespace[ex.name], case)) is None


# --- the wrong answers of tests/wrong_answers/ch10.py, in-process ------------------------------------------------

WRONG = [(i, ex_id, code) for i, answers in enumerate(WRONG_ROUNDS) for ex_id, code in answers.items()]


def test_every_exercise_has_three_wrong_answers_or_more():
    assert all(sum(ex_id == e for _, e, _ in WRONG) >= 3 for ex_id in IDS)


@pytest.mark.parametrize("index, ex_id, code", WRONG, ids=[f"{w[1]}-round{w[0]}" for w in WRONG])
def test_every_wrong_answer_fails_on_every_seed(index, ex_id, code):
    ex = registry.get(ex_id)
    if static_problem(code, ex, {e.name for e in registry.chapter_exercises(10)}):
        return  # refused before it runs
    namespace = {"math": math, "torch": torch}
    exec(compile(code, f"<wrong answer {ex_id}>", "exec"), namespace)
    answer = namespace[ex.name]
    seeds = range(20) if ex.judge is None else range(3)
    missed = []
    for seed in seeds:
        caught = False
        for case in ex.cases(seed):
            try:
                caught = registry.verdict(ex, case, registry.run_case(ex, answer, case)) is not None
            except Exception:  # noqa: BLE001 - an error is a failed case, for the grader too
                caught = True
            if caught:
                break
        if not caught:
            missed.append(seed)
    assert not missed, f"wrong answer {ex_id} of round {index} passes on seeds {missed}"
