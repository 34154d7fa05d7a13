"""The course's reference models: a Transformer and a GRU with attention, each trained once for 60 minutes on two
CPU cores by the command-line trainer, stored here with their weights, and studied in chapters 8 and 9; and, once a
GPU has run ``python -m transformer_course.gpu``, the Transformer it trained (``transformer-gpu``).

For each name (``transformer-ref``, ``bahdanau-ref``, ``transformer-gpu``: configurations of
``transformer_course.training.configs``) this folder holds three files:

``NAME.json``         the trainer's run: its command, configuration, machine, validation BLEU every 5 minutes (every
                      30 seconds on the GPU), the test BLEU decoded once at the end, and for weights stored in
                      a compact form, that form's own scores (``stored_weights``);
``NAME.pt``           the final weights, a state dict of tensors (``torch.load(..., weights_only=True)``) as trained
                      (transformer-ref), or the compact form of ``transformer_course.training.compact_weights``: float16 for
                      bahdanau-ref (``compact`` below), int8 or float16 for the GPU's model;
``NAME-sample.json``  the greedy translations of a fixed sample of the test set (every 150th sentence), decoded
                      from the stored weights: the test suite decodes them again and must find them to the token.

    python -m transformer_course.reference bleu transformer-ref     # re-decode the whole test set, compare its BLEU
    python -m transformer_course.reference sample transformer-ref   # (re)write the sample file from the weights
    python -m transformer_course.reference compact bahdanau-ref     # store float32 weights as float16, once
    python -m transformer_course.reference translate transformer-ref --beam 4 "TEXT"   # {"pieces", "output"} as JSON

``browser`` holds what the book's "Try the model" page shares with that last command: the translation contract, and
the weights file that the book build writes for the page (``book/_ext/course_model.py``).

They are loaded, never trained, by the notebooks and by CI: training one is an hour of two cores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:  # for the annotations only: the functions below import translation when they need it
    from ..data.translation import TranslationData

__all__ = [
    "KNOWN",
    "NAMES",
    "load_reference",
    "reference_run",
    "sample_record",
    "sample_sources",
    "sample_translations",
]

HERE = Path(__file__).parent
KNOWN = ("transformer-ref", "bahdanau-ref", "transformer-gpu")  # every reference model the course can hold ...
GPU_NAMES = ("transformer-gpu",)  # ... of which these come from a GPU run (transformer_course.gpu adopt)
# ... and the ones stored here: the GPU's model only once a GPU run was adopted.
NAMES = tuple(name for name in KNOWN if name not in GPU_NAMES or (HERE / f"{name}.pt").is_file())
SAMPLE_EVERY = 150  # the sample: every 150th test sentence (40 of them, short to long), decoded as one batch


def _path(name: str, suffix: str, folder: Path | None = None) -> Path:
    if name not in KNOWN:
        raise ValueError(f"unknown reference model {name!r}: expected one of {', '.join(KNOWN)}")
    return (HERE if folder is None else Path(folder)) / f"{name}{suffix}"


def reference_run(name: str, folder: Path | None = None) -> dict:
    """The stored run of a reference model: command, configuration, curve, scores."""
    path = _path(name, ".json", folder)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {name} has not been stored with the course")
    return json.loads(path.read_text())


def load_reference(name: str, data=None, folder: Path | None = None) -> tuple[nn.Module, TranslationData, dict]:
    """(model in eval mode on the CPU, its TranslationData, its run), from the stored files (in ``folder``, by
    default this package's).

    The weights are checked against the digest that the trainer recorded, so a damaged or swapped file is refused
    here rather than translating badly."""
    from ..data.translation import data_for
    from ..training.compact_weights import load_state
    from ..training.kinds import build_model, typed

    run = reference_run(name, folder)
    path = _path(name, ".pt", folder)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the reference weights are part of the repository (git checkout)")
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != run["weights_sha256"]:
        raise ValueError(f"{path} is not the file the trainer wrote (its SHA-256 differs from {name}.json's)")
    config = typed(run["settings"])
    if data is None:
        data = data_for(config)  # as translation_experiment loads it: one tokenisation serves both
    model = build_model(config, len(data.tokenizer))
    model.load_state_dict(load_state(path))
    return model.eval(), data, run


def sample_sources(data) -> list[str]:
    """The English sentences of the sample: every SAMPLE_EVERY-th test sentence."""
    return data.test_sources[::SAMPLE_EVERY]


def sample_translations(model: nn.Module, data) -> list[str]:
    """Greedy translations of the sample's sentences, decoded as one batch."""
    from ..evaluation.translate import greedy_translations

    with torch.no_grad():
        return greedy_translations(model, data, data.test_ids[::SAMPLE_EVERY])


def sample_record(name: str, model: nn.Module, data, run: dict) -> dict:
    """The sample file's content: the sample's sentences and the model's greedy translations of them, decoded here."""
    return {
        "name": name,
        "command": f"python -m transformer_course.reference sample {name}",
        "test_sentences": f"every {SAMPLE_EVERY}th of the test set, decoded greedily as one batch",
        "weights_sha256": run["weights_sha256"],
        "torch": torch.__version__,
        "sources": sample_sources(data),
        "translations": sample_translations(model, data),
    }
