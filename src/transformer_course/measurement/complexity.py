"""Table 1 of "Attention Is All You Need", measured on real layers (chapter 5).

The paper compares layer types by three costs, each given as a formula:
  layer                   operations per layer   sequential operations   maximum path length
  self-attention          O(n^2 d)               O(1)                    O(1)
  recurrent               O(n d^2)               O(n)                    O(n)
  convolutional           O(k n d^2)             O(1)                    O(n / k), or O(log_k n) dilated

This module measures each column instead of quoting it, with PyTorch's own bookkeeping:
  * operations: FlopCounterMode counts the matrix products and convolutions a layer runs (``count_flops``);
  * sequential operations: the longest chain of autograd nodes, each waiting for the one before it, from the
    input to the output (``sequential_depth``);
  * maximum path length: the fewest layers (for the RNN: recurrent steps) through which the last output
    position depends on the first input position at all, asked of autograd (``path_length``).

Every layer maps (B, T, d) -> (B, T, d) and is causal: output t sees inputs <= t only. Everything runs in
float64 with seeded weights, so ``format_table(table1())`` prints the same text on every run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from .._checks import positive_int, require_tensor
from ..models.attention import causal_mask, scaled_dot_product_attention
from ..models.rnn import RNN, rnn_cell

__all__ = [
    "LAYERS",
    "CausalConv1d",
    "ConvStack",
    "Row",
    "build",
    "count_flops",
    "depends_on_first",
    "expected_path_length",
    "format_table",
    "path_length",
    "receptive_field",
    "recurrent",
    "self_attention",
    "sequence",
    "sequential_depth",
    "table1",
]

LAYERS = ("self-attention", "recurrent", "convolutional", "dilated convolutional")
Layer = Callable[[Tensor], Tensor]


def check_kernel(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ValueError(f"the kernel size k must be an int >= 2 (a kernel of 1 never mixes positions), got {k!r}")
    return k


def check_kind(kind: object) -> str:
    if kind not in LAYERS:
        raise ValueError(f"unknown layer {kind!r}: choose one of {', '.join(map(repr, LAYERS))}")
    return kind


def check_sequence(x: object, d: int | None = None) -> Tensor:
    """x must be (B, T, d) with B, T >= 1 (and d features, when d is given)."""
    x = require_tensor("x", x, dim=3)
    if x.shape[0] < 1 or x.shape[1] < 1 or (d is not None and x.shape[2] != d):
        want = f"(B, T, {d})" if d is not None else "(B, T, d)"
        raise ValueError(f"x must have shape {want} with B, T >= 1, got {tuple(x.shape)}")
    return x


class CausalConv1d(nn.Module):
    """A convolution over time whose output at t sees the inputs at t, t - dilation, ..., t - (k - 1) dilation.

    x: (B, T, d_in) -> (B, T, d_out). nn.Conv1d pads both ends alike; padding (k - 1) * dilation zeros on the
    left only keeps the layer causal and the length T unchanged.
    """

    def __init__(self, d_in: int, d_out: int, k: int, dilation: int = 1, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        positive_int("d_in", d_in), positive_int("d_out", d_out), positive_int("dilation", dilation)
        self.pad = (check_kernel(k) - 1) * dilation
        self.conv = nn.Conv1d(d_in, d_out, k, dilation=dilation, dtype=dtype)  # weight (d_out, d_in, k)

    def forward(self, x: Tensor) -> Tensor:
        check_sequence(x, self.conv.in_channels)
        x = x.transpose(1, 2)  # (B, d_in, T): Conv1d wants the channels before time
        x = F.pad(x, (self.pad, 0))  # (B, d_in, pad + T): zeros before the first step, none after the last
        return self.conv(x).transpose(1, 2)  # (B, d_out, T) -> (B, T, d_out)


def receptive_field(k: int, dilations: list[int]) -> int:
    """How many input positions a stack of causal convolutions with these dilations spans: 1 + (k - 1) sum."""
    return 1 + (check_kernel(k) - 1) * sum(dilations)


class ConvStack(nn.Sequential):
    """``layers`` causal convolutions of width d with tanh between them; layer i has dilation dilation_base**i.

    dilation_base=1 is the plain stack: each layer reaches k - 1 steps further back. dilation_base=k multiplies
    the reach by k with every layer (the dilated stacks of WaveNet and ByteNet); any base from 1 to k covers
    every position inside receptive_field(k, stack.dilations). x: (B, T, d) -> (B, T, d); 0 layers pass x on.
    """

    def __init__(self, d: int, k: int, layers: int, dilation_base: int = 1, dtype: torch.dtype | None = None):
        check_kernel(k)
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise ValueError(f"layers must be an int >= 0, got {layers!r}")
        if isinstance(dilation_base, bool) or not isinstance(dilation_base, int) or not 1 <= dilation_base <= k:
            raise ValueError(f"dilation_base must be an int from 1 to k={k} (or the stack skips positions)")
        dilations = [dilation_base**i for i in range(layers)]
        convs = [CausalConv1d(d, d, k, dilation, dtype=dtype) for dilation in dilations]
        # tanh between the layers: without a nonlinearity the stack would be just one wider convolution
        super().__init__(*[block for i, conv in enumerate(convs) for block in ([nn.Tanh(), conv] if i else [conv])])
        self.dilations = dilations


def self_attention(x: Tensor) -> Tensor:
    """Causal self-attention as table 1 counts it, queries = keys = values = x: softmax(x x^T / sqrt(d)) x.

    x: (B, T, d) -> (B, T, d). The learned projections W_Q, W_K, W_V are left out: they work on each position
    alone, n d^2 multiply-adds each, like the input weights of an RNN; the n^2 d term is the mixing of positions.
    """
    check_sequence(x)
    return scaled_dot_product_attention(x, x, x, causal_mask(x.shape[1], x.device))[0]  # (B, T, d)


def recurrent(x: Tensor, weights: tuple[Tensor, ...], window: int | None = None) -> Tensor:
    """A tanh RNN run step by step with chapter 1's rnn_cell: x (B, T, d) -> the states h_0 .. h_{T-1} (B, T, H).

    window: if given, the gradient may cross only the last ``window`` recurrent steps h_{t-1} -> h_t (the state
    is detached before them, as in truncated backpropagation through time). None: every step.
    """
    check_sequence(x)
    w_ih, w_hh, b_ih, b_hh = weights
    batch, steps, _ = x.shape
    h = x.new_zeros(batch, w_hh.shape[1])  # (B, H)
    states = []
    for t in range(steps):
        if window is not None and t < steps - window:
            h = h.detach()  # no gradient from h_t back into h_{t-1}
        h = rnn_cell(x[:, t], h, w_ih, w_hh, b_ih, b_hh)  # (B, H): step t waits for step t - 1
        states.append(h)
    return torch.stack(states, dim=1)  # (B, T, H)


def build(kind: str, d: int, k: int = 3, depth: int | None = None, seed: int = 0) -> Layer:
    """A function (B, T, d) -> (B, T, d) in float64, its weights drawn from ``seed`` (the global RNG is left alone).

    depth None: one layer of the kind. depth L: L stacked layers; for "recurrent", one layer whose gradient may
    cross only L recurrent steps (see ``recurrent``). The convolutions have kernel k; "dilated convolutional"
    gives layer i the dilation k**i.
    """
    check_kind(kind), positive_int("d", d), check_kernel(k)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be None or an int >= 0, got {depth!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if kind == "self-attention":  # no weights: attention applied depth times
            return lambda x: reduce(lambda h, _: self_attention(h), range(1 if depth is None else depth), x)
        if kind == "recurrent":
            weights = RNN(d, d).double().layer_weights(0)  # W_ih, W_hh (d, d), b_ih, b_hh (d,), as nn.RNN's
            return lambda x: recurrent(x, weights, window=depth)  # type: ignore[arg-type]  # RNN(d, d) has biases
        base = k if kind == "dilated convolutional" else 1
        return ConvStack(d, k, 1 if depth is None else depth, base, dtype=torch.float64)


def sequence(n: int, d: int, seed: int = 0) -> Tensor:
    """A random input (1, n, d) in float64, the same for the same seed."""
    positive_int("the sequence length n", n), positive_int("d", d)
    return torch.randn(1, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def count_flops(layer: Layer, x: Tensor) -> int:
    """Floating-point operations of layer(x) as FlopCounterMode counts them: 2 per multiply-add of the matrix
    products and convolutions, nothing for elementwise work (tanh, softmax, additions)."""
    check_sequence(x)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(x)
    return counter.get_total_flops()


def sequential_depth(layer: Layer, x: Tensor) -> int:
    """The longest chain of operations from x to layer(x): autograd nodes on the longest path from the output's
    grad_fn back to x. Each node needs the result of the one before it, so no hardware can run the chain in
    fewer steps; independent branches beside it could all run at once. The leaf (AccumulateGrad) is not counted.
    """
    x = check_sequence(x).detach().requires_grad_(True)
    if (y := layer(x)).grad_fn is None:
        raise ValueError("the layer's output does not depend on x")
    depth: dict[object, int] = {}  # node -> longest chain from it down to x, -1 if x is not below it
    todo = [(y.grad_fn, False)]
    while todo:  # depth first, without recursion: the graph of an RNN is as deep as the sequence is long
        node, children_done = todo.pop()
        if node in depth:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if not children_done:
            todo.append((node, True))
            todo += [(child, False) for child in children if child not in depth]
        elif getattr(node, "variable", None) is x:
            depth[node] = 0
        else:
            below = max((depth[child] for child in children), default=-1)
            depth[node] = below + 1 if below >= 0 else -1
    return depth[y.grad_fn]


def depends_on_first(layer: Layer, x: Tensor) -> bool:
    """Does output position T - 1 (summed over features) have a nonzero gradient with respect to input position 0?

    With random float64 weights an exact zero means that no path of operations joins the two.
    """
    x = check_sequence(x).detach().requires_grad_(True)
    if not (y := layer(x)).requires_grad:
        return False
    (grad,) = torch.autograd.grad(y[:, -1].sum(), x, allow_unused=True)
    return grad is not None and bool(grad[:, 0].ne(0).any())


def path_length(kind: str, n: int, d: int = 16, k: int = 3, seed: int = 0) -> int:
    """Measured maximum path length: the smallest depth L (layers; for the RNN, recurrent steps) for which the
    last of n output positions depends on the first input position (``depends_on_first`` of ``build(kind, d, k,
    L)``). Found by doubling L, then halving the gap: more depth only adds paths, so the answer is where the
    dependence appears. 0 when n = 1 (the position is its own input).
    """
    check_kind(kind), check_kernel(k)
    x = sequence(n, d, seed)
    connects = lambda depth: depends_on_first(build(kind, d, k, depth, seed), x)
    if connects(0):
        return 0
    low, high = 0, 1  # invariant: low does not connect
    while not connects(high):
        low, high = high, 2 * high
        if high > 2 * n:
            raise RuntimeError(f"{kind}: no path from position 0 to {n - 1} within {high // 2} layers")
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if connects(middle) else (middle, high)
    return high


def expected_path_length(kind: str, n: int, k: int = 3) -> int:
    """The path length the formulas predict: self-attention 1, recurrent n - 1 steps, convolutional
    ceil((n - 1) / (k - 1)) layers, dilated the smallest L with k**L >= n (ceil(log_k n)); 0 for n = 1."""
    check_kind(kind), positive_int("the sequence length n", n), check_kernel(k)
    if kind == "self-attention":
        return min(n - 1, 1)
    if kind == "recurrent":
        return n - 1
    if kind == "convolutional":
        return -(-(n - 1) // (k - 1))
    return next(layers for layers in range(n) if k**layers >= n)  # integers: math.log(n, k) can be a hair off


class Row(NamedTuple):
    layer: str
    n: int
    flops: int  # FlopCounterMode's count for one layer: 2 per multiply-add
    sequential_depth: int  # operations in the longest chain from input to output, one layer
    path_length: int  # layers (recurrent: steps) from input position 0 to output position n - 1


def table1(lengths: tuple[int, ...] = (8, 16, 32, 64, 128), d: int = 64, k: int = 3, seed: int = 0) -> list[Row]:
    """Table 1 measured: one row per layer type and sequence length, batch 1, float64, seeded."""
    if not (lengths := tuple(lengths)):
        raise ValueError("lengths must hold at least one sequence length")
    for n in lengths:
        positive_int("every sequence length n", n)
    positive_int("d", d), check_kernel(k)
    rows = []
    for kind in LAYERS:
        layer = build(kind, d, k, seed=seed)
        for n in lengths:
            x = sequence(n, d, seed)
            rows.append(
                Row(kind, n, count_flops(layer, x), sequential_depth(layer, x), path_length(kind, n, d, k, seed))
            )
    return rows


def format_table(rows: list[Row]) -> str:
    """The rows as aligned text, a blank line between layer types, flops with thousands separators."""
    header = ("layer", "n", "flops", "sequential ops", "path length")
    cells = [(r.layer, str(r.n), f"{r.flops:,}", str(r.sequential_depth), str(r.path_length)) for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    line = lambda c: "  ".join([c[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(c[1:], widths[1:])]).rstrip()
    out = [line(header), "  ".join("-" * w for w in widths)]
    for i, c in enumerate(cells):
        if i and rows[i].layer != rows[i - 1].layer:
            out.append("")
        out.append(line(c))
    return "\n".join(out)
