"""Incremental decoding, greedy decoding and beam search (decoding.py, chapter 9)."""

import itertools

import pytest
import torch

from transformer_course.decoding import search as D
from transformer_course.models import incremental
from transformer_course.models.transformer import Transformer

EOS = 2


def _model(
    norm_first: bool, seed: int = 0, src_vocab: int = 11, tgt_vocab: int = 13, layers: int = 2, d_model: int = 16
) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(
        src_vocab,
        tgt_vocab,
        d_model=d_model,
        n_heads=2,
        n_encoder_layers=layers,
        n_decoder_layers=layers,
        d_ff=32,
        dropout=0.1,
        norm_first=norm_first,
    ).double()
    with torch.no_grad():  # biases and norms away from their initial values: each one must be used right
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def _batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 11, (4, 6), generator=g)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1, 3:] = mask[3, 1:] = False
    return src.masked_fill(~mask, 0), mask


def _until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS)] if EOS in row else row


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_step_gives_the_logits_of_the_whole_prefix(norm_first):
    model = _model(norm_first)
    src, mask = _batch()
    prefix = torch.randint(3, 13, (4, 8), generator=torch.Generator().manual_seed(2))
    prefix[:, 0] = model.bos_id
    full = model.decode(model.encode(src, mask), mask, prefix)  # (B, 8, V), recomputed from scratch
    cache = D.start_decoding(model, src, mask)
    for t in range(8):
        step = D.decoder_step(model, cache, prefix[:, t])
        assert (step - full[:, t]).abs().max().item() < 1e-6, t
    assert cache.length == 8 and cache.self_k[0].shape == (4, 2, 8, 8)


def test_cached_step_in_float32_within_1e_6():
    model = _model(True).float()
    src, mask = _batch()
    prefix = torch.randint(3, 13, (4, 30), generator=torch.Generator().manual_seed(3))
    prefix[:, 0] = model.bos_id
    full = model.decode(model.encode(src, mask), mask, prefix)
    cache = D.start_decoding(model, src, mask)
    worst = max((D.decoder_step(model, cache, prefix[:, t]) - full[:, t]).abs().max().item() for t in range(30))
    assert worst < 1e-5  # float32 rounding over 30 steps; the float64 test asks 1e-6 and gets ~1e-15


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_with_cache_equals_generate_without(norm_first):
    model = _model(norm_first)
    src, mask = _batch()
    tokens, weights = D.greedy_decode(model, src, mask, 9, eos_id=None, with_weights=True)
    slow, slow_weights = model.generate(src, mask, 9, eos_id=None, use_cache=False)
    assert torch.equal(tokens, slow)
    assert torch.allclose(weights, slow_weights, atol=1e-12)
    assert torch.equal(model.generate(src, mask, 9, eos_id=None)[0], slow)  # generate uses the cache by default


@pytest.mark.parametrize("seed", range(4))
def test_beam_width_one_is_greedy(seed):
    model = _model(seed % 2 == 1, seed=seed)
    src, mask = _batch(seed)
    greedy = D.greedy_decode(model, src, mask, 10)
    beam = D.beam_search(model, src, mask, beam_size=1, max_len=10)
    assert beam.tokens == [_until_eos(row) for row in greedy.tolist()]


@pytest.mark.parametrize("k", [2, 4])
def test_batched_beam_search_equals_one_sentence_at_a_time(k):
    model = _model(True, seed=5)
    src, mask = _batch(5)
    batched = D.beam_search(model, src, mask, beam_size=k, max_len=10)
    for b in range(src.shape[0]):
        n = int(mask[b].sum())
        alone = D.beam_search(model, src[b : b + 1, :n], mask[b : b + 1, :n], beam_size=k, max_len=10)
        assert alone.tokens[0] == batched.tokens[b]
        assert alone.scores[0] == pytest.approx(batched.scores[b], abs=1e-9)
        assert [h for _, h in alone.finished[0]] == [h for _, h in batched.finished[b]]


