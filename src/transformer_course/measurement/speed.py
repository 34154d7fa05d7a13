"""Measuring training speed (chapter 8): the course's Transformer against ``torch.nn.Transformer``, and the time of
a training step against sentence length for the GRU with attention and the Transformer, on any device.

Both measurements alternate the models they compare, round after round, so that a change in the machine's load
hits each alike, and time only steps after a warm-up. On a GPU every timed region starts and ends with a
synchronisation (the device works asynchronously: without it the clock would stop before the work does), and the
forward pass runs under bf16 autocast when asked. ``tests/benchmarks/transformer_throughput.py`` and
``tests/benchmarks/step_time_by_length.py`` call these on the CPU; ``transformer_course.gpu`` on a GPU.

Shapes: B sentences, T tokens, V vocabulary.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..data.batching import Batch, make_batch
from ..training.loop import label_smoothed_loss

__all__ = [
    "length_batch",
    "random_batches",
    "sequential_steps",
    "step_seconds",
    "step_time_by_length",
    "throughput",
]

PAD, EOS = 0, 2
FIRST_WORD = 4  # ids below are <pad>, <bos>, <eos>, <unk>


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_batches(n: int, batch: int, vocab: int, low: int, high: int, seed: int) -> list[Batch]:
    """n batches of ``batch`` random sentence pairs, source and target lengths drawn independently from [low, high]."""
    g = torch.Generator().manual_seed(seed)

    def sentence() -> list[int]:
        length = int(torch.randint(low, high + 1, (1,), generator=g))
        return torch.randint(FIRST_WORD, vocab, (length,), generator=g).tolist()

    return [
        make_batch([sentence() for _ in range(batch)], [sentence() for _ in range(batch)], PAD, EOS) for _ in range(n)
    ]


def length_batch(tokens: int, length: int, vocab: int, seed: int) -> Batch:
    """tokens // length random sentence pairs of exactly ``length`` tokens on both sides (the target's <eos> included)."""
    g = torch.Generator().manual_seed(seed)
    n = max(1, tokens // length)
    ids = torch.randint(FIRST_WORD, vocab, (2, n, length), generator=g).tolist()
    return make_batch(ids[0], [t[:-1] for t in ids[1]], PAD, EOS)


def sequential_steps(config: dict, length: int) -> int:
    """How many steps of the forward pass must run one after another for sentences of ``length`` tokens."""
    if config["model"] == "transformer":
        return config["n_encoder_layers"] + config["n_decoder_layers"]  # every position of a layer at once
    return 2 * length  # the encoder's GRU, then the decoder, one position at a time


def _train_steps(model: nn.Module, optimizer, batches: Sequence[Batch], counts: list[int], steps: int, device, bf16):
    """(wall-clock seconds, CPU seconds of this process, real target tokens) of ``steps`` steps (forward,
    label-smoothed loss, backward, Adam); ``counts``: each batch's real target tokens."""
    tokens = 0
    _sync(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    for i in range(steps):
        b = batches[i % len(batches)]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(b.src, b.src_mask, b.tgt)
        logits = logits[0] if isinstance(logits, tuple) else logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), b.tgt.flatten(), ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += counts[i % len(batches)]
    _sync(device)
    if device.type != "cuda":
        loss.item()
    return time.perf_counter() - start, time.process_time() - cpu_start, tokens


def throughput(
    models: dict[str, nn.Module],
    batches: Sequence[Batch],
    rounds: int = 3,
    steps: int = 6,
    warmup: int = 3,
    bf16: bool = False,
    log=None,
) -> dict:
    """Training throughput of each model, in real target tokens per second, alternating the models round by round.

    Every model gets the same batches (already on its device) and its own Adam. Returns {"rounds": [{name: tokens
    per second}], "tokens_per_second": {name: total tokens / total seconds}, "seconds": {name: total},
    "tokens_per_cpu_second": {name: total tokens / CPU seconds of this process}}: on a busy CPU machine the CPU
    time of the process is distorted less than the wall clock.
    """
    device = next(next(iter(models.values())).parameters()).device
    counts = [int(b.tgt_mask.sum()) for b in batches]  # counted once, off the clock (on a GPU it synchronises)
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    for name, model in models.items():
        model.train()
        _train_steps(model, optimizers[name], batches, counts, warmup, device, bf16)
    totals = {name: [0.0, 0.0, 0] for name in models}  # wall-clock seconds, CPU seconds, tokens
    per_round = []
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]  # alternate who goes first
        rates = {}
        for name in order:
            seconds, cpu, tokens = _train_steps(models[name], optimizers[name], batches, counts, steps, device, bf16)
            totals[name] = [totals[name][0] + seconds, totals[name][1] + cpu, totals[name][2] + tokens]
            rates[name] = tokens / seconds
        per_round.append({name: rates[name] for name in models})
        if log:
            log("round " + str(r + 1) + ": " + "   ".join(f"{n} {v:,.0f} tokens/s" for n, v in per_round[-1].items()))
    return {
        "rounds": per_round,
        "tokens_per_second": {name: tokens / seconds for name, (seconds, _, tokens) in totals.items()},
        "seconds": {name: seconds for name, (seconds, _, _) in totals.items()},
        "tokens_per_cpu_second": {name: tokens / cpu for name, (_, cpu, tokens) in totals.items()},
    }


def step_seconds(model: nn.Module, b: Batch, bf16: bool = False) -> float:
    """Seconds of one training step without the optimiser's update: forward, label-smoothed loss, backward."""
    device = b.src.device
    _sync(device)
    start = time.perf_counter()
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
        out = model(b.src, b.src_mask, b.tgt)
    logits = out[0] if isinstance(out, tuple) else out
    label_smoothed_loss(logits, b.tgt, b.tgt_mask).backward()
    model.zero_grad(set_to_none=True)
    _sync(device)
    return time.perf_counter() - start


def step_time_by_length(
    models: dict[str, tuple[str, dict, nn.Module]],
    lengths: Sequence[int],
    tokens: int,
    vocab: int,
    rounds: int = 5,
    bf16: bool = False,
    log=None,
) -> list[dict]:
    """The median time of a training step at each sentence length, every batch holding ``tokens`` tokens a side.

    ``models``: label -> (configuration name, configuration, model on its device). The models alternate length by
    length, ``rounds`` times; each row holds the median, its spread (lowest, highest) and the tokens per second.
    """
    device = next(next(iter(models.values()))[2].parameters()).device
    batches = {length: length_batch(tokens, length, vocab, seed=length).to(device) for length in lengths}
    for _, _, model in models.values():  # warm up: first calls allocate (and, on a GPU, load kernels)
        model.train()
        for length in lengths[:2]:
            step_seconds(model, batches[length], bf16)
    times: dict[str, dict[int, list[float]]] = {name: {length: [] for length in lengths} for name in models}
    for r in range(rounds):
        for length in lengths:
            order = list(models) if (r + length) % 2 else list(models)[::-1]  # alternate who goes first
            for name in order:
                times[name][length].append(step_seconds(models[name][2], batches[length], bf16))
        if log:
            log(f"round {r + 1} of {rounds} done")
    rows = []
    for name, (config_name, config, _) in models.items():
        for length in lengths:
            seconds = statistics.median(times[name][length])
            sentences = batches[length].src.shape[0]
            rows.append(
                {
                    "model": name,
                    "config": config_name,
                    "length": length,
                    "sentences": sentences,
                    "seconds": seconds,
                    "tokens_per_second": sentences * length / seconds,
                    "sequential_steps": sequential_steps(config, length),
                    "spread": [min(times[name][length]), max(times[name][length])],
                }
            )
    return rows
