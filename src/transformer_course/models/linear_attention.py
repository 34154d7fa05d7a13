"""Linear attention: "Transformers are RNNs" (Katharopoulos et al. 2020) (chapter 11).

Softmax attention weighs value j by exp(q_i . k_j) / sum_j' exp(q_i . k_j'): the n x n scores must be formed.
Replace the similarity exp(q . k) by phi(q) . phi(k), with a feature map phi that keeps it positive (the paper's
phi(x) = elu(x) + 1), and the sums can be regrouped:

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)
          = phi(q_i)^T S / phi(q_i)^T z,   S = sum_j phi(k_j) v_j^T  (d_k, d_v),   z = sum_j phi(k_j)  (d_k,).

S and z are computed once for all queries: time and memory grow linearly with n. With a causal mask the sums
run over j <= i only, so S and z become running sums, and the layer is a recurrent network whose state (S, z)
has a fixed size, whatever the length: S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i).

Shapes: ... any leading dimensions (batch, heads), n positions, d_k the query/key size, d_v the value size.
There is no 1 / sqrt(d_k) scaling: the paper's feature map is applied to q and k as they are.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import require_tensor

__all__ = ["feature_map", "linear_attention", "linear_attention_step", "linear_attention_recurrent"]


def feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 elementwise: x + 1 for x > 0, exp(x) otherwise; positive, so every similarity is > 0.

    Written as exp(x) rather than (exp(x) - 1) + 1: in float32 the latter rounds to exactly 0 below x = -17 or so,
    and a query whose similarities are all 0 would divide 0 by 0. The clamp keeps exp of the unused branch finite,
    so that its gradient is 0 and not 0 * inf = NaN.
    """
    return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))


def _check(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        require_tensor(name, x, min_dim=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length n, got k {tuple(k.shape)} and v {tuple(v.shape)}")


def linear_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """Linear attention in parallel form: q (..., n_q, d_k), k (..., n, d_k), v (..., n, d_v) -> (..., n_q, d_v).

    Not causal: one S (..., d_k, d_v) and one z (..., d_k) for all queries. Causal (n_q = n): their running sums
    over positions, S_i (..., n, d_k, d_v) by a cumulative sum, so that query i sees keys j <= i only.
    """
    _check(q, k, v)
    fq, fk = feature_map(q), feature_map(k)  # (..., n_q, d_k), (..., n, d_k)
    if not causal:
        s = fk.transpose(-2, -1) @ v  # (..., d_k, d_v) = sum_j phi(k_j) v_j^T
        z = fk.sum(dim=-2)  # (..., d_k) = sum_j phi(k_j)
        return (fq @ s) / (fq @ z[..., None])  # (..., n_q, d_v) / (..., n_q, 1)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal linear attention needs as many queries as keys, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    s = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=-3)  # (..., n, d_k, d_v): S_i for every i
    z = torch.cumsum(fk, dim=-2)  # (..., n, d_k): z_i for every i
    numerator = (fq[..., None, :] @ s).squeeze(-2)  # (..., n, 1, d_k) @ (..., n, d_k, d_v) -> (..., n, d_v)
    return numerator / (fq * z).sum(dim=-1, keepdim=True)  # / (..., n, 1)


def linear_attention_step(
    state: tuple[Tensor, Tensor], q: Tensor, k: Tensor, v: Tensor
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """One step of the recurrence: the state (S (..., d_k, d_v), z (..., d_k)) and one position's q, k (..., d_k)
    and v (..., d_v) -> (output (..., d_v), new state). The state's size does not depend on the position."""
    s, z = state
    fq, fk = feature_map(q), feature_map(k)  # (..., d_k)
    s = s + fk[..., :, None] * v[..., None, :]  # S_i = S_{i-1} + phi(k_i) v_i^T
    z = z + fk  # z_i = z_{i-1} + phi(k_i)
    out = (fq[..., None, :] @ s).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)  # (..., d_v)
    return out, (s, z)


def linear_attention_recurrent(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Causal linear attention as a recurrent network, one position at a time with a fixed-size state.

    q, k (..., n, d_k), v (..., n, d_v) -> (..., n, d_v); equal to ``linear_attention(q, k, v, causal=True)``.
    """
    _check(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal linear attention needs as many queries as keys, got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    state = (q.new_zeros((*lead, q.shape[-1], v.shape[-1])), q.new_zeros((*lead, q.shape[-1])))  # S_0 = 0, z_0 = 0
    outputs = []
    for i in range(q.shape[-2]):
        out, state = linear_attention_step(state, q[..., i, :], k[..., i, :], v[..., i, :])
        outputs.append(out)
    return torch.stack(outputs, dim=-2)  # (..., n, d_v)
