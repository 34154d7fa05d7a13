"""Train chapter 10's masked language model (``masked_lm.MaskedLM``) from the command line, and record the run.

    python -m transformer_course.mlm_train --steps 2000 --seed 0 --threads 1 --out runs/mlm-transformer-cpu-seed0.json

The model learns on the English side of the course's Tatoeba split (``lm_data.language_model_data``, the BPE of
8000 pieces), a new random masking of every batch at every step. The validation sentences are masked once, with a
generator of fixed seed (``fixed_masks``), so that every evaluation and every run scores the same positions, and
two context-free baselines are scored on those positions too (``baselines``): always guessing the most frequent
training token, and the unigram distribution of the training tokens. The JSON of ``--out`` holds the command, the
settings, the machine, the curve of validation masked-token accuracy and NLL against steps and time, the final
validation figures, the baselines, and held-out sentences with one word blanked out and the model's top 3
(``blank_examples``). ``--save`` writes the trained weights in float16 (``compact_weights``).

The budget is a number of steps (``--steps``), not seconds, so that a run gives the same model on a busy machine
(meant as a few minutes on one CPU thread; see ``lm_configs.MASKED_LM`` for what was measured). ``--set KEY=VALUE``,
values in JSON as for every trainer, overrides keys of that configuration. The model trains with the course's one
loop, ``loop.fit``, on a ``lm_tasks.MaskedTokenTask``. Shapes: B batch, T length, N target positions, V the
tokenizer's vocabulary.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import positive_int
from ..data.lm_data import LMData, Sequences, language_model_data, lm_batches
from ..data.tokenize import BPETokenizer
from ..models.masked_lm import BLANK, SPECIAL_IDS, MaskedLM, blank_ids, check_rate, fill_blank, mask_tokens
from .base_config import add_set, checked, overridden
from .lm_configs import MASKED_LM, MaskedLMConfig, recorded
from .lm_tasks import MaskedTokenTask, curve_of
from .loop import Settings, fit

__all__ = [
    "MLM_SETTINGS",
    "STEPS",
    "MaskedBatch",
    "baselines",
    "blank_examples",
    "build_masked_lm",
    "configuration",
    "evaluate_masked",
    "fixed_masks",
    "main",
    "train_masked_lm",
]

VALID_MASK_SEED = 2024  # the validation positions: one fixed draw, the same for every run and every evaluation

# The configuration as plain values, as runs record it (read by authoring.claims); the typed one is MASKED_LM.
MLM_SETTINGS: dict = recorded(MASKED_LM)
STEPS = 2000  # the default budget: 5 minutes of one thread (lm_configs.MASKED_LM)
EVAL_TOKENS = 4000  # positions per evaluation batch: no gradients, so larger batches than in training


@dataclass
class MaskedBatch:
    """A batch masked once: original ids (B, T), padding mask, corrupted ids, targets (B, T) bool."""

    ids: Tensor
    mask: Tensor
    corrupted: Tensor
    targets: Tensor


def fixed_masks(
    seqs: Sequences, model: MaskedLM, rate: float, seed: int = VALID_MASK_SEED, max_tokens: int = EVAL_TOKENS
) -> list[MaskedBatch]:
    """The sequences in batches (in order), each masked once with one generator seeded ``seed``: the same
    positions and replacements every time, so that evaluations and runs compare."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for b in lm_batches(seqs, max_tokens, model.pad_id, shuffle=False):
        mask = b.ids != model.pad_id
        corrupted, targets = mask_tokens(b.ids, mask, rate, model.mask_id, model.vocab_size, generator)
        out.append(MaskedBatch(b.ids, mask, corrupted, targets))
    return out


