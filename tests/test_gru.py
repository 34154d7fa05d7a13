"""The GRU cell of chapter 2 (transformer_course.models.gru) against PyTorch's nn.GRUCell and nn.GRU."""

import pytest
import torch

from transformer_course.models.gru import gru_cell


@pytest.mark.parametrize("b, d, h", [(1, 2, 2), (3, 4, 5), (2, 7, 3)])
def test_one_step_agrees_with_nn_grucell(b, d, h):
    torch.manual_seed(b + d + h)
    cell = torch.nn.GRUCell(d, h).double()
    x, state = torch.randn(b, d, dtype=torch.float64), torch.randn(b, h, dtype=torch.float64)
    ours = gru_cell(x, state, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    assert (ours - cell(x, state)).abs().max() < 1e-10


def test_unrolled_over_a_sequence_agrees_with_nn_gru():
    torch.manual_seed(0)
    gru = torch.nn.GRU(4, 6, batch_first=True).double()
    x = torch.randn(3, 9, 4, dtype=torch.float64)
    h = torch.zeros(3, 6, dtype=torch.float64)
    weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    states = []
    for t in range(x.shape[1]):
        h = gru_cell(x[:, t], h, *weights)
        states.append(h)
    expected, _ = gru(x)
    assert (torch.stack(states, dim=1) - expected).abs().max() < 1e-10


def test_an_update_gate_at_one_keeps_the_old_state():
    d, h = 3, 4
    w_ih, w_hh = torch.randn(3 * h, d, dtype=torch.float64), torch.randn(3 * h, h, dtype=torch.float64)
    b_ih = torch.zeros(3 * h, dtype=torch.float64)
    b_ih[h : 2 * h] = 50.0  # z = sigmoid(50 + ...) = 1 to double precision
    state = torch.randn(2, h, dtype=torch.float64)
    out = gru_cell(torch.randn(2, d, dtype=torch.float64), state, w_ih, w_hh, b_ih, None)
    assert torch.allclose(out, state, atol=1e-12)


def test_wrong_shapes_are_a_clear_error():
    with pytest.raises(ValueError, match=r"w_hh must have shape \(3 \* hidden_size"):
        gru_cell(torch.randn(2, 3), torch.randn(2, 4), torch.randn(12, 3), torch.randn(16, 4))
