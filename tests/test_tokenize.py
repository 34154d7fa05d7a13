import pytest

from transformer_course.data import BPETokenizer, train_bpe
from transformer_course.data.batching import length_batches, make_batch, make_batches, pad_sequences
from transformer_course.data.tatoeba import tatoeba_split


@pytest.fixture(scope="module")
def split():
    return tatoeba_split()


@pytest.fixture(scope="module")
def tokenizer(split):
    return train_bpe([es for _, es in split.train[:30000]], vocab_size=2000)


def test_round_trip_on_held_out_sentences(split, tokenizer):
    for _, es in split.test[:2000]:
        ids = tokenizer.encode(es)
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == es
    odd = "¿Qué   pasó?\tÑandú — 😀 «sí»"
    assert tokenizer.decode(tokenizer.encode(odd)) == odd


def test_specials_and_decode_stops_at_eos(tokenizer):
    assert [tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id] == [0, 1, 2, 3]
    ids = tokenizer.encode("Hola.")
    assert tokenizer.decode([1] + ids + [2] + ids + [0]) == "Hola."
    assert tokenizer.vocab_size == 2000


def test_training_is_deterministic_and_saves(split, tokenizer, tmp_path):
    again = train_bpe([es for _, es in split.train[:30000]], vocab_size=2000)
    assert again.to_str() == tokenizer.to_str()
    tokenizer.save(tmp_path / "bpe.json")
    assert BPETokenizer.load(tmp_path / "bpe.json").encode("Buenos días") == tokenizer.encode("Buenos días")


def test_padding_masks_are_true_at_real_tokens():
    ids, mask = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]
    batch = make_batch([[5, 6], [7]], [[9], [10, 11]], pad_id=0, eos_id=2)
    assert batch.tgt.tolist() == [[9, 2, 0], [10, 11, 2]] and batch.tgt_mask.sum().item() == 5


def test_length_batches_group_similar_lengths_and_cover_everything():
    lengths = [3, 50, 4, 51, 5, 52, 6, 53]
    groups = length_batches(lengths, 4, seed=0)
    assert sorted(i for g in groups for i in g) == list(range(8))
    assert sorted(sorted(lengths[i] for i in g) for g in groups) == [[3, 4, 5, 6], [50, 51, 52, 53]]
    assert length_batches(lengths, 4, seed=0) == groups
    batches = make_batches([[1] * n for n in lengths], [[1]] * 8, 4, 0, 2)
    assert sorted(b.src.shape[1] for b in batches) == [6, 53]
