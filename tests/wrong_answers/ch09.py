"""Chapter 9 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points.
"""

_SCORE = "def normalised_score(log_prob, length, alpha):\n"

_STEP = """def beam_step(prefixes, scores, logp, beam_size, eos_id):
    n, V = logp.shape
    live, live_scores, finished, finished_scores = [], [], [], []
"""
_STEP_RETURN = (
    "    return (tuple(live), logp.new_tensor(live_scores)), (tuple(finished), logp.new_tensor(finished_scores))\n"
)
# The selection of the reference, after `top` (best first), `beams` and `tokens` are computed.
_SELECT = """    for rank in range(len(top)):
        hypothesis = prefixes[beams[rank]] + (tokens[rank],)
        if tokens[rank] == eos_id:
            if rank < beam_size:
                finished.append(hypothesis)
                finished_scores.append(top[rank].item())
        elif len(live) < beam_size:
            live.append(hypothesis)
            live_scores.append(top[rank].item())
"""

_CACHE = "def attend_with_cache(q, k_new, v_new, cache_k, cache_v):\n"
_ATTEND = """    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, k, v
"""

_ENTROPY = "def mean_entropy(logits, mask):\n"

_TRAP = """def greedy_trap(vocab_size, max_len, beam_size):
    V = vocab_size
"""
# The solution's table as probabilities, every row summing to 1: after {bos}, the lure 3 and the good token 4;
# after the lure and after the good token, <eos> with probabilities {lure_eos} and {good_eos}.
_TRAP_PROBS = """    probs = torch.full((V, V), 0.1 / (V - 1), dtype=torch.float64)
    probs[:, EOS] = 0.9
    probs[{bos}] = (0.6 - {lure}) / (V - 2)
    probs[{bos}, 3], probs[{bos}, 4] = {lure}, 0.4
    probs[3] = (1 - {lure_eos}) / (V - 1)
    probs[3, EOS] = {lure_eos}
    probs[4] = (1 - {good_eos}) / (V - 1)
    probs[4, EOS] = {good_eos}
"""


def _trap(bos=1, lure=0.5, lure_eos=0.3, good_eos=0.96, log=True) -> str:
    body = _TRAP_PROBS.format(bos=bos, lure=lure, lure_eos=lure_eos, good_eos=good_eos)
    return _TRAP + body + ("    return probs.log()\n" if log else "    return probs\n")


