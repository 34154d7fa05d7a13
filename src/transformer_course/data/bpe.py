"""Byte-level byte-pair encoding (BPE) from scratch, checked against Hugging Face ``tokenizers`` (chapter 10).

BPE starts from single characters and repeatedly glues together the adjacent pair that occurs most often in the
training corpus; each glued pair is a *merge*, and its position in the list is its *rank*. Encoding a new word
replays the merges: of the adjacent pairs in the word, the one of lowest rank is merged first (leftmost on a tie),
until no pair of the word is a merge.

Byte-level: a text is first cut into words by GPT-2's regular expression, and each word's UTF-8 bytes are
written as 256 printable characters (``BYTE_TO_CHAR``), so that no text is ever unknown and decoding is exact.

Everything here follows the library's ``BpeTrainer`` and ``BPE`` model (``tokenizers`` 0.23, read in its Rust
source, ``models/bpe/trainer.rs`` and ``word.rs``), so that ``compare_with_library`` can ask for identical output:

- ids: the special tokens (0..3), then the 256 byte characters sorted by code point, then one per merge;
- the next merge is the pair of highest count; on a tie, the pair of smallest ids (left id first);
- learning stops at ``vocab_size`` tokens, or when the best count falls below ``min_frequency``;
- pair counts are updated only in the words that held the merged pair (what makes learning fast in Python).
"""

from __future__ import annotations

import heapq
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import regex  # type: ignore[import-untyped]  # installed with sacrebleu; unlike `re`, it knows \p{L} and \p{N}

from .._checks import positive_int
from .dates import SPECIALS
from .tokenize import BPETokenizer, train_bpe

__all__ = ["ALPHABET", "BYTE_TO_CHAR", "ScratchBPE", "compare_with_library", "learn_merges", "tokens_per_word"]


def _byte_to_char() -> dict[int, str]:
    """GPT-2's map from each byte (0..255) to a printable character: bytes that print as themselves in Latin-1
    ('!'..'~', '¡'..'¬', '®'..'ÿ') keep their character; the 68 others (space, control characters, ...) take
    chr(256), chr(257), ... in byte order. A space becomes 'Ġ' (chr(288)), which is why BPE pieces show 'Ġ'."""
    keeps = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    others = [b for b in range(256) if b not in keeps]
    return {b: chr(b) for b in keeps} | {b: chr(256 + n) for n, b in enumerate(others)}


BYTE_TO_CHAR = _byte_to_char()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
ALPHABET = sorted(BYTE_TO_CHAR.values())  # the 256 base tokens, ids 4..259, in the library's order (code point)

# GPT-2's pre-tokenizer: English contractions, then runs of letters, of digits, of other symbols (each with at most
# one leading space), then whitespace. The `regex` package reads \p{L} (letter) and \p{N} (number) as the library's
# Oniguruma does; no difference is known on the course's text (Tatoeba: Latin letters, '¿¡«»—€₂º', U+00A0, U+200B).
WORD = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SPECIAL = regex.compile("(" + "|".join(regex.escape(s) for s in SPECIALS) + ")")


def _to_chars(piece: str) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def pre_tokenize(text: str) -> list[str]:
    """The words of ``text`` in byte characters: ``pre_tokenize("Hi, you!") == ['Hi', ',', 'Ġyou', '!']``."""
    return [_to_chars(w) for w in WORD.findall(text)]


def _merge_word(word: list[int], a: int, b: int, new: int) -> list[tuple[tuple[int, int], int]]:
    """Replace each (a, b) in ``word`` (token ids, changed in place), left to right, by ``new``. Returns the
    changes of pair counts within this word, [((left, right), +1 or -1)], for the neighbours of each replaced pair.
    As in the library, the merged pair's own count is left alone (it is never looked at again)."""
    changes = []
    i = 0
    while i < len(word) - 1:
        if word[i] == a and word[i + 1] == b:
            if i > 0:
                changes += [((word[i - 1], a), -1), ((word[i - 1], new), 1)]
            word[i : i + 2] = [new]
            if i < len(word) - 1:
                changes += [((b, word[i + 1]), -1), ((new, word[i + 1]), 1)]
        i += 1
    return changes


