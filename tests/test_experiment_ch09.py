"""Exercise 9.3, a model on which greedy loses: the judge, its reference answer and its known mistakes."""

import itertools
import math

import pytest
import torch

from transformer_course.exercises import ch09
from transformer_course.grading import registry

EX = registry.get("9.3")
CASES = EX.cases(registry.PUBLIC_SEED) + EX.cases(registry.HIDDEN_SEED)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_the_reference_passes_the_public_and_hidden_cases(case):
    assert registry.verdict(EX, case, EX.reference(*case.args)) is None


@pytest.mark.parametrize("mistake", EX.mistakes, ids=lambda m: m.implementation.__name__)
def test_each_mistake_fails_a_public_case(mistake):
    verdicts = [registry.verdict(EX, c, mistake.implementation(*c.args)) for c in EX.cases(registry.PUBLIC_SEED)]
    assert any(isinstance(v, str) and v for v in verdicts)


def test_the_judge_says_why_in_numbers():
    case = EX.cases(registry.PUBLIC_SEED)[0]
    v = case.args[0]
    not_normalised = ch09.greedy_trap(*case.args)
    not_normalised[3] += 0.1
    assert "row 3 (the next token after 3)" in registry.verdict(EX, case, not_normalised)
    assert "a gap of 0.219 nats" in registry.verdict(EX, case, ch09._trap_shallow(*case.args))
    assert "both write" in registry.verdict(EX, case, ch09._trap_chain(*case.args))
    assert "tie" in registry.verdict(EX, case, torch.full((v, v), -math.log(v)))


@pytest.mark.parametrize(
    "answer",
    [
        "a table",
        None,
        0.5,
        [[0.0]],
        torch.zeros(3, 3),
        torch.zeros(6, 6, dtype=torch.long),
        torch.full((6, 6), math.nan),
    ],
    ids=["string", "None", "number", "list", "wrong shape", "ints", "NaN"],
)
def test_garbage_gets_a_sentence_not_an_exception(answer):
    case = EX.cases(registry.PUBLIC_SEED)[0]  # V = 6
    assert case.args[0] == 6
    problem = EX.judge(case, answer)
    assert isinstance(problem, str) and problem and "could not be measured" not in problem


def test_impossible_tokens_are_allowed():
    case = EX.cases(registry.PUBLIC_SEED)[1]
    table = ch09.greedy_trap(*case.args)
    table[4, [t for t in range(case.args[0]) if t != ch09.EOS]] = -math.inf  # after the good token, <eos> for certain
    table[4, ch09.EOS] = 0.0
    assert registry.verdict(EX, case, table) is None
    assert registry.verdict(EX, case, table.float()) is None  # float32 rows are log-distributions too


@pytest.mark.parametrize("seed", range(4))
def test_the_course_searches_run_on_a_bigram_table_as_on_a_model(seed):
    # Greedy through the adapter is the argmax chain; a beam wide enough to hold every prefix (V ** L) finds the
    # most probable sentence of at most L tokens (those without <eos> cut at L), found here by enumerating them.
    g = torch.Generator().manual_seed(seed)
    vocab, max_len = 5, 3
    table = torch.log_softmax(torch.randn(vocab, vocab, generator=g, dtype=torch.float64) * 2, dim=-1)
    greedy, beam = ch09.trap_searches(table, max_len, vocab**max_len)
    expected = [table[ch09.BOS].argmax().item()]
    while expected[-1] != ch09.EOS and len(expected) < max_len:
        expected.append(table[expected[-1]].argmax().item())
    assert greedy == expected
    sentences = [
        list(s[: s.index(ch09.EOS) + 1] if ch09.EOS in s else s)
        for s in itertools.product(range(vocab), repeat=max_len)
    ]
    best = max(sentences, key=lambda s: ch09._log_prob(table, s))
    assert ch09._log_prob(table, beam) == pytest.approx(ch09._log_prob(table, best), abs=1e-5)
