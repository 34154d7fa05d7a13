"""Chapter 11 submissions for the grader tests: plausible wrong answers, as exercise-cell code without the header line.

Each round costs one grading run; every exercise named in a round must lose exactly its own points. The cells use
only what the notebook's setup cell imports (torch, torch.nn.functional as F) and, in 11.7, the notebook's `rotate`
(exercise 11.4's name: the student's, or the course's where theirs failed).
"""

# 11.1: the solution's loop; `{update}` is how the running sum takes in a block, `{start}` where the maximum starts
_ONLINE = """def online_softmax(scores, block):
    m = torch.full_like(scores[..., :1], {start})
    l = torch.zeros_like(m)
    for j in range(0, scores.shape[-1], block):
        s = scores[..., j : j + block]
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = {shift}
        l = {update}
        m = m_new
    return torch.exp(scores - m) / l
"""
_GUARD = "torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)"
_RESCALED = "l * torch.exp(m - shift) + torch.exp(s - shift).sum(dim=-1, keepdim=True)"


def _online(start='float("-inf")', shift=_GUARD, update=_RESCALED):
    return _ONLINE.format(start=start, shift=shift, update=update)


# 11.2: the solution's tiles; `{mask}` compares key and query positions, `{acc}` takes in one tile
_TILED = """def tiled_attention(q, k, v, block, causal):
    n_q, n_k = q.shape[-2], k.shape[-2]
    outputs = []
    for i0 in range(0, n_q, block):
        qb = q[..., i0 : i0 + block, :] / {scale}
        rows = torch.arange(i0, i0 + qb.shape[-2])[:, None]
        m = q.new_full((*qb.shape[:-1], 1), float("-inf"))
        l = torch.zeros_like(m)
        acc = q.new_zeros((*qb.shape[:-1], v.shape[-1]))
        for j0 in range(0, min(n_k, i0 + block) if causal else n_k, block):
            s = qb @ k[..., j0 : j0 + block, :].transpose(-2, -1)
            if causal:
                cols = torch.arange(j0, j0 + s.shape[-1])[None, :]
                s = s.masked_fill({mask}, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            rescale = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * rescale + p.sum(dim=-1, keepdim=True)
            acc = {acc} + p @ v[..., j0 : j0 + block, :]
            m = m_new
        outputs.append(acc / l)
    return torch.cat(outputs, dim=-2)
"""


def _tiled(mask="cols > rows", acc="acc * rescale", scale="q.shape[-1] ** 0.5"):
    return _TILED.format(mask=mask, acc=acc, scale=scale)


# 11.3: `{share}` makes h key/value heads of the g
_GQA = """def grouped_query_attention(q, k, v, mask=None):
    r = q.shape[1] // k.shape[1]
    {share}
    scores = q @ k.transpose(-2, -1) / {scale}
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
"""


def _gqa(share="k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)", scale="q.shape[-1] ** 0.5"):
    return _GQA.format(share=share, scale=scale)


# 11.4: `{angles}` and `{turn}` (the two coordinates of each turned pair, interleaved)
_ROTATE = """def rotate(x, positions):
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = {angles}
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
{turn}"""
_PAIRS = """    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
"""
_HALVES = """    first, second = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""


def _rotate(angles="positions.to(torch.float64)[:, None] * theta", turn=_PAIRS):
    return _ROTATE.format(angles=angles, turn=turn)


# 11.5: `{slopes}` and `{distance}`
_ALIBI = """def alibi_bias(n_heads, t_q, t_k):
    power = 2 ** (n_heads.bit_length() - 1)
    slopes = [2 ** (-8 * (i + 1) / power) for i in range(power)]
    slopes += [2 ** (-8 * (i + 1) / (2 * power)) for i in range(0, 2 * power, 2)][: n_heads - power]
    m = torch.tensor({slopes}, dtype=torch.float64)
    i = torch.arange(t_q, dtype=torch.float64)[:, None] + {offset}
    j = torch.arange(t_k, dtype=torch.float64)[None, :]
    return {sign}m[:, None, None] * {distance}