def learn_merges(
    texts: Iterable[str], vocab_size: int, min_frequency: int = 2
) -> tuple[list[tuple[str, str]], list[str]]:
    """Learn BPE merges from ``texts`` -> (merges, vocab): merges in rank order, each a pair of byte-character
    strings such as ('Ġ', 't'); vocab the token strings by id (specials, ``ALPHABET``, then merged tokens).

    Each distinct word is kept once with its count, as a list of token ids. ``pairs`` counts every adjacent pair
    (weighted by word count) and ``where`` records which words hold it. A heap holds (-count, pair, words) entries;
    a popped entry whose count is out of date goes back with its current count (lazy deletion). After a merge, only
    the words of the popped entry change, and only the pairs next to a merged pair change count."""
    if isinstance(texts, str):
        raise TypeError("texts must be a collection of texts, not one str (it would be read as one text per character)")
    positive_int("vocab_size", vocab_size)
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be an int >= 0, got {min_frequency!r}")
    if vocab_size < len(SPECIALS) + len(ALPHABET):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {len(SPECIALS)} special tokens and the "
            f"{len(ALPHABET)} byte characters alone take {len(SPECIALS) + len(ALPHABET)}"
        )
    raw = Counter(w for text in texts for w in WORD.findall(text))  # count words first: convert each once
    if not raw:
        raise ValueError("the corpus holds no words: give learn_merges at least one non-empty text")
    vocab = list(SPECIALS) + ALPHABET
    ids = {token: i for i, token in enumerate(vocab)}
    words = [[ids[c] for c in _to_chars(w)] for w in raw]
    counts = list(raw.values())
    pairs: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for w, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pairs[pair] += counts[w]
            where.setdefault(pair, set()).add(w)
    heap = [(-pairs[p], p, next_in_line, ws) for next_in_line, (p, ws) in enumerate(where.items())]
    heapq.heapify(heap)  # the third item breaks ties between entries of one pair, so that sets are never compared
    pushed, where = len(heap), {}
    merges: list[tuple[int, int]] = []
    while len(vocab) < vocab_size and heap:
        minus_count, pair, _, positions = heapq.heappop(heap)
        if -minus_count != pairs[pair]:  # out of date: back in the heap with its true count
            heapq.heappush(heap, (-pairs[pair], pair, pushed, positions))
            pushed += 1
            continue
        if pairs[pair] < max(1, min_frequency):
            break
        token = vocab[pair[0]] + vocab[pair[1]]
        if token not in ids:  # as the library: a string made again from other pieces would keep its id (never seen)
            ids[token] = len(vocab)
            vocab.append(token)
        merges.append(pair)
        for w in positions:
            for changed, change in _merge_word(words[w], *pair, ids[token]):
                pairs[changed] += change * counts[w]
                if change > 0:
                    where.setdefault(changed, set()).add(w)
        for changed, ws in where.items():
            if pairs[changed] > 0:
                heapq.heappush(heap, (-pairs[changed], changed, pushed, ws))
                pushed += 1
        where = {}
    return [(vocab[a], vocab[b]) for a, b in merges], vocab


