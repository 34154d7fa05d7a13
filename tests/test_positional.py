"""The reference positional encodings of chapter 7: the paper's formula, the shift rotation, distances, and the exercises."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_course.grading import registry
from transformer_course.models.positional import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    frequencies,
    shift_matrix,
    sinusoidal_encoding,
)

f64 = dict(dtype=torch.float64)


def _paper(n_positions, d_model, base=10000.0):
    """The formula of the paper, one number at a time."""
    return torch.tensor(
        [
            [
                math.sin(pos / base ** (2 * (j // 2) / d_model))
                if j % 2 == 0
                else math.cos(pos / base ** (2 * (j // 2) / d_model))
                for j in range(d_model)
            ]
            for pos in range(n_positions)
        ],
        **f64,
    )


@pytest.mark.parametrize("n_positions, d_model", [(1, 2), (20, 16), (50, 64), (7, 512)])
def test_table_is_the_papers_formula(n_positions, d_model):
    torch.testing.assert_close(
        sinusoidal_encoding(n_positions, d_model, dtype=torch.float64), _paper(n_positions, d_model), atol=1e-12, rtol=0
    )


def test_first_row_and_known_values():
    pe = sinusoidal_encoding(3, 4, dtype=torch.float64)
    assert pe[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert pe[1, 0].item() == pytest.approx(math.sin(1.0)) and pe[1, 3].item() == pytest.approx(math.cos(0.01))


def test_concatenated_variant_is_a_column_permutation():
    interleaved = sinusoidal_encoding(30, 16, dtype=torch.float64)
    concatenated = sinusoidal_encoding(30, 16, interleaved=False, dtype=torch.float64)
    order = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])  # sines first, then cosines
    assert torch.equal(concatenated, interleaved[:, order])


def test_other_bases_and_the_frequencies():
    torch.testing.assert_close(
        sinusoidal_encoding(10, 8, base=1000.0, dtype=torch.float64), _paper(10, 8, base=1000.0), atol=1e-12, rtol=0
    )
    w = frequencies(512)
    assert w[0].item() == 1.0 and w.shape == (256,) and bool((w[1:] < w[:-1]).all())
    assert 2 * math.pi / w[-1].item() == pytest.approx(2 * math.pi * 10000 ** (510 / 512))


def test_dtype_follows_the_default_but_values_are_computed_in_float64():
    assert sinusoidal_encoding(5, 8).dtype == torch.get_default_dtype() == torch.float32
    table32 = sinusoidal_encoding(3000, 8)
    table64 = sinusoidal_encoding(3000, 8, dtype=torch.float64)
    assert (table32.double() - table64).abs().max().item() < 1e-7  # rounded once, not computed in float32


def test_a_shorter_table_is_a_prefix_of_a_longer_one():
    assert torch.equal(
        sinusoidal_encoding(40, 32, dtype=torch.float64), sinusoidal_encoding(400, 32, dtype=torch.float64)[:40]
    )


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), st.integers(-300, 300), st.sampled_from([2, 4, 16, 64, 512]))
def test_a_shift_is_the_rotation_matrix(pos, k, d_model):
    pos = max(pos, -k)  # both positions >= 0
    table = sinusoidal_encoding(pos + max(k, 0) + 1, d_model, dtype=torch.float64)
    moved = table[pos] @ shift_matrix(k, d_model, dtype=torch.float64)
    assert (moved - table[pos + k]).abs().max().item() < 1e-9


@settings(max_examples=25, deadline=None)
@given(st.integers(-50, 50), st.integers(-50, 50), st.sampled_from([2, 8, 64]))
def test_shift_matrices_are_rotations_that_compose(j, k, d_model):
    m_j, m_k = shift_matrix(j, d_model, dtype=torch.float64), shift_matrix(k, d_model, dtype=torch.float64)
    eye = torch.eye(d_model, **f64)
    torch.testing.assert_close(m_k @ m_k.T, eye, atol=1e-12, rtol=0)
    torch.testing.assert_close(m_j @ m_k, shift_matrix(j + k, d_model, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(shift_matrix(-k, d_model, dtype=torch.float64), m_k.T, atol=1e-15, rtol=0)


def test_shift_matrix_is_block_diagonal():
    m = shift_matrix(3, 8, dtype=torch.float64)
    blocks = torch.block_diag(*(torch.ones(2, 2) for _ in range(4))).bool()
    assert m[~blocks].abs().max().item() == 0.0
    theta = 3 / 10000 ** (2 / 8)  # pair 1
    block = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]], **f64)
    torch.testing.assert_close(m[2:4, 2:4], block, atol=1e-15, rtol=0)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 1000), st.sampled_from([8, 64, 512]))
def test_dot_products_depend_only_on_the_distance(p, q, shift, d_model):
    pe = sinusoidal_encoding(max(p, q) + shift + 1, d_model, dtype=torch.float64)
    expected = torch.cos((p - q) * frequencies(d_model)).sum().item()
    assert pe[p] @ pe[q] == pytest.approx(expected, abs=1e-8)
    assert pe[p + shift] @ pe[q + shift] == pytest.approx(expected, abs=1e-8)


def test_dot_product_is_largest_at_distance_zero_and_falls_off():
    pe = sinusoidal_encoding(1001, 512, dtype=torch.float64)
    dots = pe[0] @ pe.T
    assert dots[0].item() == pytest.approx(256.0) and bool((dots[1:] < dots[0] - 5).all())
    assert dots[1] > dots[10] > dots[100] > dots[1000]


def test_encodings_extend_to_long_positions_with_constant_length():
    pe = sinusoidal_encoding(100_000, 64, dtype=torch.float64)
    torch.testing.assert_close(pe.norm(dim=-1), torch.full((100_000,), math.sqrt(32), **f64), atol=1e-10, rtol=0)
    assert pe.abs().max().item() <= 1.0


def test_positional_encoding_layer_adds_the_rows_from_the_offset():
    layer = PositionalEncoding(8, max_len=50).double()
    x = torch.randn(3, 6, 8, **f64)
    table = sinusoidal_encoding(50, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x + table[:6], atol=1e-15, rtol=0)
    torch.testing.assert_close(layer(x, offset=44), x + table[44:50], atol=1e-15, rtol=0)
    assert [name for name, _ in layer.named_buffers()] == ["pe"] and list(layer.state_dict()) == []
    assert list(layer.parameters()) == [] and layer.pe.dtype == torch.float64


def test_positional_encoding_dropout_only_in_training():
    layer = PositionalEncoding(16, max_len=20, dropout=0.5)
    x = torch.randn(4, 20, 16)
    assert torch.equal(layer.eval()(x), x + layer.pe.float())
    assert (layer.train()(x) == 0).any()


def test_learned_embedding_adds_a_trainable_vector_per_position():
    layer = LearnedPositionalEmbedding(8, max_len=10).double()
    x = torch.randn(2, 4, 8, **f64)
    torch.testing.assert_close(layer(x, offset=3), x + layer.embedding.weight[3:7], atol=0, rtol=0)
    layer(x).sum().backward()
    assert layer.embedding.weight.grad[:4].abs().sum() > 0 and layer.embedding.weight.grad[4:].abs().sum() == 0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: sinusoidal_encoding(10, 7), "must be even"),
        (lambda: sinusoidal_encoding(0, 8), "n_positions must be a positive int"),
        (lambda: sinusoidal_encoding(10, 8, base=1.0), "greater than 1"),
        (lambda: shift_matrix(1.5, 8), "must be an int"),
        (lambda: shift_matrix(2, 5), "must be even"),
        (lambda: PositionalEncoding(7), "must be even"),
        (lambda: PositionalEncoding(8, max_len=10)(torch.ones(1, 11, 8)), "only has max_len=10"),
        (lambda: PositionalEncoding(8, max_len=10)(torch.ones(1, 5, 8), offset=6), "positions 6 to 10"),
        (lambda: PositionalEncoding(8, max_len=10)(torch.ones(1, 5, 6)), r"shape \(..., T, d_model=8\)"),
        (lambda: PositionalEncoding(8, max_len=10)(torch.ones(1, 5, 8), offset=-1), "non-negative int"),
        (lambda: LearnedPositionalEmbedding(8, max_len=10)(torch.ones(1, 12, 8)), "only has max_len=10"),
        (lambda: LearnedPositionalEmbedding(8, max_len=0), "max_len must be a positive int"),
    ],
)
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_reference_is_right_in_the_graders_float32_process():
    # The grader runs the reference with float32 as the default dtype; the table must still be accurate to 1e-6.
    for case in registry.get("7.1").cases(registry.HIDDEN_SEED):
        expected = _paper(*case.args)
        assert (sinusoidal_encoding(*case.args).double() - expected).abs().max().item() < 1e-6
