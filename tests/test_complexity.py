"""Table 1 of the Transformer paper, measured (chapter 5): the causal convolution, the three measurements
(operations, sequential depth, path length) against the formulas, and the errors on bad input."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_course.measurement.complexity import (
    LAYERS,
    CausalConv1d,
    ConvStack,
    build,
    count_flops,
    depends_on_first,
    expected_path_length,
    format_table,
    path_length,
    receptive_field,
    recurrent,
    self_attention,
    sequence,
    sequential_depth,
    table1,
)

f64 = dict(dtype=torch.float64)


def _conv(d_in=3, d_out=4, k=3, dilation=1):
    return CausalConv1d(d_in, d_out, k, dilation, dtype=torch.float64)


@pytest.mark.parametrize("k,dilation", [(2, 1), (3, 1), (3, 2), (4, 3)])
def test_causal_conv_never_looks_ahead(k, dilation):
    conv = _conv(k=k, dilation=dilation)
    x = torch.randn(2, 9, 3, **f64)
    y = conv(x)
    assert y.shape == (2, 9, 4)
    for t in range(9):
        changed = x.clone()
        changed[:, t + 1 :] = 100 * torch.randn(2, 8 - t, 3, **f64)
        assert torch.equal(conv(changed)[:, : t + 1], y[:, : t + 1]), f"output {t} saw a later input"
        if t < 8:  # the test is not vacuous: the next output does change
            assert not torch.equal(conv(changed)[:, t + 1], y[:, t + 1])


@pytest.mark.parametrize("k,dilation", [(2, 1), (3, 1), (3, 2), (5, 3)])
def test_causal_conv_agrees_with_a_loop_and_with_padded_f_conv1d(k, dilation):
    conv = _conv(k=k, dilation=dilation)
    x = torch.randn(2, 11, 3, **f64)
    w, b = conv.conv.weight, conv.conv.bias  # (d_out, d_in, k), (d_out,)
    loop = torch.zeros(2, 11, 4, **f64)
    for t in range(11):
        loop[:, t] = b
        for j in range(k):  # tap j reads the input (k - 1 - j) * dilation steps back
            s = t - (k - 1 - j) * dilation
            if s >= 0:
                loop[:, t] += x[:, s] @ w[:, :, j].T
    padded = torch.cat([torch.zeros(2, (k - 1) * dilation, 3, **f64), x], dim=1)  # zeros on the left only
    by_hand = F.conv1d(padded.transpose(1, 2), w, b, dilation=dilation).transpose(1, 2)
    with torch.no_grad():
        y = conv(x)
    assert (y - loop).abs().max().item() < 1e-12
    assert (y - by_hand).abs().max().item() < 1e-12


def test_conv_stack_dilations_receptive_field_and_causality():
    plain, dilated = ConvStack(4, 3, 4, dtype=torch.float64), ConvStack(4, 3, 4, dilation_base=3, dtype=torch.float64)
    assert plain.dilations == [1, 1, 1, 1] and dilated.dilations == [1, 3, 9, 27]
    assert receptive_field(3, plain.dilations) == 9 and receptive_field(3, dilated.dilations) == 81
    assert sum(isinstance(m, nn.Tanh) for m in dilated) == 3  # between the layers, not after the last
    x = torch.randn(1, 12, 4, **f64)
    changed = x.clone()
    changed[:, 6:] = torch.randn(1, 6, 4, **f64)
    assert torch.equal(dilated(changed)[:, :6], dilated(x)[:, :6])
    assert torch.equal(ConvStack(4, 3, 0)(x), x)  # no layers: the input passes through


def test_recurrent_agrees_with_nn_rnn():
    torch.manual_seed(1)
    theirs = nn.RNN(5, 5, batch_first=True).double()
    x = torch.randn(2, 7, 5, **f64)
    weights = (theirs.weight_ih_l0, theirs.weight_hh_l0, theirs.bias_ih_l0, theirs.bias_hh_l0)
    with torch.no_grad():
        assert (recurrent(x, weights) - theirs(x)[0]).abs().max().item() < 1e-12


def test_self_attention_is_causal_scaled_dot_product_attention():
    x = torch.randn(2, 6, 4, **f64)
    expected = F.scaled_dot_product_attention(x, x, x, is_causal=True)
    assert (self_attention(x) - expected).abs().max().item() < 1e-12


def _conv_formula(n, k):
    return math.ceil((n - 1) / (k - 1))


def _dilated_formula(n, k):
    return min(layers for layers in range(n + 1) if k**layers >= n)  # ceil(log_k n), in integers


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("n", [1, 2, 5, 9, 16, 17, 27, 28])
def test_conv_path_lengths_follow_the_formulas(n, k):
    assert (
        path_length("convolutional", n, d=4, k=k) == _conv_formula(n, k) == expected_path_length("convolutional", n, k)
    )
    dilated = path_length("dilated convolutional", n, d=4, k=k)
    assert dilated == _dilated_formula(n, k) == expected_path_length("dilated convolutional", n, k)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 33])
def test_recurrent_and_attention_path_lengths(n):
    assert path_length("recurrent", n, d=4) == n - 1 == expected_path_length("recurrent", n)
    assert path_length("self-attention", n, d=4) == (1 if n > 1 else 0) == expected_path_length("self-attention", n)


def test_attention_connects_every_pair_in_one_layer_but_the_rnn_needs_every_step():
    x = sequence(64, 4)
    assert depends_on_first(build("self-attention", 4, depth=1), x)
    assert depends_on_first(build("recurrent", 4, depth=63), x)
    assert not depends_on_first(build("recurrent", 4, depth=62), x)  # one step short: exactly zero gradient


def test_dilation_base_two_with_kernel_three():
    # ByteNet's choice: kernel 3, dilations 1, 2, 4, ...: L layers span 1 + 2 (2^L - 1) = 2^(L+1) - 1 positions
    x = sequence(20, 3)
    for layers in range(1, 6):
        stack = ConvStack(3, 3, layers, dilation_base=2, dtype=torch.float64)
        assert receptive_field(3, stack.dilations) == 2 ** (layers + 1) - 1
        assert depends_on_first(stack, x) == (2 ** (layers + 1) - 1 >= 20)


def test_sequential_depth_counts_the_longest_chain():
    x = torch.randn(1, 3, 2, **f64)
    assert sequential_depth(lambda x: x.tanh().tanh().tanh(), x) == 3
    assert sequential_depth(lambda x: x.tanh().tanh() + x, x) == 3  # the longer branch, plus the addition
    w = torch.randn(3, 2, **f64, requires_grad=True)
    assert sequential_depth(lambda x: w.tanh().tanh().tanh() * x, x) == 1  # chains that miss x do not count


def test_sequential_depth_is_constant_for_attention_and_conv_and_grows_for_the_rnn():
    lengths = (2, 4, 8, 16)
    depth = {kind: [sequential_depth(build(kind, 8), sequence(n, 8)) for n in lengths] for kind in LAYERS}
    for kind in ("self-attention", "convolutional", "dilated convolutional"):
        assert len(set(depth[kind])) == 1, (kind, depth[kind])
    assert all(a < b for a, b in zip(depth["recurrent"], depth["recurrent"][1:])), depth["recurrent"]


@pytest.mark.parametrize("n", [4, 8, 16])
def test_flops_scale_as_the_formulas(n):
    d, k = 8, 3
    flops = {kind: [count_flops(build(kind, d, k), sequence(m, d)) for m in (n, 2 * n)] for kind in LAYERS}
    assert flops["self-attention"][1] == 4 * flops["self-attention"][0]  # n^2: the scores and the weighted sum
    for kind in ("recurrent", "convolutional", "dilated convolutional"):
        assert flops[kind][1] == 2 * flops[kind][0], kind
    # 2 flops per multiply-add: attention n^2 d twice, RNN n d^2 twice (input and state), convolution k n d^2
    assert flops["self-attention"][0] == 2 * 2 * n * n * d
    assert flops["recurrent"][0] == 2 * 2 * n * d * d
    assert flops["convolutional"][0] == flops["dilated convolutional"][0] == 2 * k * n * d * d


def test_attention_and_rnn_cost_the_same_at_n_equal_d():
    d = 16
    cost = {
        n: [count_flops(build(kind, d), sequence(n, d)) for kind in ("self-attention", "recurrent")]
        for n in (8, 16, 32)
    }
    assert cost[8][0] < cost[8][1] and cost[16][0] == cost[16][1] and cost[32][0] > cost[32][1]


def test_table1_is_deterministic_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    rows = table1(lengths=(4, 8), d=8)
    assert torch.equal(torch.get_rng_state(), state)
    assert [(r.layer, r.n) for r in rows] == [(kind, n) for kind in LAYERS for n in (4, 8)]
    assert all(r.path_length == expected_path_length(r.layer, r.n) for r in rows)
    text = format_table(rows)
    assert text == format_table(table1(lengths=(4, 8), d=8))
    lines = text.splitlines()
    assert lines[0].split() == ["layer", "n", "flops", "sequential", "ops", "path", "length"]
    assert len(lines) == 2 + len(rows) + len(LAYERS) - 1  # header, rule, rows, a blank line between layer types
    assert len({len(line) for line in lines if line and line.startswith(("self", "rec"))}) == 1  # aligned


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: CausalConv1d(3, 3, 1), "kernel size k must be an int >= 2"),
        (lambda: ConvStack(3, 1, 2), "kernel size k"),
        (lambda: ConvStack(3, 3, 2, dilation_base=4), "dilation_base"),
        (lambda: ConvStack(3, 3, -1), "layers must be"),
        (lambda: path_length("convolutional", 8, k=1), "kernel size k"),
        (lambda: path_length("recurrent", 0), "sequence length n must be a positive int"),
        (lambda: path_length("transformer", 8), "unknown layer 'transformer'"),
        (lambda: table1(lengths=(8, 0)), "every sequence length n must be a positive int"),
        (lambda: table1(lengths=()), "at least one sequence length"),
        (lambda: table1(k=1), "kernel size k"),
        (lambda: build("recurrent", 4, depth=-1), "depth must be"),
        (lambda: _conv(d_in=3)(torch.randn(2, 5, 4, **f64)), r"shape \(B, T, 3\)"),
        (lambda: _conv()(torch.randn(5, 3, **f64)), "must have 3 dimensions"),
        (lambda: _conv()(torch.randn(2, 0, 3, **f64)), "B, T >= 1"),
        (lambda: count_flops(self_attention, torch.randn(4, 4, **f64)), "must have 3 dimensions"),
        (lambda: sequential_depth(self_attention, torch.randn(4, 4, **f64)), "must have 3 dimensions"),
        (lambda: sequential_depth(lambda x: torch.zeros(1, 2, 3), torch.randn(1, 2, 3)), "does not depend on x"),
    ],
)
def test_bad_input_raises_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
