"""Benchmark (not a test): the cost of a training step of chapter 10's models, on one thread, the models
alternated so that all see the same machine.

    .venv/bin/python tests/benchmarks/lm_step_cost.py [--rounds 2] [--steps 60] \
        [--out src/transformer_course/runs/step-cost-tlm-vs-encdec-cpu.json]
    .venv/bin/python tests/benchmarks/lm_step_cost.py --pair lm --rounds 3 --steps 30 \
        [--out src/transformer_course/runs/step-cost-lm-cpu.json]

``--pair tlm`` (the default): ``lm_train --config tlm-transformer-cpu`` against ``train --config transformer-cpu``,
the decoder-only translator against chapter 8's encoder-decoder, each run for ``--steps`` steps (no test set, no
evaluation curve); the training seconds each trainer reports (wall clock, data loading and evaluation excluded).
``--pair lm``: the language models of ``lm_train.LM_CONFIGS``, the GRU (``lm-rnn-cpu``, the unit of the ratios)
against the two Transformers, in this process, on the same batches of the training set, in CPU seconds
(``time.process_time``) after two warm-up steps: CPU time is what a step costs, and other work on the machine
hardly changes it. Runs compared at equal steps; this says what equal steps cost in time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path


def _seconds_per_step(argv: list[str], out: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", *argv, "--out", str(out)], check=True, env=env, capture_output=True)
    run = json.loads(out.read_text())
    return run["train_seconds"] / run["steps"]


def _cpu_seconds_per_step(config: str, steps: int) -> float:
    """CPU seconds per training step of an lm_train configuration, on one thread, after two warm-up steps."""
    import time

    import torch

    from transformer_course.data.lm_data import language_model_data, lm_batches
    from transformer_course.models.language_model import next_token_loss
    from transformer_course.training.lm_train import LM_CONFIGS, build_lm

    torch.set_num_threads(1)
    torch.manual_seed(0)
    settings = LM_CONFIGS[config]
    data = language_model_data(settings["vocab"])
    pad = data.tokenizer.pad_id
    batches = lm_batches(data.train, settings["max_tokens"], pad, seed=0)[: steps + 2]
    model = build_lm(settings, len(data.tokenizer))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    spent = 0.0
    for i, batch in enumerate(batches):
        start = time.process_time()
        loss = next_token_loss(model, batch.ids, batch.ids != pad, batch.loss_mask)  # as lm_train's step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        spent += (time.process_time() - start) if i >= 2 else 0.0
    return spent / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--out", type=Path)
    p.add_argument("--pair", choices=("tlm", "lm"), default="tlm")
    args = p.parse_args()
    common = ["--steps", str(args.steps), "--threads", "1", "--no-test"]
    lm = ["transformer_course.training.lm_train", *common, "--eval-every-steps", str(10 * args.steps), "--config"]
    trainers = {
        "decoder_only": [*lm, "tlm-transformer-cpu"],
        "encoder_decoder": ["transformer_course.training.train", "--config", "transformer-cpu", *common,
                            "--eval-every-steps", "0", "--no-progress"],
    } if args.pair == "tlm" else {
        name: [*lm, name] for name in ("lm-rnn-cpu", "lm-transformer-cpu", "lm-transformer-2layer-cpu")
    }  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in trainers}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, argv in trainers.items():
                if args.pair == "lm":
                    seconds[name].append(_cpu_seconds_per_step(name, args.steps))
                else:
                    seconds[name].append(_seconds_per_step(argv, Path(tmp) / f"{name}-{r}.json"))
                print(f"round {r + 1}: {name} {seconds[name][-1]:.3f} s per step", flush=True)
    first, *others = seconds
    ratios: dict[str, list[float]] | list[float] = {
        name: [a / b for a, b in zip(seconds[name], seconds[first])] for name in others
    }
    if args.pair == "tlm":  # the stored file's form: the one ratio, decoder-only over encoder-decoder
        ratios = [1 / x for x in ratios["encoder_decoder"]]
    print("ratios:", ratios)
    result = {
        "command": "python tests/benchmarks/lm_step_cost.py " + " ".join(sys.argv[1:]),
        "device_name": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "steps": args.steps,
        "seconds_per_step": seconds,
        "ratios": ratios,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