"""


def _alibi(slopes="slopes", offset="(t_k - t_q)", sign="-", distance="(i - j).abs()"):
    return _ALIBI.format(slopes=slopes, offset=offset, sign=sign, distance=distance)


# 11.6: `{fq}` the query's features, `{update}` the state's, `{out}` the output
_STEP = """def linear_attention_step(state, q, k, v):
    s, z = state
    fq, fk = {fq}, F.elu(k) + 1
{update}    out = {out}
    return out, (s, z)
"""
_UPDATE = "    s = s + fk[..., :, None] * v[..., None, :]\n    z = z + fk\n"
_OUT = "(fq[..., None, :] @ s).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)"


def _step(fq="F.elu(q) + 1", update=_UPDATE, out=_OUT):
    return _STEP.format(fq=fq, update=update, out=out)


# 11.7: `{q}` the query, `{k}` the key
_LOOK = """def look_back(d_head, delta):
    q = {q}
    k = {k}
    return q, k
"""
_ONES = "torch.ones(d_head, dtype=torch.float64)"


def _look(q=_ONES, k="rotate(q[None], torch.tensor([delta]))[0]"):
    return _LOOK.format(q=q, k=k)


WRONG_ROUNDS = [
    {
        "11.1": _online(update="l + torch.exp(s - shift).sum(dim=-1, keepdim=True)"),  # the old sum not rescaled
        "11.2": _tiled(acc="acc"),  # the running output not rescaled
        "11.3": _gqa(share="k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)"),  # head i reads i % g
        "11.4": _rotate(turn=_HALVES),  # pairs (i, i + d/2)
        "11.5": _alibi(sign=""),  # a bonus for distance
        "11.6": _step(out="(fq[..., None, :] @ s).squeeze(-2)"),  # no normaliser
        "11.7": _look(k="q.clone()"),  # lines up at distance 0
    },
    {
        "11.1": _online(start="0.0"),  # the maximum starts at 0: rows far below 0 underflow
        "11.2": _tiled(mask="cols >= rows"),  # a query may not see itself
        "11.3": _gqa(share="index = torch.arange(q.shape[1]) // k.shape[1]\n    k, v = k[:, index], v[:, index]"),
        "11.4": _rotate(angles="torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * theta"),  # positions ignored
        "11.5": _alibi(slopes="slopes[::-1]"),  # head 0 gets the gentlest slope
        "11.6": _step(
            update="",
            out="(fq[..., None, :] @ s).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)\n"
            "    s, z = s + fk[..., :, None] * v[..., None, :], z + fk",
        ),  # the output read from the old state
        "11.7": _look(k="rotate(q[None], torch.tensor([-delta]))[0]"),  # turned the wrong way
    },
    {
        "11.1": _online(shift="m_new"),  # a first block of only -inf: exp(-inf - (-inf)) = NaN
        "11.2": _tiled(scale="1.0"),  # scores not scaled
        "11.3": _gqa(scale="1.0"),  # scores not scaled
        "11.4": _rotate(angles="positions.float()[:, None] * theta.float()"),  # angles in float32
        "11.5": _alibi(offset="0"),  # the queries at positions 0 .. t_q - 1
        "11.6": _step(fq="q"),  # no feature map on the query
        "11.7": _look(q="torch.zeros(d_head, dtype=torch.float64).index_fill(0, torch.tensor([0]), 1.0)"),  # aliases
    },
    {
        "11.1": _online().replace("return torch.exp(scores - m) / l", "return torch.softmax(scores, dim=-1)"),
        "11.2": "def tiled_attention(q, k, v, block, causal):\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)\n",  # refused: PyTorch's attention
        "11.3": _gqa(share="k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)")
        + "\n\ndef grouped_query_attention(q, k, v, mask=None):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n",  # refused too
        "11.4": _rotate(angles="-positions.to(torch.float64)[:, None] * theta"),  # turned clockwise
        "11.5": _alibi(distance="(i - j)"),  # keys after the query get a bonus
        "11.6": _step(
            update="    s += fk[..., :, None] * v[..., None, :]\n    z += fk\n"
        ),  # the state changed in place
        "11.7": _look(q="torch.zeros(d_head, dtype=torch.float64).index_fill(0, torch.tensor([d_head - 2]), 1.0)"),
    },
]
