"""The phases of the GPU run (``run.Run`` calls them in the order of ``PHASES``), and the summary it prints last.

Each phase takes the run and writes its own file as soon as it has a result; ``run.Run.phase`` records its outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from ..training.compact_weights import compact, rounded_copy, save_compact
from ..training.configs import CONFIGS
from . import FILES
from .machine import describe
from .run import GRU, TRANSFORMER, Run

__all__ = ["PHASES", "summary"]


def describe_machine(run: Run) -> None:
    run.record["machine"] = describe(run.device)
    torch.manual_seed(run.seed)


def _free(run: Run) -> None:
    if run.device.type == "cuda":
        torch.cuda.empty_cache()


def throughput(run: Run) -> None:
    """bf16 training throughput of the course's Transformer and nn.Transformer, same size, same weights, alternating."""
    from ..data.translation import VOCAB_SIZE
    from ..measurement.speed import random_batches
    from ..measurement.speed import throughput as measure
    from ..models.transformer_torch import to_torch
    from ..training.kinds import build_model

    b = run.budgets.throughput
    ours = build_model(CONFIGS[TRANSFORMER], VOCAB_SIZE, seed=run.seed).to(run.device)
    # nn.Transformer inside the same embeddings and output layer. The ignore: ours is a transformer.Transformer,
    # which build_model types as any module (the configuration's kind decides).
    theirs = to_torch(ours).to(run.device)  # type: ignore[arg-type]
    batches = [x.to(run.device) for x in random_batches(8, b["sentences"], VOCAB_SIZE, 8, 20, seed=run.seed)]
    result = measure(
        {"ours": ours, "torch": theirs},
        batches,
        rounds=b["rounds"],
        steps=b["steps"],
        warmup=b["warmup"],
        bf16=run.bf16,
        log=print,
    )
    rate = result["tokens_per_second"]
    run.results["throughput"] = rate["ours"] / rate["torch"]
    run.save(
        "throughput",
        {
            "command": run.command,
            "machine": run.machine(),
            "config": TRANSFORMER,
            "settings": CONFIGS[TRANSFORMER],
            "bf16_autocast": run.bf16,
            "batches": {"count": len(batches), "sentences": b["sentences"], "lengths": [8, 20]},
            "rounds": b["rounds"],
            "steps_per_round": b["steps"],
            **result,
            "ratio": run.results["throughput"],  # ours / nn.Transformer, tokens per second over all rounds
        },
    )
    del ours, theirs, batches
    _free(run)


def _bf16_missing(exc: Exception) -> bool:
    """Is this the error of an operation that has no bf16 kernel here (a GRU on a cuDNN older than 9.13)?"""
    return isinstance(exc, RuntimeError) and ("BFloat16" in str(exc) or "bfloat16" in str(exc).lower())


def step_time(run: Run) -> str | None:
    """The time of a training step against sentence length, GRU with attention and Transformer (chapter 8's figure),
    with bf16 autocast, or in float32 where an operation has no bf16 kernel on this machine (said in the file)."""
    try:
        _step_time(run, run.bf16)
    except RuntimeError as exc:
        if not (run.bf16 and _bf16_missing(exc)):
            raise
        print(f"no bf16 here ({exc}); measuring in float32")
        _step_time(run, False)
        return "in float32: an operation has no bf16 kernel here"
    return None


def _step_time(run: Run, bf16: bool) -> None:
    from ..data.translation import VOCAB_SIZE
    from ..measurement.speed import step_time_by_length
    from ..training.kinds import build_model

    b = run.budgets.step_time
    models = {
        label: (name, CONFIGS[name], build_model(CONFIGS[name], VOCAB_SIZE, seed=run.seed).to(run.device))
        for label, name in (("GRU with attention", GRU), ("Transformer", TRANSFORMER))
    }
    rows = step_time_by_length(models, b["lengths"], b["tokens"], VOCAB_SIZE, b["rounds"], bf16, log=print)
    for row in rows:
        print(
            f"{row['model']:20s} L={row['length']:4d} {1000 * row['seconds']:8.1f} ms {row['tokens_per_second']:10,.0f} tok/s"
        )
    run.save(
        "step_time",
        {
            "command": run.command,
            "torch": torch.__version__,
            "device": str(run.device),
            "machine": run.machine(),
            "bf16_autocast": bf16,
            "threads": torch.get_num_threads(),
            "tokens_per_batch": b["tokens"],
            "rounds": b["rounds"],
            "configs": {name: CONFIGS[name] for name, _, _ in models.values()},
            "rows": rows,
        },
    )
    del models
    _free(run)


def plan(run: Run) -> str:
    """Split the time left: a reserve for the end, then one window for each model, the same training minutes each
    (less, in each window, the seconds the budgets keep for compiling before the clock starts: version two's)."""
    left = run.left()
    reserve = max(40.0, run.budgets.reserve * left) if run.device.type == "cuda" else 0.0
    window = (left - reserve) / 2
    if window < 30 and run.device.type == "cuda":
        raise RuntimeError(f"{left:.0f} s left: too little to train two models (give --minutes more)")
    compiling = run.budgets.extras.get("compile_seconds", 0.0)
    minutes = round(run.budgets.train_share * (window - compiling) / 60, 2)
    run.results["window"], run.results["minutes"] = window, minutes
    run.record["plan"] = {"seconds_left": round(left, 1), "reserve": round(reserve, 1), "window": round(window, 1)}
    if compiling:
        run.record["plan"]["compile_allowance"] = compiling
    run.record["plan"]["training_minutes_each"] = minutes if run.device.type == "cuda" else None
    return f"{minutes} minutes of training for each model" if run.device.type == "cuda" else "the dry run's steps"


