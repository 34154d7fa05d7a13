"""A byte-pair-encoding (BPE) tokenizer, trained with Hugging Face ``tokenizers`` on the training split only.

Byte-level pre-tokenization makes decoding the exact inverse of encoding for any text (accents,
punctuation and spaces included), and no character is ever unknown. The special tokens have the same
ids as in the character vocabulary of the dates task: <pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from .dates import SPECIALS

__all__ = ["BPETokenizer", "train_bpe"]


class BPETokenizer:
    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokenizer: Tokenizer) -> None:
        for i, token in enumerate(SPECIALS):
            if tokenizer.token_to_id(token) != i:
                raise ValueError(f"the tokenizer must have {token} at id {i}")
        self.tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def tokens(self, text: str) -> list[str]:
        """The subword pieces of ``text``, readable (spaces shown as ' ' rather than byte-level 'Ġ')."""
        return [self.decode([i]) for i in self.encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text up to the first <eos>; <pad> and <bos> are dropped."""
        kept = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                kept.append(i)
        return self.tokenizer.decode(kept, skip_special_tokens=False)

    def save(self, path: str | Path) -> None:
        self.tokenizer.save(str(path))

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        return cls(Tokenizer.from_file(str(path)))

    def to_str(self) -> str:
        return self.tokenizer.to_str()


def train_bpe(texts: Iterable[str], vocab_size: int = 4000, min_frequency: int = 2) -> BPETokenizer:
    """A byte-level BPE tokenizer learned from ``texts`` (give it the training split only). Deterministic."""
    tokenizer = Tokenizer(models.BPE(unk_token=SPECIALS[3]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    return BPETokenizer(tokenizer)