WRONG_ROUNDS = [
    {
        "9.1": _SCORE
        + (  # the length penalty applied twice
            "    lp = ((5 + length) / 6) ** alpha\n    return log_prob / lp / lp\n"
        ),
        "9.2": _STEP
        + (  # top-k per hypothesis (over the last axis), not over all n x V candidates
            "    top, tokens = (scores[:, None] + logp).topk(min(2 * beam_size, V), dim=-1)\n"
            "    beams = [b for b in range(n) for _ in range(top.shape[1])]\n"
            "    top, tokens = top.flatten(), tokens.flatten().tolist()\n"
        )
        + _SELECT
        + _STEP_RETURN,
        "9.4": _CACHE
        + (  # the cache returned as it came: the new position is never appended
            "    k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)\n"
            "    v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)\n"
            "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)\n"
            "    return weights @ v, cache_k, cache_v\n"
        ),
        "9.5": _ENTROPY
        + (  # a mean per sentence, then over the sentences: a short sentence weighs as much as a long one
            "    log_p = torch.log_softmax(logits, dim=-1)\n"
            "    h = -(log_p.exp() * log_p).sum(-1) * mask\n"
            "    return (h.sum(1) / mask.sum(1)).mean()\n"
        ),
        # a uniform table: every choice a tie, so ties, not the model, decide greedy's output
        "9.3": _TRAP + "    return torch.full((V, V), -math.log(V), dtype=torch.float64)\n",
    },
    {
        "9.1": _SCORE
        + (  # multiplied by the penalty instead of divided
            "    return log_prob * ((5 + length) / 6) ** alpha\n"
        ),
        "9.2": _STEP
        + (  # the scores not accumulated: candidates ranked by the new token's log-probability only
            "    top, index = logp.flatten().topk(min(2 * beam_size, n * V))\n"
            "    beams, tokens = (index // V).tolist(), (index % V).tolist()\n"
        )
        + _SELECT
        + _STEP_RETURN,
        "9.4": _CACHE
        + (  # keys and values concatenated on the heads axis
            "    k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=1)\n"
            "    v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=1)\n"
        )
        + _ATTEND,
        "9.5": _ENTROPY
        + (  # p log p of a softmax: nan where a probability underflows to 0
            "    p = torch.softmax(logits, dim=-1)\n    return -(p * p.log()).sum(-1)[mask].mean()\n"
        ),
        # the trap, returned as probabilities: the rows are not log-distributions
        "9.3": _trap(log=False),
    },
    {
        "9.2": _STEP
        + (  # finished hypotheses kept among the live ones and expanded further
            "    top, index = (scores[:, None] + logp).flatten().topk(beam_size)\n"
            "    for rank in range(beam_size):\n"
            "        b, token = index[rank].item() // V, index[rank].item() % V\n"
            "        live.append(prefixes[b] + (token,))\n"
            "        live_scores.append(top[rank].item())\n"
            "        if token == eos_id:\n"
            "            finished.append(prefixes[b] + (token,))\n"
            "            finished_scores.append(top[rank].item())\n"
        )
        + _STEP_RETURN,
        "9.4": _CACHE
        + (  # PyTorch's causal flag: with one query it sees the first key only
            "    k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)\n"
            "    v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)\n"
            "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), k, v\n"
        ),
        "9.5": _ENTROPY
        + (  # the padding counted: the mean over every position
            "    log_p = torch.log_softmax(logits, dim=-1)\n    return -(log_p.exp() * log_p).sum(-1).mean()\n"
        ),
        # a near miss: the trap is there, but the lure's continuation is not flat enough (0.22 nats)
        "9.3": _trap(lure=0.45, lure_eos=0.5, good_eos=0.7),
    },
    {
        "9.1": _SCORE
        + (  # a shortcut through the course's reference package: refused
            "    return log_prob / decoding.length_penalty(length, alpha)\n"
        ),
        "9.2": _STEP
        + (  # only the best K candidates: the beam shrinks when some of them finish
            "    top, index = (scores[:, None] + logp).flatten().topk(beam_size)\n"
            "    beams, tokens = (index // V).tolist(), (index % V).tolist()\n"
        )
        + _SELECT
        + _STEP_RETURN,
        "9.4": _CACHE
        + (  # the new position attends to the earlier ones only
            "    k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)\n"
            "    v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)\n"
            "    seen_k, seen_v = (k, v) if cache_k is None else (cache_k, cache_v)\n"
            "    weights = torch.softmax(q @ seen_k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)\n"
            "    return weights @ seen_v, k, v\n"
        ),
        # PyTorch's own entropy: refused, the exercise asks for it from scratch
        "9.5": _ENTROPY + "    return torch.distributions.Categorical(logits=logits[mask]).entropy().mean()\n",
        # <bos> taken to be token 0: the search starts from row 1, which ends at once, as the beam does
        "9.3": _trap(bos=0),
    },
    {
        # the off-by-one at the beam's edge: `rank <= beam_size` also finishes the candidate just after the best K
        "9.2": _STEP
        + (
            "    top, index = (scores[:, None] + logp).flatten().topk(min(2 * beam_size, n * V))\n"
            "    beams, tokens = (index // V).tolist(), (index % V).tolist()\n"
        )
        + _SELECT.replace("rank < beam_size", "rank <= beam_size")
        + _STEP_RETURN,
        # the lengths left as int64: divided by 6 they become float32, and the score loses its eighth digit
        "9.1": _SCORE + "    return log_prob / ((5 + length) / 6) ** alpha\n",
    },
]
