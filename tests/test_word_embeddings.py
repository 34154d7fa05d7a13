"""word_embeddings: nearest neighbours by cosine similarity, checked against PyTorch's cosine_similarity."""

import pytest
import torch
import torch.nn.functional as F

from transformer_course.evaluation.word_embeddings import cosine_to, group_share, nearest, rank_of, word_piece


@pytest.fixture
def table():
    torch.manual_seed(0)
    return torch.randn(50, 8)


def test_cosines_agree_with_pytorch(table):
    expected = F.cosine_similarity(table.double(), table[7].double().expand_as(table), dim=1)
    assert torch.allclose(cosine_to(table, 7), expected, atol=1e-12)
    assert cosine_to(table, 7).dtype == torch.float64 and abs(cosine_to(table, 7)[7] - 1) < 1e-12


def test_nearest_leaves_the_word_out_and_sorts(table):
    ids, sims = nearest(table, 3, k=4)
    full = cosine_to(table, 3)
    full[3] = -2
    assert 3 not in ids and ids == full.topk(4).indices.tolist()
    assert sims == sorted(sims, reverse=True)
    assert rank_of(table, 3, ids[0]) == 1 and rank_of(table, 3, ids[3]) == 4


def test_a_group_of_near_rows_is_found_and_a_random_one_is_not():
    torch.manual_seed(1)
    table = torch.randn(200, 16)
    centre = torch.randn(16)
    table[:6] = centre + 0.05 * torch.randn(6, 16)  # rows 0-5 nearly the same direction
    assert group_share(table, list(range(6)), k=5) == 1.0
    assert group_share(table, list(range(100, 106)), k=5) < 0.2
    with pytest.raises(ValueError, match="two members"):
        group_share(table, [1])
    with pytest.raises(IndexError):
        cosine_to(table, 200)


class Pieces:
    """A tokenizer with one piece per known word and one per letter otherwise."""

    words = {"I": 1, " dog": 2}

    def encode(self, text):
        out = []
        for k, w in enumerate(text.split(" ")):
            key = w if k == 0 else " " + w
            out += [self.words[key]] if key in self.words else [100 + ord(c) for c in w]
        return out


def test_word_piece_is_the_single_piece_inside_a_sentence():
    assert word_piece(Pieces(), "dog") == 2
    assert word_piece(Pieces(), "cat") is None
