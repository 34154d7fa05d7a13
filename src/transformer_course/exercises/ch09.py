"""Chapter 9 exercises: the length-normalised score, one step of beam search, attention for the newest
position with a key/value cache, how sure a model is (the mean entropy of its next-token distributions), and an
experiment: a bigram model on which greedy decoding loses to beam search.

Exercise 9.2 works on one sentence, with its hypotheses as tuples of token ids: the grader compares tensors
of floats to a tolerance and other values exactly, and token ids are best compared as what they are, ints.
Exercise 9.3 is judged: the course's own greedy decoding and beam search run on the student's table.
"""

from __future__ import annotations

import math

import torch

from ..decoding import confidence
from ..decoding import search as ref
from ..grading import registry
from ..grading.registry import Case, Exercise, Mistake, count, randn, register, size

NOTEBOOK = "09_beam_search.ipynb"
EOS = 2


# 9.1 the length-normalised score ---------------------------------------------------------------------------


def _score_cases(g: torch.Generator) -> list[Case]:
    def case(label, n, alpha, longest):
        log_prob = -randn(g, n).abs() * 4 - 0.1  # log-probabilities: negative
        length = torch.randint(1, longest + 1, (n,), generator=g)
        return Case(label, (log_prob, length, alpha))

    return [
        case("N = 5 hypotheses of 1 to 20 tokens, alpha = 0.6", 5, 0.6, 20),
        case("N = 4, alpha = 1.0", 4, 1.0, 12),
        case("N = 3, alpha = 0 (no length penalty)", 3, 0.0, 9),
        case("N = 6 of 1 to 40 tokens, alpha = 1.5", 6, 1.5, 40),
    ]


def _lp(length, alpha, dtype):
    return ((5 + length.to(dtype)) / 6) ** alpha


def _score_twice(log_prob, length, alpha):
    return log_prob / _lp(length, alpha, log_prob.dtype) / _lp(length, alpha, log_prob.dtype)


def _score_multiplied(log_prob, length, alpha):
    return log_prob * _lp(length, alpha, log_prob.dtype)


def _score_alpha_factor(log_prob, length, alpha):
    return log_prob / ((5 + length.to(log_prob.dtype)) / 6 * alpha)


def _score_length_power(log_prob, length, alpha):
    return log_prob / length.to(log_prob.dtype) ** alpha


def _score_in_float32(log_prob, length, alpha):
    # int64 lengths divided by 6 give PyTorch's default float32: the penalty loses digits 8 and beyond
    return log_prob / ((5 + length) / 6) ** alpha


# 9.2 one step of beam search -------------------------------------------------------------------------------


def _beam_per_beam(prefixes, scores, logp, beam_size, eos_id):
    # each hypothesis ranks its own continuations (topk over the last axis), read hypothesis by hypothesis
    n, vocab = logp.shape
    top, tokens = (scores[:, None] + logp).topk(min(2 * beam_size, vocab), dim=-1)  # (n, 2K)
    beams = torch.arange(n).repeat_interleave(top.shape[1])
    return ref.select_hypotheses(prefixes, top.flatten(), beams, tokens.flatten(), beam_size, eos_id)


def _beam_not_accumulated(prefixes, scores, logp, beam_size, eos_id):
    return ref.beam_step(prefixes, torch.zeros_like(scores), logp, beam_size, eos_id)


