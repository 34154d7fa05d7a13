"""Train chapter 10's language models from the command line, and record each run as data.

    python -m transformer_course.lm_train --config lm-transformer-cpu --steps 1900 --seed 0 --out runs/x.json
    python -m transformer_course.lm_train --config lm-bigram --out runs/bigram.json

Configurations (``LM_CONFIGS``): a decoder-only Transformer (``language_model.TransformerLM``) and chapter 2's
recurrent network as a language model (``language_model.RNNLM``) on the English sentences of the course's
Tatoeba split (``lm_data.language_model_data``); the same Transformer on translation as language modelling
(``lm_data.translation_lm_data``: "English <bos> Spanish", the loss on the Spanish part); and the count-based
bigram model, which is fitted rather than trained. ``--set KEY=VALUE`` overrides a setting (a sweep).

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
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

from .language_model import TransformerLM
from .lm_data import LMBatch, LMData, Sequences, language_model_data, lm_batches, translation_lm_data
from .training import inverse_sqrt_lr

__all__ = ["LM_CONFIGS", "build_lm", "evaluate_lm", "main", "translate_as_lm"]

LM_CONFIGS: dict[str, dict] = {
    "lm-transformer-cpu": dict(
        task="lm", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=4, d_ff=768, dropout=0.0,
        max_tokens=600, peak_lr=0.002, warmup=150, max_len=64,
    ),
    # chosen at equal time on validation (runs/sweep-lm-transformer-cpu.json): half the layers, so each step costs
    # about 0.73 of the GRU's and 2,600 steps take the GRU's 1,900; twice the peak learning rate
    "lm-transformer-2layer-cpu": dict(
        task="lm", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=2, d_ff=768, dropout=0.0,
        max_tokens=600, peak_lr=0.004, warmup=150, max_len=64,
    ),
    "lm-rnn-cpu": dict(
        task="lm", model="rnn", vocab=8000, d_embed=256, d_hidden=512, n_layers=1, dropout=0.0,
        max_tokens=600, peak_lr=0.008, warmup=80,
    ),
    "lm-bigram": dict(task="lm", model="bigram", vocab=8000),
    "tlm-transformer-cpu": dict(
        task="translation", model="transformer", vocab=8000, d_model=192, n_heads=4, n_layers=4, d_ff=768,
        dropout=0.0, max_tokens=1200, peak_lr=0.002, warmup=150, max_len=160,
    ),
}  # fmt: skip

EVAL_TOKENS = 4000  # positions per evaluation batch: no gradients, so larger batches than in training


def build_lm(settings: dict, vocab_size: int) -> nn.Module:
    """The model a configuration names, untrained."""
    from . import language_model as lm

    if settings["model"] == "transformer":
        names = ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "dropout")
        return lm.TransformerLM(vocab_size, **{k: settings[k] for k in names})
    if settings["model"] == "rnn":
        rnn_names = ("d_embed", "d_hidden", "n_layers", "dropout")
        return lm.RNNLM(vocab_size, **{k: settings[k] for k in rnn_names})
    raise ValueError(f"unknown model {settings['model']!r}: transformer or rnn (the bigram model is fitted)")


def evaluate_lm(model: nn.Module, batches: list[LMBatch]) -> tuple[float, int]:
    """(summed negative log-likelihood in nats, number of predicted tokens) over the batches: the baselines' own
    measure, ``lm_baselines.negative_log_likelihood``, so that every model of the chapter is scored alike."""
    from .lm_baselines import negative_log_likelihood

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
    from .sampling import generate
    from .translation import max_output_length

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


def _bigram(settings: dict, data: LMData) -> dict:
    from .language_model import BigramLM

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
    p.add_argument("--config", required=True, choices=sorted(LM_CONFIGS))
    p.add_argument("--steps", type=int, default=1900, help="training steps (batches); ignored by the bigram model")
    p.add_argument("--eval-every-steps", type=int, default=380)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: PyTorch's)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override settings of the config")
    p.add_argument("--out", type=Path, help="write the run as JSON here")
    p.add_argument("--save", type=Path, help="write the trained weights here, float16 (compact_weights)")
    p.add_argument("--no-test", action="store_true", help="tuning: leave the test set unread (validation only)")
    p.add_argument(
        "--samples", type=int, default=0, help="store statistics of this many samples per setting (lm_samples)"
    )
    return p.parse_args(argv)


def _settings(args: argparse.Namespace) -> dict:
    settings = dict(LM_CONFIGS[args.config])
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key not in settings:
            raise SystemExit(f"--set {item}: expected KEY=VALUE with KEY one of {', '.join(settings)}")
        settings[key] = type(settings[key])(value) if not isinstance(settings[key], str) else value
    return settings


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    settings = _settings(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    wall = time.perf_counter()
    data = (language_model_data if settings["task"] == "lm" else translation_lm_data)(settings["vocab"])
    result: dict = {
        "command": "python -m transformer_course.lm_train " + " ".join(argv),
        "config": args.config,
        "settings": settings,
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "train_sequences": len(data.train),
        "valid_tokens": data.valid.predicted(),
        "valid_words": data.valid_words,
    }
    if settings["model"] == "bigram":
        result.update(_bigram(settings, data))
    else:
        result.update(_train(args, settings, data))
    result["wall_seconds"] = time.perf_counter() - wall
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text if not args.out else f"wrote {args.out}")
    return 0


def _train(args: argparse.Namespace, settings: dict, data: LMData) -> dict:
    from .language_model import next_token_loss
    from .train import parameter_digest

    pad = data.tokenizer.pad_id
    model = build_lm(settings, len(data.tokenizer))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    valid = lm_batches(data.valid, EVAL_TOKENS, pad, shuffle=False)
    curve, trained, step, epoch = [], 0.0, 0, 0
    batches: list[LMBatch] = []
    model.train()
    while step < args.steps:
        if not batches:  # a new pass over the training sentences, in a new order
            batches = lm_batches(data.train, settings["max_tokens"], pad, seed=args.seed * 1000 + epoch)[::-1]
            epoch += 1
        batch = batches.pop()
        step += 1
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(step, settings["peak_lr"], settings["warmup"])
        loss = next_token_loss(model, batch.ids, batch.ids != pad, batch.loss_mask)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        trained += time.perf_counter() - start
        if step % args.eval_every_steps == 0 or step == args.steps:
            nll, tokens = evaluate_lm(model, valid)
            point = {"step": step, "seconds": round(trained, 3), "train_loss": loss.item()}
            curve.append({**point, **_perplexities(nll, tokens, data.valid_words)})
            print(f"step {step}: valid perplexity {curve[-1]['perplexity']:.2f} ({trained:.0f} s)", flush=True)
    model.eval()
    out = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": step,
        "epochs_started": epoch,
        "train_seconds": trained,
        "curve": curve,
        "valid": {k: v for k, v in curve[-1].items() if k not in ("step", "seconds", "train_loss")},
        "parameter_digest": parameter_digest(model),
    }
    if args.samples:
        from .lm_samples import sample_report

        out["samples"] = sample_report(model, data.tokenizer, n=args.samples, seed=args.seed)
    if args.no_test:  # a tuning run: its choice is made on validation, and the test set stays unread
        return out
    test_nll, test_tokens = evaluate_lm(model, lm_batches(data.test, EVAL_TOKENS, pad, shuffle=False))
    out["test"] = _perplexities(test_nll, test_tokens, data.test_words)
    if settings["task"] == "translation":
        from .metrics import corpus_bleu

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