@torch.no_grad()
def evaluate_masked(model: MaskedLM, batches: list[MaskedBatch]) -> dict:
    """Over the fixed targets: mean NLL (nats), accuracy of the top token, and the accuracy on the positions shown
    as [MASK] alone (the fill-in-the-blank case; the others show a random or the true token)."""
    was_training = model.training
    model.eval()
    nll, correct, n, masked_correct, masked_n = 0.0, 0, 0, 0, 0
    for b in batches:
        logits = model.logits_at(b.corrupted, b.mask, b.targets)  # (N, V)
        truth = b.ids[b.targets]  # (N,)
        hit = logits.argmax(dim=-1) == truth
        shown_mask = b.corrupted[b.targets] == model.mask_id  # (N,)
        nll += F.cross_entropy(logits, truth, reduction="sum").item()
        correct, n = correct + int(hit.sum()), n + len(truth)
        masked_correct, masked_n = masked_correct + int(hit[shown_mask].sum()), masked_n + int(shown_mask.sum())
    model.train(was_training)
    return {
        "nll": nll / n,
        "accuracy": correct / n,
        "accuracy_on_mask": masked_correct / max(masked_n, 1),
        "targets": n,
        "targets_shown_as_mask": masked_n,
    }


def baselines(train: Sequences, batches: list[MaskedBatch], vocab_size: int) -> dict:
    """Context-free guesses on the same targets: the most frequent training token (accuracy), and the unigram
    distribution of the training tokens, add-one smoothed over the ordinary tokens (NLL, and its top-1 accuracy
    is the same guess)."""
    counts = Counter(t for s in train.ids for t in s if t not in SPECIAL_IDS)
    ordinary = [i for i in range(vocab_size) if i not in SPECIAL_IDS]
    total = sum(counts.values()) + len(ordinary)
    log_p = torch.full((vocab_size,), -math.inf, dtype=torch.float64)
    log_p[ordinary] = torch.tensor([math.log((counts[i] + 1) / total) for i in ordinary], dtype=torch.float64)
    top = max(ordinary, key=lambda i: counts[i])
    truth = torch.cat([b.ids[b.targets] for b in batches])  # (N,)
    return {
        "most_frequent_token": top,
        "most_frequent_accuracy": float((truth == top).double().mean()),
        "unigram_nll": float(-log_p[truth].mean()),
    }


def blank_examples(model: MaskedLM, tokenizer: BPETokenizer, seqs: Sequences, n: int, seed: int = 0) -> list[dict]:
    """n held-out sentences, each with one whole word (a single BPE piece of letters, not the first word) blanked:
    the sentence with ____, the true word with its rank and probability, and the model's top 3 (``fill_blank``)."""
    rng = random.Random(seed)
    order = list(range(len(seqs)))
    rng.shuffle(order)
    out: list[dict] = []
    for i in order:
        if len(out) >= n:
            break
        pieces = seqs.ids[i][1:-1]
        texts = [tokenizer.decode([p]) for p in pieces]
        # a whole word: a piece " word" of letters, followed by the end or by a piece that starts a new word
        spots = [
            j
            for j in range(1, len(pieces))
            if texts[j].startswith(" ")
            and texts[j][1:].isalpha()
            and (j + 1 == len(pieces) or not texts[j + 1][:1].isalpha())
        ]
        if len(pieces) < 5 or not spots:
            continue
        j = rng.choice(spots)
        text = tokenizer.decode(pieces[:j]) + " " + BLANK + tokenizer.decode(pieces[j + 1 :])
        ids, position = blank_ids(tokenizer, text, model.mask_id)
        if ids[1:position] + ids[position + 1 : -1] != pieces[:j] + pieces[j + 1 :]:
            continue  # the text does not encode back to the same pieces: not a clean example
        ranked = fill_blank(model, tokenizer, text, k=len(tokenizer))  # every candidate, most likely first
        rank = next(r for r, (t, _) in enumerate(ranked) if t == texts[j])  # the answer fits the blank's spacing
        out.append({
            "sentence": text, "answer": texts[j].strip(), "answer_rank": rank + 1,
            "answer_probability": float(f"{ranked[rank][1]:.3g}"),  # 3 significant digits: often tiny
            "top3": [{"token": t.strip(), "probability": round(p, 4)} for t, p in ranked[:3]], "correct": rank == 0,
        })  # fmt: skip
    return out


def build_masked_lm(config: MaskedLMConfig | dict, vocab_size: int) -> MaskedLM:
    """The model of a configuration (typed, or as a run records it), untrained."""
    c = config if isinstance(config, MaskedLMConfig) else MaskedLMConfig(**config)
    return MaskedLM(
        vocab_size, d_model=c.d_model, n_heads=c.n_heads, n_layers=c.n_layers, d_ff=c.d_ff, max_len=c.max_len,
        dropout=c.dropout,
    )  # fmt: skip