def _best_k(prefixes, scores, logp, beam_size):
    vocab = logp.shape[1]
    top, index = (scores[:, None] + logp).flatten().topk(beam_size)
    return top, [tuple(prefixes[i // vocab]) + (i % vocab,) for i in index.tolist()]


def _beam_finished_expanded(prefixes, scores, logp, beam_size, eos_id):
    top, hypotheses = _best_k(prefixes, scores, logp, beam_size)  # the best K live on, <eos> or not
    done = [r for r, h in enumerate(hypotheses) if h[-1] == eos_id]
    return (tuple(hypotheses), top), (tuple(hypotheses[r] for r in done), top[torch.tensor(done, dtype=torch.long)])


def _beam_top_k_only(prefixes, scores, logp, beam_size, eos_id):
    top, hypotheses = _best_k(prefixes, scores, logp, beam_size)  # the beam shrinks by the finished ones
    live = [r for r, h in enumerate(hypotheses) if h[-1] != eos_id]
    done = [r for r, h in enumerate(hypotheses) if h[-1] == eos_id]
    pick = lambda ranks: top[torch.tensor(ranks, dtype=torch.long)]
    return (tuple(hypotheses[r] for r in live), pick(live)), (tuple(hypotheses[r] for r in done), pick(done))


def _beam_eos_dropped(prefixes, scores, logp, beam_size, eos_id):
    masked = logp.clone()
    masked[:, eos_id] = -math.inf
    (live, live_scores), _ = ref.beam_step(prefixes, scores, masked, beam_size, eos_id)
    return (live, live_scores), ((), logp.new_zeros(0))


def _beam_eos_past_k(prefixes, scores, logp, beam_size, eos_id):
    # the off-by-one `rank <= beam_size`: a candidate that ends in <eos> just after the best K finishes as well
    (live, live_scores), _ = ref.beam_step(prefixes, scores, logp, beam_size, eos_id)
    vocab = logp.shape[1]
    top, index = (scores[:, None] + logp).flatten().topk(min(beam_size + 1, logp.numel()))
    done = [r for r, i in enumerate(index.tolist()) if i % vocab == eos_id]
    finished = tuple(tuple(prefixes[index[r].item() // vocab]) + (eos_id,) for r in done)
    return (live, live_scores), (finished, top[torch.tensor(done, dtype=torch.long)])


_BEAM_MISTAKES = (
    _beam_per_beam,
    _beam_not_accumulated,
    _beam_finished_expanded,
    _beam_top_k_only,
    _beam_eos_dropped,
    _beam_eos_past_k,
)


def _differs(a, b) -> bool:
    from ..grading.registry import compare

    return compare(a, b, 1e-9, 1e-9) is not None


def _output(mistake, args):
    try:
        return mistake(*args)
    except Exception as exc:  # noqa: BLE001 - a mistake may fail anyhow, e.g. a back-pointer past the last hypothesis
        return type(exc).__name__


def _beam_case(g: torch.Generator, label: str, n: int, k: int, vocab: int, t: int, want) -> Case:
    """Draw hypotheses and log-probabilities until ``want(reference output, mistakes' outputs)`` holds."""
    for _ in range(200):
        # distinct first tokens: a continuation of the wrong hypothesis cannot look like the right one
        first = (torch.randperm(vocab - 3, generator=g)[:n] + 3).tolist()
        prefixes = tuple(
            tuple([f] + torch.randint(3, vocab, (max(t - 1, 0),), generator=g).tolist())[:t] for f in first
        )
        scores = (
            (-randn(g, n).abs() * 2 - 0.5 * t).sort(descending=True).values
            if t
            else torch.zeros(1, dtype=torch.float64)
        )
        raw = randn(g, n, vocab, scale=1.5)
        raw[:, EOS] += randn(g, n).abs() * 1.5  # <eos> often among the best, as in a real model
        args = (prefixes, scores, torch.log_softmax(raw, dim=-1), k, EOS)
        expected = ref.beam_step(*args)
        if want(expected, [_output(m, args) for m in _BEAM_MISTAKES]):
            return Case(label, args)
    raise RuntimeError(f"no case found for {label!r}")  # pragma: no cover - the draws above always find one


def _beam_cases(g: torch.Generator) -> list[Case]:
    # Sizes drawn per seed; each case is redrawn until it has the property its label states, so that the fixed
    # edge cases (a finished candidate among the best K, the first step, every best candidate finished, <eos>
    # just past the best K) are there on every seed, the grader's as the self-check's.
    def every_mistake_shows(expected, wrong):  # each mistake gives its own output, and none the reference's
        outputs = [expected] + wrong
        return (
            len(expected[1][0]) == 1
            and not any(isinstance(w, str) for w in wrong)
            and all(_differs(a, b) for i, a in enumerate(outputs) for b in outputs[i + 1 :])
        )

    def sizes(n: int, k: int, v: int, t: int) -> str:
        return f"{n} live hypotheses of {count(t, 'token')}, beam {k}, V = {v}"  # n >= 2 in every case

    k, v, t = size(g, 3, 4), size(g, 8, 10), size(g, 1, 3)
    first = _beam_case(
        g, f"{sizes(k, k, v, t)}; one of the best {k} candidates ends in <eos>", k, k, v, t, every_mistake_shows
    )
    k, v = size(g, 3, 5), size(g, 8, 12)
    start = _beam_case(
        g, f"the first step: one empty hypothesis with score 0, beam {k}, V = {v}", 1, k, v, 0, lambda e, w: True
    )
    v, t = size(g, 5, 8), size(g, 2, 4)
    both = _beam_case(
        g, f"{sizes(2, 2, v, t)}; both of the best 2 end in <eos>", 2, 2, v, t, lambda e, w: len(e[1][0]) == 2
    )
    k, v, t = size(g, 2, 4), size(g, 8, 10), size(g, 1, 3)
    boundary = _beam_case(  # the boundary: an off-by-one (rank <= K) finishes it too
        g,
        f"{sizes(k, k, v, t)}; the candidate just after the best {k} ends in <eos>, the best {k} do not",
        k,
        k,
        v,
        t,
        lambda e, w: len(e[1][0]) == 0 and _differs(e, w[_BEAM_MISTAKES.index(_beam_eos_past_k)]),
    )
    k, v, t = size(g, 3, 5), size(g, 10, 14), size(g, 1, 2)
    none = _beam_case(
        g, f"{sizes(k, k, v, t)}; none of the best {k} ends in <eos>", k, k, v, t, lambda e, w: len(e[1][0]) == 0
    )
    return [first, start, both, boundary, none]


# 9.4 attention for the newest position, with a key/value cache -----------------------------------------------


def _cache_cases(g: torch.Generator) -> list[Case]:
    # Sizes drawn per seed; d_k >= 2 (with one feature, forgetting the scale changes nothing) and, but for the
    # first step, t >= 1 cached positions (with none, is_causal=True happens to be right).
    def case(what, r, h, t, d_k):
        q, k_new, v_new = randn(g, r, h, 1, d_k), randn(g, r, h, 1, d_k), randn(g, r, h, 1, d_k)
        cache = (randn(g, r, h, t, d_k), randn(g, r, h, t, d_k)) if t else (None, None)
        cached = "no cache yet (None)" if t == 0 else f"t = {count(t, 'cached position')}"
        return Case(
            f"{what}R = {count(r, 'row')}, h = {count(h, 'head')}, {cached}, d_k = {d_k}", (q, k_new, v_new, *cache)
        )

    return [
        case("", size(g, 1, 3), size(g, 2, 4), size(g, 2, 8), size(g, 2, 6)),
        case("the first step: ", size(g, 1, 3), size(g, 1, 4), 0, size(g, 2, 6)),
        case("", size(g, 1, 3), size(g, 1, 4), size(g, 4, 10), size(g, 2, 4)),
        case("one cached position: ", size(g, 1, 3), size(g, 1, 4), 1, size(g, 2, 6)),
    ]


def _appended(cache, new):
    return new if cache is None else torch.cat([cache, new], dim=2)


def _attend(q, k, v, scale=True):
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def _cache_is_causal(q, k_new, v_new, cache_k, cache_v):
    k, v = _appended(cache_k, k_new), _appended(cache_v, v_new)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), k, v


def _cache_new_not_seen(q, k_new, v_new, cache_k, cache_v):
    k, v = (k_new, v_new) if cache_k is None else (cache_k, cache_v)
    return _attend(q, k, v), _appended(cache_k, k_new), _appended(cache_v, v_new)


def _cache_not_kept(q, k_new, v_new, cache_k, cache_v):
    k, v = _appended(cache_k, k_new), _appended(cache_v, v_new)
    return _attend(q, k, v), k_new, v_new


def _cache_not_appended(q, k_new, v_new, cache_k, cache_v):
    k, v = _appended(cache_k, k_new), _appended(cache_v, v_new)
    return _attend(q, k, v), cache_k, cache_v


def _cache_unscaled(q, k_new, v_new, cache_k, cache_v):
    k, v = _appended(cache_k, k_new), _appended(cache_v, v_new)
    return _attend(q, k, v, scale=False), k, v


# 9.3 an experiment: a model on which greedy decoding loses -------------------------------------------------

BOS = 1  # <bos>, as in every vocabulary of the course (<pad> = 0, <eos> = EOS = 2)
TRAP_GAP = 0.5  # nats: beam search's sentence must be at least this much more probable than greedy's
TIE = 1e-3  # nats: greedy's choice must beat the runner-up by at least this, or ties decide its output
ROW_TOLERANCE = 1e-6  # how far from 0 the logsumexp of a row may be


def _trap_cases(g: torch.Generator) -> list[Case]:
    def case(beam_size: int, vocab: tuple[int, int], length: tuple[int, int]) -> Case:
        vocab_size, max_len = (int(torch.randint(low, high + 1, (1,), generator=g)) for low, high in (vocab, length))
        label = f"V = {vocab_size} tokens, at most L = {max_len} tokens, beam width k = {beam_size}"
        return Case(label, (vocab_size, max_len, beam_size))

    return [case(2, (5, 6), (3, 4)), case(3, (7, 8), (5, 6)), case(2, (7, 8), (5, 6))]


class _Bigram(torch.nn.Module):
    """A bigram table as a decoder with no layers, so that the course's greedy_decode and beam_search run on it
    unchanged: the embedding of the last token is the next token's logits (a row of the table), there is no
    source to encode and no position to add."""

    bos_id = BOS
    d_model = 1  # the embedding is scaled by sqrt(d_model) = 1
    src_vocab = 1  # the one source token that the search is given: the table does not read it

    def __init__(self, table: torch.Tensor, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.tgt_embed = torch.nn.Embedding.from_pretrained(table, freeze=True)
        self.decoder = torch.nn.Module()
        self.decoder.layers = torch.nn.ModuleList()  # no layers: nothing to cache, no cross-attention
        self.decoder.norm = None  # type: ignore[assignment]  # no final norm (torch types it Tensor | Module)
        self.out = torch.nn.Identity()

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        return torch.zeros(src.shape[0], 1, 1, dtype=self.tgt_embed.weight.dtype)

    def positional(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return x


def _token(t: int) -> str:
    return {BOS: "<bos>", EOS: "<eos>"}.get(t, str(t))  # token 0 is an ordinary word here


def _sentence(tokens: list[int], max_len: int) -> list[int]:
    """Search outputs drop their <eos>: a sentence of fewer than max_len tokens ended with one."""
    return tokens + [EOS] if len(tokens) < max_len else tokens


def _log_prob(table: torch.Tensor, sentence: list[int]) -> float:
    previous = [BOS] + sentence[:-1]
    return sum(table[a, b].item() for a, b in zip(previous, sentence))


def trap_searches(table: torch.Tensor, max_len: int, beam_size: int):
    """The course's greedy decoding and beam search (alpha = 0: raw log-probabilities) from <bos> on a bigram
    table (V, V) of log-probabilities. Returns (greedy's sentence, beam search's best), each a list of token ids
    with its <eos> if it wrote one."""
    model, src, src_mask = _Bigram(table, max_len), torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1).bool()
    greedy = ref.greedy_decode(model, src, src_mask, max_len, eos_id=EOS)[0].tolist()
    beam = ref.beam_search(model, src, src_mask, beam_size, max_len, alpha=0.0, eos_id=EOS).tokens[0]
    return _sentence([t for t in greedy if t != EOS], max_len), _sentence(beam, max_len)


def _judge_trap(case: Case, answer) -> str | None:
    vocab, max_len, beam_size = case.args
    if not isinstance(answer, torch.Tensor) or not answer.dtype.is_floating_point:
        return (
            f"the answer should be a floating-point tensor of shape ({vocab}, {vocab}), got {registry.describe(answer)}"
        )
    if tuple(answer.shape) != (vocab, vocab):
        return f"the table should have shape ({vocab}, {vocab}), one row per token, got {tuple(answer.shape)}"
    table = answer.detach().double().cpu()
    if table.isnan().any() or (table == math.inf).any():
        row = int((table.isnan() | (table == math.inf)).any(dim=1).nonzero()[0])
        return f"row {row} of the table holds NaN or +inf; every entry must be a log-probability (-inf allowed)"
    total = table.logsumexp(dim=1)  # (V,): 0 for a log-distribution
    off = (total.abs() > ROW_TOLERANCE).nonzero()
    if len(off):
        row = int(off[0])
        return (
            f"the rows must be log-distributions, but row {row} (the next token after {_token(row)}) has "
            f"logsumexp {total[row].item():.4g}: its exponentials sum to {total[row].exp().item():.4g}, not 1"
        )
    greedy, beam = trap_searches(table, max_len, beam_size)
    for a, _ in zip([BOS] + greedy[:-1], greedy):
        top = table[a].topk(2).values
        if top[0] - top[1] < TIE:
            return (
                f"after {_token(a)} the best next tokens tie (log-probability {top[0].item():.4g}): greedy's output "
                f"would depend on how ties are broken; make its choice clear by at least {TIE:g} nats at every step"
            )
    words = lambda s: " ".join(map(_token, s))
    greedy_lp, beam_lp = _log_prob(table, greedy), _log_prob(table, beam)
    if greedy == beam:
        return f"greedy decoding and beam search of width {beam_size} both write '{words(greedy)}' (log P = {greedy_lp:.3f})"
    if beam_lp < greedy_lp + TRAP_GAP:
        return (
            f"beam search's '{words(beam)}' has log P = {beam_lp:.3f} and greedy's '{words(greedy)}' {greedy_lp:.3f}: "
            f"a gap of {beam_lp - greedy_lp:.3f} nats; it must be at least {TRAP_GAP:g}"
        )
    return None


def greedy_trap(vocab_size: int, max_len: int, beam_size: int) -> torch.Tensor:
    """A bigram table (V, V) of log-probabilities, row a: the next token after a, on which greedy decoding writes a
    less probable sentence than beam search: the best first token (the lure, 3) leads only to a flat row, the
    second best (4) to a near-certain <eos>. Greedy: 3 <eos>, P = 0.5 x 0.3; beam: 4 <eos>, P = 0.4 x 0.96."""
    v = vocab_size
    probs = torch.full((v, v), 0.1 / (v - 1), dtype=torch.float64)  # any other token: <eos> with probability 0.9
    probs[:, EOS] = 0.9
    probs[BOS] = 0.1 / (v - 2)  # after <bos>: the lure 0.5, the good token 0.4, the rest share 0.1
    probs[BOS, 3], probs[BOS, 4] = 0.5, 0.4
    probs[3] = 0.7 / (v - 1)  # after the lure, a flat row: <eos> 0.3, every other token 0.7 / (V - 1)
    probs[3, EOS] = 0.3
    probs[4] = 0.04 / (v - 1)  # after the good token, <eos> almost surely
    probs[4, EOS] = 0.96
    return probs.log()


def _trap_table(first: dict, after: dict, vocab_size: int) -> torch.Tensor:
    """Log-probabilities: row BOS from ``first`` (token -> probability), row a from ``after[a]``, each row's
    remaining probability spread evenly over its other tokens; rows not given put 0.9 on <eos>."""
    probs = torch.empty(vocab_size, vocab_size, dtype=torch.float64)
    for a in range(vocab_size):
        given = first if a == BOS else after.get(a, {EOS: 0.9})
        probs[a] = (1 - sum(given.values())) / (vocab_size - len(given))
        for b, p in given.items():
            probs[a, b] = p
    return probs.log()


def _trap_uniform(vocab_size, max_len, beam_size):
    return torch.full((vocab_size, vocab_size), -math.log(vocab_size), dtype=torch.float64)


def _trap_chain(vocab_size, max_len, beam_size):
    # <bos> -> 3 -> 4 -> ... -> V - 1 -> <eos>, each with probability 0.9
    after = {a: {a + 1: 0.9} for a in range(3, vocab_size - 1)}
    return _trap_table({3: 0.9}, {**after, vocab_size - 1: {EOS: 0.9}}, vocab_size)


def _trap_probabilities(vocab_size, max_len, beam_size):
    return greedy_trap(vocab_size, max_len, beam_size).exp()


def _trap_unnormalised(vocab_size, max_len, beam_size):
    weights = {3: 5.0, 4: 4.0}  # the lure and the good token as weights 5 and 4, never divided by the row's total
    table = greedy_trap(vocab_size, max_len, beam_size)
    table[BOS, 3], table[BOS, 4] = math.log(weights[3]), math.log(weights[4])
    return table


def _trap_shallow(vocab_size, max_len, beam_size):
    # the trap, but the lure's continuation is not flat enough: greedy loses by 0.22 nats only
    return _trap_table({3: 0.45, 4: 0.4}, {3: {EOS: 0.5}, 4: {EOS: 0.7}}, vocab_size)


# 9.5 how sure the model is: the mean entropy of its next-token distributions ---------------------------------


def _entropy_cases(g: torch.Generator) -> list[Case]:
    # Padded positions get scores of their own (as a real model's do), so that counting them shows; lengths differ,
    # so that a mean per sentence differs from the mean per position.
    def case(label, lengths, vocab, scale=2.0):
        b, t = len(lengths), max(lengths)
        mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        return Case(label, (randn(g, b, t, vocab, scale=scale), mask))

    n, v = size(g, 2, 4), size(g, 6, 9)
    return [
        case(f"B = 2 sentences of {n + 3} and {n} positions (padded), V = {v}", [n + 3, n], v),
        case(f"one sentence, no padding: T = {n + 1}, V = {v}", [n + 1], v),
        case(f"lengths 1, {n + 4} and 2, V = {v}: a mean per position, not per sentence", [1, n + 4, 2], v),
        case(
            f"a nearly certain model: scores spread over thousands, most probabilities 0 in float64, V = {v}",
            [n + 2, n],
            v,
            scale=1000.0,
        ),
    ]


def _entropy_with_padding(logits, mask):
    return confidence.entropies(logits).mean()


def _entropy_in_bits(logits, mask):
    return confidence.mean_entropy(logits, mask) / math.log(2)


def _entropy_per_sentence(logits, mask):
    h = confidence.entropies(logits) * mask  # (B, T)
    return (h.sum(1) / mask.sum(1)).mean()


def _entropy_of_scores(logits, mask):
    return -(logits.exp() * logits).sum(-1)[mask].mean()


def _entropy_of_softmax_log(logits, mask):
    p = torch.softmax(logits, dim=-1)
    return -(p * p.log()).sum(-1)[mask].mean()  # 0 * log 0 = 0 * -inf = nan


def _entropy_negative(logits, mask):
    return -confidence.mean_entropy(logits, mask)


def _entropy_over_positions(logits, mask):
    log_p = torch.log_softmax(logits, dim=1)  # over the positions, not the vocabulary
    return -(log_p.exp() * log_p).sum(-1)[mask].mean()


register(
    Exercise(
        id="9.1",
        title="the length-normalised score",
        idea=(
            "a finished hypothesis's score is its log-probability divided by the length penalty of its length, "
            "so that a long hypothesis is not punished merely for being long."
        ),
        points=2,
        name="normalised_score",
        kind="function",
        reference=ref.normalised_score,  # the score decoding.beam_search gives its finished hypotheses
        make_cases=_score_cases,
        mistakes=(
            Mistake("the length penalty is applied twice (log P / lp(n)^2): divide by lp(n) once.", _score_twice),
            Mistake(
                "the log-probability is multiplied by lp(n); divide it: lp(n) > 1 must bring a long hypothesis's "
                "(negative) score closer to 0.",
                _score_multiplied,
            ),
            Mistake("alpha is an exponent, not a factor: lp(n) = ((5 + n) / 6) ** alpha.", _score_alpha_factor),
            Mistake("this divides by n ** alpha; GNMT's penalty is ((5 + n) / 6) ** alpha.", _score_length_power),
            Mistake(
                "the penalty is computed in float32: an int64 length divided by 6 becomes PyTorch's default float "
                "type, about 7 significant digits. Convert the lengths to the dtype of log_prob first.",
                _score_in_float32,
            ),
        ),
        # The text asks for the precision of log_prob (float64): a float32 penalty is off by about 1e-7 relative,
        # two correct float64 formulas by 1e-15 at most.
        atol=1e-12,
        rtol=1e-12,
    ),
    Exercise(
        id="9.2",
        title="one step of beam search",
        idea=(
            "all continuations of all live hypotheses compete together; among the best, those that end in <eos> "
            "finish, and the best that do not stay live, each remembering the hypothesis it extends."
        ),
        points=4,
        name="beam_step",
        kind="function",
        parts={
            (0,): 'the live pair (hypotheses, scores)',
            (0, 0): 'the live hypotheses',
            (0, 1): 'the tensor of live scores',
            (1,): 'the finished pair (hypotheses, scores)',
            (1, 0): 'the finished hypotheses',
            (1, 1): 'the tensor of finished scores',
        },
        reference=ref.beam_step,
        make_cases=_beam_cases,
        mistakes=(
            Mistake(
                "each hypothesis ranks only its own continuations: rank all n x V candidates together (flatten "
                "them, then topk), so that a strong hypothesis can fill several beams.",
                _beam_per_beam,
            ),
            Mistake(
                "the scores are not accumulated: a candidate's score is its hypothesis's score plus the log-"
                "probability of the new token, scores[:, None] + logp.",
                _beam_not_accumulated,
            ),
            Mistake(
                "candidates that end in <eos> are still expanded: they finish (return them with the finished "
                "hypotheses) and the live beams are the best K candidates that do not end in <eos>.",
                _beam_finished_expanded,
            ),
            Mistake(
                "only the best K candidates are considered, so the beam shrinks when some of them finish: rank "
                "the best 2 K, and keep the best K that do not end in <eos> alive.",
                _beam_top_k_only,
            ),
            Mistake(
                "<eos> is never chosen, so no hypothesis can finish: candidates among the best K that end in "
                "<eos> are the finished hypotheses.",
                _beam_eos_dropped,
            ),
            Mistake(
                "a candidate that ends in <eos> finished although it is not among the best K (count the ranks "
                "from 0: the best K are ranks 0 to K - 1).",
                _beam_eos_past_k,
            ),
        ),
    ),
    Exercise(
        id="9.4",
        title="attention for the newest position, with a key/value cache",
        idea=(
            "the new position's key and value join the cache, and the new query attends over everything in it, "
            "itself included."
        ),
        points=3,
        name="attend_with_cache",
        kind="function",
        parts={(0,): 'the output', (1,): 'the returned cache of keys', (2,): 'the returned cache of values'},
        reference=ref.attend_with_cache,
        make_cases=_cache_cases,
        mistakes=(
            Mistake(
                "is_causal=True hides every key but the first from a single query (PyTorch aligns the causal "
                "mask top-left); the newest position may see every cached position: no mask.",
                _cache_is_causal,
            ),
            Mistake(
                "the new position attends to the cached positions only: append its key and value first, then "
                "attend, so that it also sees itself.",
                _cache_new_not_seen,
            ),
            Mistake(
                "the returned cache holds only the new position: return the old cache with the new key and value "
                "appended along the positions' axis.",
                _cache_not_kept,
            ),
            Mistake(
                "the returned cache is the old one: return it with the new key and value appended along the "
                "positions axis (dim=2).",
                _cache_not_appended,
            ),
            Mistake("the scores are not scaled by 1 / sqrt(d_k).", _cache_unscaled),
        ),
    ),
    Exercise(
        id="9.5",
        title="how sure the model is: the mean entropy of its predictions",
        idea=(
            "the entropy of a next-token distribution, -sum p log p over the vocabulary, is 0 when the model is "
            "certain and grows as it hesitates; average it over the real positions only, each position weighing "
            "the same."
        ),
        points=2,
        name="mean_entropy",
        kind="function",
        reference=confidence.mean_entropy,
        make_cases=_entropy_cases,
        forbidden=("distributions", "Categorical", "entropy", "cross_entropy", "kl_div"),
        mistakes=(
            Mistake(
                "the padded positions are averaged too: keep only the positions where mask is True (logits[mask]).",
                _entropy_with_padding,
            ),
            Mistake(
                "this is in bits (log base 2); the course measures entropy in nats: use the natural log.",
                _entropy_in_bits,
            ),
            Mistake(
                "this averages each sentence, then the sentences: every position must weigh the same, so a long "
                "sentence counts more than a short one. Average over all counted positions at once.",
                _entropy_per_sentence,
            ),
            Mistake(
                "the scores are used as log-probabilities: turn them into a distribution first (log_softmax over "
                "the vocabulary).",
                _entropy_of_scores,
            ),
            Mistake(
                "p * log(p) of a softmax gives nan where a probability underflows to 0 (0 times -inf): compute "
                "log p with log_softmax, then p as its exp; the product is then 0, as it should be.",
                _entropy_of_softmax_log,
            ),
            Mistake("the sign: H = -sum p log p is at least 0, since log p <= 0.", _entropy_negative),
            Mistake(
                "the softmax runs over the positions (dim=1); a next-token distribution is over the vocabulary, the "
                "last axis (dim=-1).",
                _entropy_over_positions,
            ),
        ),
        atol=1e-9,
        rtol=1e-9,
    ),
    Exercise(
        id="9.3",
        title="a model on which greedy loses",
        idea=(
            "greedy decoding commits to the best first token before it sees what follows; give it a first token "
            "that looks best but opens only onto improbable continuations, and a slightly worse one whose "
            "continuation is nearly certain."
        ),
        points=3,
        name="greedy_trap",
        kind="function",
        reference=greedy_trap,
        make_cases=_trap_cases,
        judge=_judge_trap,
        mistakes=(
            Mistake(
                "in a uniform table every choice is a tie: greedy's output then depends only on how ties are "
                "broken. Make one first token clearly the most probable, and let it lead somewhere poor.",
                _trap_uniform,
            ),
            Mistake(
                "when every token has one near-certain successor, greedy already follows the most probable "
                "sentence and beam search finds the same one: the best first token must lead to a worse "
                "continuation than the second best does.",
                _trap_chain,
            ),
            Mistake(
                "the rows hold probabilities; the table must hold their logarithms, so that the exponentials of "
                "each row sum to 1.",
                _trap_probabilities,
            ),
            Mistake(
                "some entries are logarithms of weights that were never divided by their row's total: normalise "
                "each row before taking its logarithm (or subtract its logsumexp).",
                _trap_unnormalised,
            ),
            Mistake(
                "the trap is there but too shallow: make the lure's continuations flatter (its best one less "
                "probable), or the second-best token's continuation more certain, until the gap is 0.5 nats.",
                _trap_shallow,
            ),
        ),
    ),
)