@pytest.mark.parametrize("k", [1, 3])
def test_beam_search_takes_exercise_9_2s_step(k):
    # The search of one sentence, redone with beam_step (exercise 9.2's reference) over the whole prefix at
    # every step, finishes the same hypotheses with the same scores as the batched, cached beam_search.
    model = _model(False, seed=3)
    with torch.no_grad():
        model.out.bias[EOS] += 2.0  # <eos> within reach, so that hypotheses finish before the length limit
    src, mask = _batch(3)
    src, mask = src[:1], mask[:1]
    memory = model.encode(src, mask)
    prefixes, scores, finished = ((),), torch.zeros(1, dtype=torch.float64), []
    for step in range(1, 11):
        tgt = torch.tensor([(model.bos_id, *p) for p in prefixes])
        logits = model.decode(memory.expand(len(prefixes), -1, -1), mask.expand(len(prefixes), -1), tgt)[:, -1]
        (prefixes, scores), (done, done_scores) = D.beam_step(
            prefixes, scores, torch.log_softmax(logits.float(), dim=-1).double(), k, EOS
        )
        finished += [(D.normalised_score(s, step, 0.6), list(p[:-1])) for p, s in zip(done, done_scores.tolist())]
        if len(finished) >= k:
            break
    assert len(finished) >= k  # every hypothesis compared finished with <eos>, not at the limit
    result = D.beam_search(model, src, mask, beam_size=k, max_len=10)
    assert sorted(h for _, h in finished) == sorted(h for _, h in result.finished[0])
    best = max(finished)
    assert best[1] == result.tokens[0] and best[0] == pytest.approx(result.scores[0], abs=1e-5)


def test_beam_step_refuses_more_hypotheses_than_the_beam():
    logp = torch.log_softmax(torch.randn(3, 5, dtype=torch.float64), dim=-1)
    with pytest.raises(ValueError, match="need 1 to beam_size = 2 hypotheses"):
        D.beam_step(((3,), (4,), (5,)), torch.zeros(3, dtype=torch.float64), logp, 2, EOS)


def test_done_sentences_leave_the_batch(monkeypatch):
    model = _model(True, seed=5)
    with torch.no_grad():
        model.out.bias[EOS] = 1.0  # so that the sentences end at different steps: after 2, 3 or 10 tokens
    src, mask = _batch(5)
    k, rows = 2, []
    step = D.decoder_step
    monkeypatch.setattr(
        D, "decoder_step", lambda m, cache, tokens, *a: rows.append(len(tokens)) or step(m, cache, tokens, *a)
    )
    result = D.beam_search(model, src, mask, beam_size=k, max_len=10)
    # Each step runs K rows per sentence that does not have K finished hypotheses yet, and no more.
    lengths = [max(len(h) for _, h in f) for f in result.finished]  # tokens of a sentence's last ending, <eos> excluded
    expected = [k * sum(n >= t - 1 for n in lengths) for t in range(1, result.steps + 1)]
    assert rows == expected and rows[-1] == k < rows[0], (rows, expected)


def test_greedy_rows_that_wrote_eos_leave_the_batch(monkeypatch):
    model = _model(True, seed=5)
    with torch.no_grad():
        model.out.bias[EOS] = 1.0  # so that the rows end at different steps
    src, mask = _batch(5)
    rows, step = [], D.decoder_step
    # greedy_decode lives with the cache (transformer_course.models.incremental) and calls its decoder_step there
    monkeypatch.setattr(
        incremental, "decoder_step", lambda m, cache, tokens, *a: rows.append(len(tokens)) or step(m, cache, tokens, *a)
    )
    tokens, weights = D.greedy_decode(model, src, mask, 10, with_weights=True)
    slow, slow_weights = model.generate(src, mask, 10, use_cache=False)  # every row to the end, then filled
    ends = [row.index(EOS) + 1 if EOS in row else 10 for row in tokens.tolist()]  # tokens written, <eos> included
    # Each step runs the rows that have not written <eos> yet, and no more.
    assert rows == [sum(n >= t for n in ends) for t in range(1, tokens.shape[1] + 1)] and rows[-1] < rows[0], rows
    assert torch.equal(tokens, slow) and torch.allclose(weights, slow_weights, atol=1e-12)
    for row, n in enumerate(ends):
        assert (tokens[row, n:] == EOS).all() and (weights[row, n:] == 0).all()  # a stopped row: <eos>, no weights


