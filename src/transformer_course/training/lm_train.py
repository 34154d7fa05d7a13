"""Train chapter 10's language models from the command line, and record each run as data.

    python -m transformer_course.lm_train --config lm-transformer-cpu --steps 1900 --seed 0 --out runs/x.json
    python -m transformer_course.lm_train --config lm-bigram --out runs/bigram.json

Configurations (``lm_configs.LANGUAGE_MODELS``, typed): a decoder-only Transformer (``language_model.TransformerLM``)
and chapter 2's recurrent network as a language model (``language_model.RNNLM``) on the English sentences of the
course's Tatoeba split (``lm_data.language_model_data``); the same Transformer on translation as language modelling
(``lm_data.translation_lm_data``: "English <bos> Spanish", the loss on the Spanish part); and the count-based
bigram model, which is fitted rather than trained. ``--set KEY=VALUE``, values in JSON as for every trainer,
overrides keys of the configuration (a sweep). The models train with the course's one loop, ``loop.fit``, on a
``lm_tasks.NextTokenTask``.

The budget is a number of steps (``--steps``), so that a run gives the same model on a busy machine: 1,900, chapter
8's five-minute budget counted in steps. A language model's step costs more than chapter 8's (every position
predicts over the whole vocabulary): about 0.27 s on one idle core for the Transformer and the GRU alike. The JSON
of ``--out`` holds the command, the settings, the machine, the curve of validation perplexity against steps and
time, and the final validation and test figures (the test set read once, at the end): perplexity per predicted token
and per word, so that tokenizers compare fairly, and for translation the test BLEU of greedy decoding and the first
test translations. ``--samples N`` stores statistics and examples of N samples at each of
``lm_samples.SAMPLING_SETTINGS``. ``--save`` writes the trained weights in float16 (``compact_weights``), for a
chapter that samples from the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

from ..data.lm_data import LMBatch, LMData, Sequences, language_model_data, lm_batches, translation_lm_data
from ..models.language_model import TransformerLM
from .base_config import add_set, overridden
from .lm_configs import LANGUAGE_MODELS, LM_TYPES, LMConfig, RNNLMConfig, TransformerLMConfig, recorded
from .lm_tasks import NextTokenTask, curve_of
from .loop import Settings, fit

__all__ = ["LM_CONFIGS", "build_lm", "configuration", "evaluate_lm", "main", "translate_as_lm"]

# The configurations as plain values, as runs record them (read by authoring.claims and the benchmarks).
LM_CONFIGS: dict[str, dict] = {name: recorded(config) for name, config in LANGUAGE_MODELS.items()}
STEPS = 1900  # the default budget: chapter 8's five minutes, counted in steps of the GRU

EVAL_TOKENS = 4000  # positions per evaluation batch: no gradients, so larger batches than in training


def build_lm(config: LMConfig | dict, vocab_size: int) -> nn.Module:
    """The model a configuration (typed, or as a run records it) names, untrained."""
    from ..models import language_model as lm

    c = config if isinstance(config, LMConfig) else LM_TYPES[config["model"]](**config)
    if isinstance(c, TransformerLMConfig):
        return lm.TransformerLM(
            vocab_size, d_model=c.d_model, n_heads=c.n_heads, n_layers=c.n_layers, d_ff=c.d_ff, max_len=c.max_len,
            dropout=c.dropout,
        )  # fmt: skip
    if isinstance(c, RNNLMConfig):
        return lm.RNNLM(vocab_size, d_embed=c.d_embed, d_hidden=c.d_hidden, n_layers=c.n_layers, dropout=c.dropout)
    raise ValueError(f"unknown model {c.model!r}: transformer or rnn (the bigram model is fitted)")


def evaluate_lm(model: nn.Module, batches: list[LMBatch]) -> tuple[float, int]:
    """(summed negative log-likelihood in nats, number of predicted tokens) over the batches: the baselines' own
    measure, ``lm_baselines.negative_log_likelihood``, so that every model of the chapter is scored alike."""
    from ..models.lm_baselines import negative_log_likelihood

    return negative_log_likelihood(model, [(b.ids, b.ids != 0, b.loss_mask) for b in batches])


def _perplexities(nll: float, tokens: int, words: int) -> dict:
    return {
        "nll_per_token": nll / tokens,
        "perplexity": math.exp(nll / tokens),
        "perplexity_per_word": math.exp(nll / words),
    }


@torch.no_grad()
def translate_as_lm(model: TransformerLM, data: LMData, max_rows: int = 128) -> list[str]:
    """Greedy translations of the test sentences: the prompt is "English <bos>", the output what follows until
    <eos>. Sentences of equal length go together, so that no prompt needs padding."""
    from ..decoding.sampling import generate
    from ..decoding.search import max_output_length

    assert data.test_sources is not None
    tok = data.tokenizer
    sources = tok.encode_batch(data.test_sources)
    out = [""] * len(sources)
    model_max_len = model.max_len
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(sources):
        by_length.setdefault(len(s), []).append(i)
    for n, rows in sorted(by_length.items()):
        limit = min(max_output_length(n), model_max_len - n - 1)
        for start in range(0, len(rows), max_rows):
            group = rows[start : start + max_rows]
            prompt = torch.tensor([[*sources[i], tok.bos_id] for i in group])  # (R, n + 1)
            ids = generate(model, prompt, limit, greedy=True, eos_id=tok.eos_id)
            for i, row in zip(group, ids[:, n + 1 :].tolist()):
                out[i] = tok.decode(row)
    return out


def _bigram(data: LMData) -> dict:
    from ..models.language_model import BigramLM

    def seqs(s: Sequences) -> list[list[int]]:
        return s.ids

    best = None
    tried = []
    for k in (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0):  # add-k smoothing, chosen on the validation set
        model = BigramLM(len(data.tokenizer), k).fit(seqs(data.train))
        nll = -model.log_prob(seqs(data.valid))
        tried.append({"k": k, "valid_perplexity": math.exp(nll / data.valid.predicted())})
        if best is None or nll < best[0]:
            best = (nll, k, model)
    assert best is not None
    nll, k, model = best
    test_nll = -model.log_prob(seqs(data.test))
    return {
        "add_k": k,
        "tried": tried,
        "valid": _perplexities(nll, data.valid.predicted(), data.valid_words),
        "test": _perplexities(test_nll, data.test.predicted(), data.test_words),
    }


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m transformer_course.lm_train", description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, choices=sorted(LANGUAGE_MODELS))
    p.add_argument("--steps", type=int, help=f"training steps (batches; default {STEPS}); ignored by the bigram model")
    p.add_argument("--eval-every-steps", type=int, default=380)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's)")
    add_set(p, "the configuration (lm_configs.LANGUAGE_MODELS)")
    p.add_argument("--out", type=Path, help="write the run as JSON here")
    p.add_argument("--save", type=Path, help="write the trained weights here, float16 (compact_weights)")
    p.add_argument("--no-test", action="store_true", help="tuning: leave the test set unread (validation only)")
    p.add_argument(
        "--samples", type=int, default=0, help="store statistics of this many samples per setting (lm_samples)"
    )
    return p.parse_args(argv)


def configuration(args: argparse.Namespace) -> LMConfig:
    """The configuration a command line asks for: the named one, its ``--set`` overrides, and the budget of
    ``--steps`` (else the configuration's own, else ``STEPS``)."""
    config = LANGUAGE_MODELS[args.config]
    config = overridden(config, args.set, f"{config.model} language model")
    if not isinstance(config, TransformerLMConfig | RNNLMConfig):  # the bigram model is fitted: no budget
        return config
    if args.steps or (config.steps is None and config.seconds is None):
        config = dataclasses.replace(config, steps=args.steps or STEPS)
    return config


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    config = configuration(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    wall = time.perf_counter()
    data = (language_model_data if config.task == "lm" else translation_lm_data)(config.vocab)
    result: dict = {
        "command": "python -m transformer_course.lm_train " + " ".join(argv),
        "config": args.config,
        "settings": recorded(config),  # the budget aside: the command gives it, and "steps" says what it trained
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "train_sequences": len(data.train),
        "valid_tokens": data.valid.predicted(),
        "valid_words": data.valid_words,
    }
    if isinstance(config, TransformerLMConfig | RNNLMConfig):
        result.update(_train(args, config, data))
    else:
        result.update(_bigram(data))
    result["wall_seconds"] = time.perf_counter() - wall
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text if not args.out else f"wrote {args.out}")
    return 0


def _train(args: argparse.Namespace, config: TransformerLMConfig | RNNLMConfig, data: LMData) -> dict:
    """Train the model with ``loop.fit`` on the next-token task, then score it (and translate, for translation)."""
    from .train import parameter_digest

    pad = data.tokenizer.pad_id
    model = build_lm(config, len(data.tokenizer))
    valid = lm_batches(data.valid, EVAL_TOKENS, pad, shuffle=False)

    def evaluate(m: nn.Module) -> dict:
        return _perplexities(*evaluate_lm(m, valid), data.valid_words)

    def report(history: dict) -> None:
        step, seconds, figures = history["eval"][-1]
        print(f"step {step}: valid perplexity {figures['perplexity']:.2f} ({seconds:.0f} s)", flush=True)

    task = NextTokenTask(data.train, config.max_tokens, pad, args.seed, evaluate)
    # PyTorch's default Adam, not the fused kernel: the stored runs were trained with it, bit for bit
    settings = Settings.from_config(config, seed=args.seed, eval_every_steps=args.eval_every_steps, fused_adam=False)
    history = fit(model, task, settings, progress=False, after_eval=report)
    curve = curve_of(history)
    out = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": history["step"],
        "epochs_started": task.batches.epoch,
        "train_seconds": history["seconds"],
        "curve": curve,
        "valid": {k: v for k, v in curve[-1].items() if k not in ("step", "seconds", "train_loss")},
        "parameter_digest": parameter_digest(model),
    }
    if args.samples:
        from ..evaluation.lm_samples import sample_report

        out["samples"] = sample_report(model, data.tokenizer, n=args.samples, seed=args.seed)
    if args.no_test:  # a tuning run: its choice is made on validation, and the test set stays unread
        return out
    test_nll, test_tokens = evaluate_lm(model, lm_batches(data.test, EVAL_TOKENS, pad, shuffle=False))
    out["test"] = _perplexities(test_nll, test_tokens, data.test_words)
    if config.task == "translation":
        from ..evaluation.metrics import corpus_bleu

        start = time.perf_counter()
        assert data.test_references is not None and data.test_sources is not None
        assert isinstance(model, TransformerLM)
        outputs = translate_as_lm(model, data)
        out["test_bleu"] = corpus_bleu(outputs, data.test_references)
        out["decode_seconds"] = time.perf_counter() - start
        out["test_examples"] = [  # the first test sentences, for the chapter to show
            {"source": s, "reference": r, "output": o}
            for s, r, o in zip(data.test_sources[:8], data.test_references[:8], outputs[:8])
        ]
    if args.save:
        from .compact_weights import compact

        args.save.parent.mkdir(parents=True, exist_ok=True)
        torch.save(compact(model.state_dict(), "float16"), args.save)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