def train_in_window(
    run: Run, name: str, after_eval=None, fp32=False, out: str | None = None, extra=(), deadline: float | None = None
):
    """Train configuration ``name`` with the course's trainer for the plan's minutes (the dry run: its steps), within
    the model's window (or until ``deadline``), its run written to ``out`` in the output folder (default
    NAME.json); ``extra``: more of the trainer's arguments."""
    from ..training.train import train

    budget = ["--minutes", str(run.results["minutes"])] if run.device.type == "cuda" else []
    budget += ["--fp32"] if fp32 else []
    tatoeba = str(run.pack / run.record["pack"]["manifest"]["tatoeba"]["file"])
    argv = [
        *("--config", name, *budget, *run.budgets.train, "--device", run.device.type, "--seed", str(run.seed)),
        *("--tatoeba", tatoeba, "--no-progress", "--out", str(run.out / (out or f"{name}.json")), *extra),
    ]
    deadline = deadline or min(time.time() + run.results["window"], run.deadline)
    return train(argv, deadline=deadline, launched_by=run.command, after_eval=after_eval)


def train_transformer(run: Run) -> None:
    path = run.out / FILES["weights"]

    def keep_weights(result, model) -> None:  # after every evaluation: a run cut short still brings a model back
        torch.save(compact(model.state_dict(), "int8"), path)

    trained = train_in_window(run, TRANSFORMER, keep_weights)
    run.results["transformer"] = trained
    keep_weights(trained.result, trained.model)


def train_gru(run: Run) -> str | None:
    try:
        run.results["gru"] = train_in_window(run, GRU)
    except RuntimeError as exc:  # at its first step, if at all: then train it in float32, and say so
        if not (run.bf16 and _bf16_missing(exc)):
            raise
        print(f"no bf16 here for the GRU ({exc}); training it in float32")
        run.results["gru"] = train_in_window(run, GRU, fp32=True)
        return "in float32: the GRU has no bf16 kernel here"
    return None


def beam_on_test(run: Run, model, data) -> dict:
    """The test set decoded with beam search (the budgets' size and length penalty): its BLEU and the search."""
    from ..evaluation.metrics import corpus_bleu
    from ..evaluation.translate import beam_translations

    size, alpha = run.budgets.beam
    start = time.time()
    texts = beam_translations(model, data, data.test_ids, size, alpha)
    beam = {"size": size, "alpha": alpha, "seconds": round(time.time() - start, 2)}
    return {"test_score_beam": corpus_bleu(texts, data.test_references), "beam": beam}


def finish_transformer(run: Run) -> str:
    """The stored weights' form, chosen on validation, their test score, and beam search on the test set."""
    from ..evaluation.translate import evaluate_bleu

    trained = run.results["transformer"]
    model, data, result = trained.model, trained.data, dict(trained.result)
    full = result["score"]  # the final validation BLEU of the weights as trained
    int8 = evaluate_bleu(rounded_copy(model, "int8"), data, "valid")
    form = "int8" if full - int8 <= run.budgets.keep_int8_within else "float16"
    stored = rounded_copy(model, form)
    path = run.out / FILES["weights"]
    result["weights_sha256"] = save_compact(model.state_dict(), form, path)
    result["stored_weights"] = {
        "form": form,
        "bytes": path.stat().st_size,
        "rule": f"int8 unless it costs more than {run.budgets.keep_int8_within} validation BLEU, else float16",
        "valid_score_int8": int8,
        "valid_score": int8 if form == "int8" else evaluate_bleu(stored, data, "valid"),
        "test_score": evaluate_bleu(stored, data, "test"),  # greedy, as the CPU will decode the stored weights
    }
    run.save("transformer", result)
    result.update(beam_on_test(run, model, data))
    run.save("transformer", result)
    run.results["transformer_result"] = result
    return f"weights {form}, {result['stored_weights']['bytes'] / 2**20:.1f} MiB"


PHASES: list[tuple[str, Callable[[Run], str | None]]] = [
    ("machine", describe_machine),
    ("data", lambda run: run.open_data()),
    ("throughput", throughput),
    ("step time by length", step_time),
    ("plan", plan),
    ("train the Transformer", train_transformer),
    ("train the GRU with attention", train_gru),
    ("the Transformer's weights and beam search", finish_transformer),
]


def summary(run: Run) -> str:
    """The figures of the run in a few lines (the end of the output is what a caller sees first)."""
    m = run.record.get("machine", {})
    lines = [f"\n== summary: {m.get('gpu') or m.get('device')}, torch {m.get('torch')}, CUDA {m.get('cuda')}"]
    lines += [f"   {p['phase']}: {p['status']} ({p['seconds']:.0f} s)" for p in run.record["phases"]]
    if "throughput" in run.results:
        lines.append(f"throughput, ours / nn.Transformer (bf16 {run.bf16}): {run.results['throughput']:.3f}")
    rates = {}
    for key, label in (("transformer", "Transformer"), ("gru", "GRU + attention")):
        if key in run.results:
            r = run.results.get(f"{key}_result", run.results[key].result)
            rates[key] = r["tokens"] / max(r["train_seconds"], 1e-9)
            beam = f", beam {r['beam']['size']} {r['test_score_beam']:.2f}" if "test_score_beam" in r else ""
            lines.append(
                f"{label}: {r['steps']} steps in {r['train_seconds']:.0f} s, {rates[key]:,.0f} target tokens/s; "
                f"validation BLEU {r['score']:.2f}, test {r['test_score']:.2f}{beam}"
            )
    if len(rates) == 2:
        lines.append(f"tokens per second, Transformer / GRU: {rates['transformer'] / rates['gru']:.2f}")
    lines.append(f"files in {run.out}: {', '.join(sorted(p.name for p in run.out.iterdir()))}")
    return "\n".join(lines)
