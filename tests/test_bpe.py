"""Byte-pair encoding from scratch (transformer_course.data.bpe): a corpus small enough to work out by hand, exact
round trips, and agreement with Hugging Face ``tokenizers`` (the course's ``train_bpe``) merge for merge."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from transformer_course.data import bpe as bpe_module
from transformer_course.data import train_bpe
from transformer_course.data.bpe import (
    ALPHABET,
    BYTE_TO_CHAR,
    ScratchBPE,
    compare_with_library,
    learn_merges,
    pre_tokenize,
    tokens_per_word,
)
from transformer_course.data.tatoeba import tatoeba_split

# The textbook corpus (Sennrich et al., 2016): low x5, lower x2, newest x6, widest x3, one word per text, so that
# no word carries a leading space. Pair counts at the start:
#   lo 5+2=7, ow 7, we 2+6=8, er 2, ne 6, ew 6, es 6+3=9, st 9, wi 3, id 3, de 3
#  1. es 9 and st 9 tie: the pair of smaller ids wins, and 'e' < 's'      -> es   (we 8-6=2, st 9-9=0, es t 9)
#  2. es t 9                                                              -> est  (w est 6, d est 3)
#  3. lo 7 and ow 7 tie: 'l' < 'o'                                        -> lo   (ow 0, lo w 7)
#  4. lo w 7                                                              -> low  (we 0, low e 2)
#  5. ne 6, ew 6 and w est 6 tie: 'e' < 'n' < 'w'                         -> ew   (ne 0, w est 0, n ew 6, ew est 6)
#  6. n ew 6 and ew est 6 tie: 'n' is an older token (smaller id) than ew -> new  (new est 6)
#  7. new est 6                                                           -> newest
#  8. wi 3, id 3 and d est 3 tie: 'd' < 'i' < 'w'                         -> dest (i dest 3)
#  9. i dest 3 and wi 3 tie: 'i' < 'w'                                    -> idest
# 10. w idest 3                                                           -> widest
# 11. er 2 and low e 2 tie: 'e' < 'low' (a base character's id < a merged token's) -> er
# 12. low er 2                                                            -> lower; then no pair is left.
TEXTBOOK = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
TEXTBOOK_MERGES = [
    ("e", "s"),
    ("es", "t"),
    ("l", "o"),
    ("lo", "w"),
    ("e", "w"),
    ("n", "ew"),
    ("new", "est"),
    ("d", "est"),
    ("i", "dest"),
    ("w", "idest"),
    ("e", "r"),
    ("low", "er"),
]
BASE = 4 + 256  # the special tokens, then the byte characters


def test_hand_worked_merges_and_vocabulary():
    merges, vocab = learn_merges(TEXTBOOK, vocab_size=1000)
    assert merges == TEXTBOOK_MERGES
    assert vocab[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"] and vocab[4:BASE] == ALPHABET
    assert vocab[BASE:] == [a + b for a, b in TEXTBOOK_MERGES]  # one new token per merge, in merge order
    # min_frequency: merge 11 (er) has count 2, so a threshold of 3 stops learning after widest
    assert learn_merges(TEXTBOOK, 1000, min_frequency=3)[0] == TEXTBOOK_MERGES[:10]
    # vocab_size counts every token: room for 3 merges
    assert learn_merges(TEXTBOOK, BASE + 3)[0] == TEXTBOOK_MERGES[:3]
    # the library learns the very same merges
    assert compare_with_library(TEXTBOOK, ["lowest"], 1000).same_merges


def test_encoding_applies_merges_by_rank():
    bpe = ScratchBPE(*learn_merges(TEXTBOOK, 1000))
    # lowest: es (rank 0), es t (1), lo (2), lo w (3) -> low est, a word never seen whole
    assert bpe.tokens("lowest") == ["low", "est"]
    # newer: e w (4) before n ew (5) before e r (10); 'w e' is no merge at all
    assert bpe.tokens("newer") == ["new", "er"]
    # a leading space is its own byte character 'Ġ', which no merge of this corpus holds
    assert bpe.tokens("low lower") == ["low", "Ġ", "lower"]
    assert bpe.encode("lowest") == [bpe.vocab.index("low"), bpe.vocab.index("est")]


def test_byte_map_and_pre_tokenizer_match_the_library():
    assert len(set(BYTE_TO_CHAR.values())) == 256 and set(ALPHABET) == set(pre_tokenizers.ByteLevel.alphabet())
    assert BYTE_TO_CHAR[ord(" ")] == "Ġ" and BYTE_TO_CHAR[ord("a")] == "a" and BYTE_TO_CHAR[0] == chr(256)
    library = pre_tokenizers.ByteLevel(add_prefix_space=False)
    texts = [
        "¿Qué   pasó?\tÑandú — 😀 «sí»",
        "I'll say it's 12,500€ and we're done; they've 3½ m².",
        "Tom  \n said:\u00a0'Hi!'  \u200bok ",
        "",
    ]
    for text in texts:
        assert pre_tokenize(text) == [w for w, _ in library.pre_tokenize_str(text)], text


@pytest.fixture(scope="module")
def tatoeba():
    """1,500 training pairs drawn with a seed (3,000 sentences: English and Spanish) and 500 validation pairs."""
    split = tatoeba_split()
    rng = random.Random(0)
    train, valid = rng.sample(split.train, 1500), rng.sample(split.valid, 500)
    return [en for en, _ in train] + [es for _, es in train], [en for en, _ in valid] + [es for _, es in valid]


@pytest.fixture(scope="module")
def agreement(tatoeba):
    return compare_with_library(*tatoeba, vocab_size=500)


def test_same_merges_vocabulary_and_segmentation_as_the_library(tatoeba, agreement):
    assert agreement.same_merges and agreement.same_vocab
    assert len(agreement.scratch) == len(agreement.library) == 500
    assert agreement.differing == [] and agreement.agreement == 1.0
    for text in tatoeba[1][:200]:  # the ids too, not only the pieces
        assert agreement.scratch.encode(text) == agreement.library.encode(text)
    # a special token written in the text is that token, on both sides
    text = "Hola<eos> <pad>mundo"
    assert agreement.scratch.encode(text) == agreement.library.encode(text)
    ids = agreement.scratch.encode(text)
    assert ids.count(ScratchBPE.eos_id) == ids.count(ScratchBPE.pad_id) == 1


def test_a_difference_is_reported(tatoeba, monkeypatch):
    # against a library tokenizer that learned fewer merges, the comparison must see the differences
    monkeypatch.setattr(bpe_module, "train_bpe", lambda texts, size, freq: train_bpe(texts, size - 100, freq))
    result = compare_with_library(*tatoeba, vocab_size=500)
    assert not result.same_merges and not result.same_vocab
    assert 0 < len(result.differing) < len(tatoeba[1]) and result.agreement == 1 - len(result.differing) / 1000
    text, ours, theirs = result.differing[0]
    assert "".join(ours) == "".join(theirs) and len(ours) < len(theirs)  # same bytes, fewer pieces with more merges


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_round_trip_on_any_text(agreement, text):
    if any(s in text for s in ("<pad>", "<bos>", "<eos>", "<unk>")):
        return
    ids = agreement.scratch.encode(text)
    assert agreement.scratch.decode(ids) == text
    assert ScratchBPE.unk_id not in ids


def test_decode_stops_at_eos_and_replaces_cut_characters(agreement):
    bpe = agreement.scratch
    ids = bpe.encode("Buenos días")
    assert bpe.decode([1] + ids + [2] + ids + [0]) == "Buenos días"
    n = bpe.ids[BYTE_TO_CHAR["í".encode()[0]]]  # the first of the two bytes of 'í' alone
    assert bpe.decode([n]) == "\ufffd" == agreement.library.decode([n])


def test_tokens_per_word():
    bpe = ScratchBPE(*learn_merges(TEXTBOOK, 1000))
    rate = tokens_per_word(bpe, ["lowest newer", "low"])  # low est | Ġ new er | low
    assert (rate.tokens, rate.words, rate.chars) == (6, 3, 15)
    assert rate.per_word == 2.0 and rate.per_char == 6 / 15
    library = compare_with_library(TEXTBOOK, ["low"], 1000).library
    assert tokens_per_word(library, ["lowest newer", "low"]) == rate


@pytest.mark.parametrize(
    ("texts", "vocab_size", "min_frequency", "message"),
    [
        (TEXTBOOK, 259, 2, "too small"),
        (TEXTBOOK, 0, 2, "vocab_size must be a positive int"),
        (TEXTBOOK, 500.0, 2, "vocab_size must be a positive int"),
        (TEXTBOOK, 500, -1, "min_frequency"),
        ([], 500, 2, "no words"),
        (["", ""], 500, 2, "no words"),
    ],
)
def test_bad_arguments(texts, vocab_size, min_frequency, message):
    with pytest.raises(ValueError, match=message):
        learn_merges(texts, vocab_size, min_frequency)


def test_bad_vocabulary_and_empty_held_out_set():
    with pytest.raises(ValueError, match="must start with the special tokens"):
        ScratchBPE([], ALPHABET)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        ScratchBPE([("l", "o")], ["<pad>", "<bos>", "<eos>", "<unk>", *ALPHABET])
    with pytest.raises(TypeError, match="not one str"):
        learn_merges("low lower", 500)
    with pytest.raises(ValueError, match="texts_heldout is empty"):
        compare_with_library(TEXTBOOK, [], 500)