def _exhaustive_best(model, src, mask, max_len, alpha):
    """Score every output of at most max_len tokens (ending in <eos>, or max_len tokens without one)."""
    memory = model.encode(src, mask)
    others = [t for t in range(model.tgt_vocab) if t != EOS]
    outputs = [list(body) + [EOS] for n in range(max_len) for body in itertools.product(others, repeat=n)]
    outputs += [list(body) for body in itertools.product(others, repeat=max_len)]
    # One batched call: position i sees inputs 0 .. i only, so the filler after a shorter output changes nothing.
    inputs = torch.tensor([[model.bos_id] + seq[:-1] + [0] * (max_len - len(seq)) for seq in outputs])
    logp = torch.log_softmax(
        model.decode(memory.expand(len(outputs), -1, -1), mask.expand(len(outputs), -1), inputs), -1
    )  # (N, max_len, V)
    best = None
    for n, seq in enumerate(outputs):
        score = sum(logp[n, i, t].item() for i, t in enumerate(seq)) / D.length_penalty(len(seq), alpha)
        if best is None or score > best[0]:
            best = (score, seq[:-1] if seq[-1] == EOS else seq)
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_wide_beam_finds_the_best_output(alpha):
    # Four target tokens and outputs of at most 4: 1 + 3 + 9 + 27 + 81 = 121 outputs to enumerate. The
    # models are picked (seeded) so that the best output is not the empty one, and a beam of 1 misses it.
    found_harder = False
    for seed in range(12):
        model = _model(False, seed=seed, tgt_vocab=4, layers=1, d_model=8)
        with torch.no_grad():
            model.out.bias[EOS] -= 2.0  # <eos> less likely: longer outputs compete
        src, mask = torch.tensor([[3, 5, 7]]), torch.ones(1, 3, dtype=torch.bool)
        best_score, best = _exhaustive_best(model, src, mask, 4, alpha)
        wide = D.beam_search(model, src, mask, beam_size=81, max_len=4, alpha=alpha)
        assert wide.tokens[0] == best and wide.scores[0] == pytest.approx(best_score, abs=1e-5)
        narrow = D.beam_search(model, src, mask, beam_size=1, max_len=4, alpha=alpha)
        found_harder |= narrow.tokens[0] != best
    assert found_harder, "no seed where greedy misses the best output: the test would not catch a narrow search"


def test_length_penalty():
    assert D.length_penalty(1, 0.0) == 1.0
    assert D.length_penalty(1, 0.6) == pytest.approx(1.0)
    assert D.length_penalty(7, 1.0) == pytest.approx(2.0)
    assert D.length_penalty(torch.tensor([1.0, 7.0]), 0.5).tolist() == pytest.approx([1.0, 2**0.5])


def test_longer_outputs_win_with_a_length_penalty():
    model = _model(True, seed=3)
    src, mask = _batch(3)
    short = D.beam_search(model, src, mask, beam_size=4, max_len=12, alpha=0.0)
    long = D.beam_search(model, src, mask, beam_size=4, max_len=12, alpha=2.0)
    assert sum(map(len, long.tokens)) >= sum(map(len, short.tokens))
    for result in (short, long):  # finished hypotheses best first, the best one returned
        for hyps, score in zip(result.finished, result.scores):
            assert [s for s, _ in hyps] == sorted((s for s, _ in hyps), reverse=True) and hyps[0][0] == score


def test_model_left_in_its_mode_and_bad_input_explained():
    model = _model(True).train()
    src, mask = _batch()
    D.beam_search(model, src, mask, 2, 5)
    D.greedy_decode(model, src, mask, 5)
    assert model.training
    with pytest.raises(ValueError, match="beam_size must be a positive int"):
        D.beam_search(model, src, mask, 0, 5)
    with pytest.raises(ValueError, match="alpha must be a number"):
        D.beam_search(model, src, mask, 2, 5, alpha=-1)
    with pytest.raises(ValueError, match="max_len=600 is more than"):
        D.greedy_decode(model, src, mask, 600)
    with pytest.raises(TypeError, match="needs a transformer_course.models.transformer.Transformer"):
        D.greedy_decode(torch.nn.Linear(2, 2), src, mask, 5)
    with pytest.raises(TypeError, match="src must be an int64 tensor"):
        D.beam_search(model, src.double(), mask, 2, 5)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        D.beam_search(model, src + 100, mask, 2, 5)


def test_log_probs_widen_to_float32_and_keep_float64():
    # beam search and the explorer score in float32 at least; the explorer's float64 models stay float64
    logits = torch.randn(3, 7, dtype=torch.float64)
    for dtype, expected in (
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
    ):
        out = D.log_probs(logits.to(dtype))
        assert out.dtype == expected
        assert torch.allclose(out.double(), torch.log_softmax(logits.to(dtype).double(), -1), atol=1e-5)