class ScratchBPE:
    """A byte-level BPE tokenizer made of a merge list and a vocabulary (``learn_merges``' output), with the
    course's special tokens: <pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, merges: Sequence[tuple[str, str]], vocab: Sequence[str]) -> None:
        if list(vocab[: len(SPECIALS) + len(ALPHABET)]) != list(SPECIALS) + ALPHABET:
            raise ValueError("the vocabulary must start with the special tokens and then ALPHABET")
        self.merges, self.vocab = list(merges), list(vocab)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        missing = [m for m in self.merges if not {m[0], m[1], m[0] + m[1]} <= self.ids.keys()]
        if missing:
            raise ValueError(f"merge {missing[0]} holds or makes a token that is not in the vocabulary")
        # (left id, right id) -> (rank, merged id); a pair listed twice keeps its later rank, as in the library
        self.ranks = {(self.ids[a], self.ids[b]): (r, self.ids[a + b]) for r, (a, b) in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> ScratchBPE:
        return cls(*learn_merges(texts, vocab_size, min_frequency))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return self.vocab_size

    def _encode_word(self, word: str) -> list[int]:
        """One pre-tokenized word -> ids: merge the adjacent pair of lowest rank (leftmost on a tie), repeat."""
        if word not in self._cache:
            ids = [self.ids[c] for c in word]
            while len(ids) > 1:
                found = [(self.ranks[p][0], i) for i, p in enumerate(zip(ids, ids[1:])) if p in self.ranks]
                if not found:
                    break
                i = min(found)[1]
                ids[i : i + 2] = [self.ranks[ids[i], ids[i + 1]][1]]
            self._cache[word] = ids
        return list(self._cache[word])

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids (no <bos>/<eos> added). A special token written in the text ('<eos>') is that
        token, as in the library, which looks for them before pre-tokenizing."""
        out = []
        for part in SPECIAL.split(text):
            if part in SPECIALS:
                out.append(self.ids[part])
            else:
                out += [i for word in pre_tokenize(part) for i in self._encode_word(word)]
        return out

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``text`` in byte characters ('Ġ' for a space), as the library's ``Encoding.tokens``."""
        return [self.vocab[i] for i in self.encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text up to the first <eos>; <pad> and <bos> are dropped. Bytes that are not valid UTF-8 (a cut
        multi-byte character) become U+FFFD, as in the library."""
        data = bytearray()
        for i in map(int, ids):
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                token = self.vocab[i]
                data += token.encode("utf-8") if token in SPECIALS else bytes(CHAR_TO_BYTE[c] for c in token)
        return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class TokenRate:
    """How many tokens a tokenizer spends on some texts: per word (split on whitespace) and per character."""

    tokens: int
    words: int
    chars: int

    @property
    def per_word(self) -> float:
        return self.tokens / max(self.words, 1)

    @property
    def per_char(self) -> float:
        return self.tokens / max(self.chars, 1)


def tokens_per_word(tokenizer: ScratchBPE | BPETokenizer, texts: Sequence[str]) -> TokenRate:
    """Token, word and character counts of ``texts``. A per-token perplexity P becomes a per-word one as
    P ** per_word (the same total log-likelihood, divided by the words instead of the tokens): a number that
    models with different vocabularies can be compared on."""
    if isinstance(tokenizer, BPETokenizer):
        lengths = [len(ids) for ids in tokenizer.encode_batch(list(texts))]
    else:
        lengths = [len(tokenizer.encode(t)) for t in texts]
    return TokenRate(sum(lengths), sum(len(t.split()) for t in texts), sum(len(t) for t in texts))


@dataclass
class Agreement:
    """``compare_with_library``'s answer: agreement = the fraction of held-out sentences cut identically; each
    differing sentence comes with both segmentations (byte characters), scratch first."""

    agreement: float
    differing: list[tuple[str, list[str], list[str]]]
    same_merges: bool
    same_vocab: bool
    seconds_scratch: float  # wall-clock seconds to learn
    seconds_library: float
    cpu_scratch: float  # CPU seconds (all threads: the library learns on every core, the scratch version on one)
    cpu_library: float
    scratch: ScratchBPE = field(repr=False)
    library: BPETokenizer = field(repr=False)


def library_merges(tokenizer: BPETokenizer) -> list[tuple[str, str]]:
    """The merges of a ``tokenizers`` BPE in rank order, read from its JSON (a list of pairs, or "a b" strings)."""
    pairs = [m.split(" ", 1) if isinstance(m, str) else m for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    return [(a, b) for a, b in pairs]


def compare_with_library(
    texts_train: Sequence[str], texts_heldout: Sequence[str], vocab_size: int, min_frequency: int = 2
) -> Agreement:
    """Learn ``ScratchBPE`` and the library's BPE (``data.train_bpe``) on the same texts, and compare their merges,
    vocabularies and segmentations of ``texts_heldout`` (which must not be empty)."""
    if not texts_heldout:
        raise ValueError("texts_heldout is empty: nothing to compare the segmentations on")
    clocks = [(time.perf_counter(), time.process_time())]
    scratch = ScratchBPE.train(texts_train, vocab_size, min_frequency)
    clocks.append((time.perf_counter(), time.process_time()))
    library = train_bpe(texts_train, vocab_size, min_frequency)
    clocks.append((time.perf_counter(), time.process_time()))
    (wall0, cpu0), (wall1, cpu1), (wall2, cpu2) = clocks
    theirs = [e.tokens for e in library.tokenizer.encode_batch(list(texts_heldout), add_special_tokens=False)]
    both = [(t, scratch.tokens(t), lib) for t, lib in zip(texts_heldout, theirs)]
    differing = [b for b in both if b[1] != b[2]]
    same_merges, same_vocab = scratch.merges == library_merges(library), scratch.ids == library.tokenizer.get_vocab()
    agreement = 1 - len(differing) / len(both)
    times = (wall1 - wall0, wall2 - wall1, cpu1 - cpu0, cpu2 - cpu1)
    return Agreement(agreement, differing, same_merges, same_vocab, *times, scratch, library)
