"""A teacher for the five-minute Transformer (sequence-level knowledge distillation, Kim and Rush 2016): the
hour-long reference Transformer translates every English sentence of the training half once, with chapter 9's beam
search, and a student trains on those translations in place of (or beside) the human ones.

    python -m transformer_course.reference.teacher           # the teacher translates the training sources, once
    python -m transformer_course.train --config transformer-cpu --steps 1920 --teacher-share 1.0 ...

The translations are made once and kept in the model cache (``teacher-<key>.txt.xz``, one line per distinct
training source, 0.8 MB); the key covers the teacher's weights, the split, the search and the decoding batch.
Regenerating them took 53 minutes of two CPU cores shared with other work, so they are cached rather than tracked: the
repository's tree has no room to spare (the guide's "Stored weights").

``teacher_share`` is the share of training pairs whose Spanish side is the teacher's (drawn per pair with the run's
seed): 0 is the human data, 1 the teacher's alone. Everything else about the batches is as ``data.translation``
makes them: the same pairs, the same length filter, the same token-count batching.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import random
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from ..data.batching import Batch, token_batches
from ..data.tatoeba import SPA_TSV_SHA256, tatoeba_split
from ..data.translation import MAX_TRAIN_TOKENS, TranslationData
from ..repository import cache_dir

__all__ = ["TEACHER", "distilled_batches", "read_teacher", "teacher_file", "training_sources", "write_teacher"]

TEACHER: dict = {"name": "transformer-ref", "beam": 4, "alpha": 0.6, "rows": 256}  # chapter 9's search


def teacher_file(limit: int | None = None) -> Path:
    """Where the teacher's translations are cached: named by the teacher's weights, the split and the search."""
    run = json.loads(files("transformer_course.reference").joinpath(f"{TEACHER['name']}.json").read_text())
    spec = f"{SPA_TSV_SHA256} {run['weights_sha256']} {sorted(TEACHER.items())} limit={limit}"
    return cache_dir() / f"teacher-{hashlib.sha256(spec.encode()).hexdigest()[:12]}.txt.xz"


def training_sources() -> list[str]:
    """The distinct English sentences of the training half, in order of first appearance."""
    return list(dict.fromkeys(en for en, _ in tatoeba_split().train))


def read_teacher(limit: int | None = None, path: Path | None = None) -> dict[str, str]:
    """{English training source: the teacher's Spanish}, from the cache (or ``path``); a clear error when it was
    never made."""
    path, sources = path or teacher_file(limit), training_sources()[:limit]
    if not path.is_file():
        raise FileNotFoundError(
            f"no teacher translations in {path}: make them once with `python -m transformer_course.reference.teacher`"
            " (under an hour of two CPU cores)"
        )
    lines = lzma.decompress(path.read_bytes()).decode().split("\n")
    if len(lines) != len(sources):
        raise ValueError(f"{path}: {len(lines)} lines for {len(sources)} sources; delete it and make it again")
    return dict(zip(sources, lines))


def write_teacher(outputs: list[str], limit: int | None = None) -> Path:
    """Cache the teacher's translations of ``training_sources()[:limit]``, one line each, compressed."""
    if any("\n" in text for text in outputs):
        raise ValueError("a teacher translation holds a line break: the cache file keeps one per line")
    path = teacher_file(limit)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(lzma.compress("\n".join(outputs).encode(), preset=6))
    tmp.replace(path)
    return path


@lru_cache(maxsize=2)
def _encoded(tokenizer) -> tuple[list[tuple[str, str]], list[list[int]], list[list[int]]]:
    """The training pairs, their sources and their human targets in ids: encoded once per tokenizer."""
    pairs = tatoeba_split().train
    return pairs, tokenizer.encode_batch([en for en, _ in pairs]), tokenizer.encode_batch([es for _, es in pairs])


def distilled_batches(
    data: TranslationData, share: float, max_tokens: int, seed: int, teacher: dict[str, str] | None = None
) -> list[Batch]:
    """Token-count batches of the training pairs, each pair's target the teacher's with probability ``share``
    (``teacher``: {source: translation}, by default the cached one, ``read_teacher()``)."""
    if not 0 <= share <= 1:
        raise ValueError(f"teacher_share must be from 0 to 1, got {share}")
    teacher = read_teacher() if teacher is None else teacher
    pairs, src, human = _encoded(data.tokenizer)
    rng = random.Random(f"teacher {seed}")
    taught = [rng.random() < share for _ in pairs]
    ids = dict(zip(teacher, data.tokenizer.encode_batch(list(teacher.values()))))
    tgt = [ids[en] if t else h for (en, _), t, h in zip(pairs, taught, human)]
    kept = [i for i in range(len(src)) if len(src[i]) <= MAX_TRAIN_TOKENS and len(tgt[i]) < MAX_TRAIN_TOKENS]
    tokenizer = data.tokenizer
    return token_batches(
        [src[i] for i in kept], [tgt[i] for i in kept], max_tokens, tokenizer.pad_id, tokenizer.eos_id, seed=seed
    )
