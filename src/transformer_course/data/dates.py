"""A synthetic translation task: human-readable dates to ISO 8601, at the character level.

    >>> make_date_pairs(2, seed=0)  # doctest: +SKIP
    [('tuesday, march 2 2021', '2021-03-02'), ('03/05/79', '1979-05-03')]

Every date lies between 1950-01-01 and 2049-12-31, so that a two-digit year is never ambiguous:
50-99 mean 19xx and 00-49 mean 20xx. Day-first is the only numeric order used (``03/05/79`` is the
3rd of May), as in most of the world. The same seed always gives the same pairs.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterable, Sequence

__all__ = ["FORMATS", "SPECIALS", "CharVocab", "date_splits", "date_vocabs", "format_date", "make_date_pairs", "to_iso"]

FIRST, LAST = dt.date(1950, 1, 1), dt.date(2049, 12, 31)
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _parts(d: dt.date) -> dict[str, str]:
    month, weekday = MONTHS[d.month - 1], WEEKDAYS[d.weekday()]
    return {
        "d": str(d.day),
        "dd": f"{d.day:02d}",
        "dth": _ordinal(d.day),
        "m": str(d.month),
        "mm": f"{d.month:02d}",
        "Month": month,
        "month": month.lower(),
        "MONTH": month.upper(),
        "Mon": month[:3],
        "mon": month[:3].lower(),
        "Weekday": weekday,
        "weekday": weekday.lower(),
        "Wkd": weekday[:3],
        "yyyy": str(d.year),
        "yy": f"{d.year % 100:02d}",
    }


# str.format templates over the fields of _parts.
FORMATS = (
    "{d} {Month} {yyyy}",
    "{dd} {Month} {yyyy}",
    "{d} {Mon} {yyyy}",
    "{d} {month} {yy}",
    "{d} {MONTH} {yyyy}",
    "{Month} {d}, {yyyy}",
    "{month} {d} {yyyy}",
    "{Mon} {d} {yyyy}",
    "{weekday}, {month} {d} {yyyy}",
    "{Weekday} {d} {Month} {yyyy}",
    "{Wkd}, {d} {Mon} {yyyy}",
    "the {dth} of {Month} {yyyy}",
    "{Month} {dth}, {yyyy}",
    "{dd}/{mm}/{yy}",
    "{dd}/{mm}/{yyyy}",
    "{d}/{m}/{yyyy}",
    "{dd}.{mm}.{yyyy}",
    "{d}.{m}.{yy}",
    "{dd}-{Mon}-{yyyy}",
    "{yyyy}/{mm}/{dd}",
    "{yyyy} {Month} {d}",
)


def format_date(d: dt.date, fmt: str) -> str:
    return fmt.format(**_parts(d))


def to_iso(d: dt.date) -> str:
    return d.isoformat()


def _random_dates(rng: random.Random, n: int) -> list[dt.date]:
    span = (LAST - FIRST).days
    return [FIRST + dt.timedelta(days=rng.randrange(span + 1)) for _ in range(n)]


def make_date_pairs(n: int, seed: int = 0, formats: Sequence[str] = FORMATS) -> list[tuple[str, str]]:
    """n pairs (human-readable date, ISO 8601 date), each in a format drawn at random."""
    rng = random.Random(seed)
    return [(format_date(d, rng.choice(formats)), to_iso(d)) for d in _random_dates(rng, n)]


def date_splits(n_train: int, n_test: int, seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, test) pairs whose *dates* differ: no test date occurs in training, in any format."""
    rng = random.Random(seed)
    days = list(range((LAST - FIRST).days + 1))
    if n_test > len(days) // 2:
        raise ValueError(f"at most {len(days) // 2} test dates, got {n_test}")
    rng.shuffle(days)
    test_days, train_days = days[:n_test], days[n_test:]
    train = [FIRST + dt.timedelta(days=rng.choice(train_days)) for _ in range(n_train)]
    test = [FIRST + dt.timedelta(days=d) for d in test_days]
    as_pairs = lambda dates: [(format_date(d, rng.choice(FORMATS)), to_iso(d)) for d in dates]
    return as_pairs(train), as_pairs(test)


SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")


class CharVocab:
    """A character vocabulary with the course's special tokens: <pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3.

    It has the same interface as the BPE tokenizer (``encode``, ``decode``, ``pad_id`` ...), so that the
    models and batching code treat characters and subwords alike.
    """

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, chars: Iterable[str]) -> None:
        chars = sorted(set(chars))
        if any(len(c) != 1 for c in chars):
            raise ValueError("a character vocabulary holds single characters")
        self.tokens = list(SPECIALS) + chars
        self.index = {c: i for i, c in enumerate(self.tokens)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharVocab:
        return cls("".join(texts))

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(c, self.unk_id) for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        """Characters up to the first <eos>; <pad> and <bos> are dropped."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            out.append(self.tokens[i] if 0 <= i < len(self.tokens) else SPECIALS[3])
        return "".join(out)


def date_vocabs() -> tuple[CharVocab, CharVocab]:
    """(source, target) vocabularies: every character a date format can produce, and the ISO digits and dash."""
    source: set[str] = set()
    for fmt in FORMATS:
        for d in (dt.date(2000, m, 1) + dt.timedelta(days=k) for m in range(1, 13) for k in range(0, 31, 7)):
            source.update(format_date(d, fmt))
    source.update("0123456789")
    return CharVocab(source), CharVocab("0123456789-")