def train_masked_lm(
    steps: int,
    seed: int = 0,
    settings: MaskedLMConfig | dict | None = None,
    data: LMData | None = None,
    eval_every_steps: int | None = None,
    log=print,
) -> tuple[MaskedLM, dict]:
    """Train a MaskedLM for ``steps`` batches with ``loop.fit`` (``settings``: a configuration, or keys that
    override ``MASKED_LM``'s; ``data`` defaults to the course's English sentences) -> (the model, the record: curve,
    final validation figures, baselines, examples)."""
    positive_int("steps", steps)
    if not isinstance(settings, MaskedLMConfig):
        settings = checked(MaskedLMConfig, {**recorded(MASKED_LM), **(settings or {})}, "masked language model")
    config = replace(settings, steps=steps)
    check_rate(config.rate)
    torch.manual_seed(seed)
    data = language_model_data(config.vocab) if data is None else data
    pad = data.tokenizer.pad_id
    model = build_masked_lm(config, len(data.tokenizer))
    valid = fixed_masks(data.valid, model, config.rate)

    def evaluate(m: nn.Module) -> dict:
        assert isinstance(m, MaskedLM)
        return evaluate_masked(m, valid)

    def report(history: dict) -> None:
        step, seconds, figures = history["eval"][-1]
        log(f"step {step}: valid accuracy {figures['accuracy']:.3f}, NLL {figures['nll']:.3f} ({seconds:.0f} s)")

    task = MaskedTokenTask(data.train, config.max_tokens, pad, seed, config.rate, evaluate)
    every = eval_every_steps or max(1, steps // 5)
    # PyTorch's default Adam, not the fused kernel: the stored run was trained with it, bit for bit
    loop_settings = Settings.from_config(config, seed=seed, eval_every_steps=every, fused_adam=False)
    history = fit(model, task, loop_settings, progress=False, after_eval=report)
    from .train import parameter_digest

    curve = curve_of(history)
    guesses = baselines(data.train, valid, len(data.tokenizer))
    guesses["most_frequent_token_text"] = data.tokenizer.decode([guesses["most_frequent_token"]])
    record = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": history["step"],
        "epochs_started": task.batches.epoch,
        "train_seconds": history["seconds"],
        "curve": curve,
        "valid": {k: v for k, v in curve[-1].items() if k not in ("step", "seconds", "train_loss")},
        "valid_mask_seed": VALID_MASK_SEED,
        "baselines": guesses,
        "examples": blank_examples(model, data.tokenizer, data.valid, config.examples),
        "parameter_digest": parameter_digest(model),
    }
    return model, record


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m transformer_course.mlm_train", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, help=f"training steps (batches; default {STEPS})")
    p.add_argument("--eval-every-steps", type=int, default=None, help="default: five points on the curve")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's)")
    add_set(p, "the configuration (lm_configs.MASKED_LM)")
    p.add_argument("--out", type=Path, help="write the run as JSON here")
    p.add_argument("--save", type=Path, help="write the trained weights here, float16 (compact_weights)")
    return p.parse_args(argv)


def configuration(args: argparse.Namespace) -> MaskedLMConfig:
    """The configuration a command line asks for: ``MASKED_LM`` with its ``--set`` overrides."""
    return overridden(MASKED_LM, args.set, "masked language model")


def main(argv: list[str] | None = None, data: LMData | None = None) -> int:
    """The command line; ``data`` replaces the course's sentences (the tests pass a tiny corpus)."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    config = configuration(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    wall = time.perf_counter()
    data = language_model_data(config.vocab) if data is None else data
    result: dict = {
        "command": "python -m transformer_course.mlm_train " + " ".join(argv),
        "settings": recorded(config),  # the budget aside: the command gives it, and "steps" says what it trained
        "seed": args.seed,
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "train_sequences": len(data.train),
        "valid_sequences": len(data.valid),
    }
    steps = args.steps or config.steps or STEPS
    model, record = train_masked_lm(steps, args.seed, config, data, args.eval_every_steps)
    result.update(record)
    if args.save:
        from .compact_weights import compact

        args.save.parent.mkdir(parents=True, exist_ok=True)
        torch.save(compact(model.state_dict(), "float16"), args.save)
    result["wall_seconds"] = time.perf_counter() - wall
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text if not args.out else f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
