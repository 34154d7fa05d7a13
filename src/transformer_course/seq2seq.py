"""The RNN encoder-decoder (chapter 3): an encoder that reads the whole input into one final state,
a decoder that writes the output one token at a time from it, teacher forcing and greedy decoding.

Also the small training loop and on-disk model cache that chapters 3 and 4 share.

Shapes: B batch, T_x source length, T_y target length, H hidden size, V target vocabulary size.
Masks are boolean, True at real tokens. Token ids <pad> = 0, <bos> = 1, <eos> = 2 (see data/).
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "DecoderStep",
    "Encoder",
    "Seq2Seq",
    "cache_dir",
    "cached_training",
    "count_parameters",
    "copy_experiment",
    "date_experiment",
    "greedy_decode",
    "last_state",
    "sequence_loss",
    "teacher_forcing",
    "train",
    "translate",
]


def last_state(states: Tensor, mask: Tensor) -> Tensor:
    """The state at each sequence's last real token. states (B, T, H), mask (B, T) -> (B, H)."""
    lengths = mask.long().sum(dim=1)  # (B,)
    if bool((lengths == 0).any()):
        raise ValueError("every sequence needs at least one real token")
    return states[torch.arange(states.shape[0], device=states.device), lengths - 1]


class Encoder(nn.Module):
    """Embedding and a one-layer GRU that reads the source left to right.

    src (B, T_x) token ids, src_mask (B, T_x) bool -> states (B, T_x, H), final (B, H)
    ``final`` is the state after the last *real* token of each sequence, not after its padding.
    """

    def __init__(self, vocab_size: int, d_emb: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.rnn = nn.GRU(d_emb, d_hidden, batch_first=True)

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        states, _ = self.rnn(self.embedding(src))  # (B, T_x, H); padding comes last, so real states ignore it
        return states, last_state(states, src_mask)


class DecoderStep(nn.Module):
    """One step of the decoder: the previous token and state in, scores for the next token and the new state out.

    y_prev (B,) ids, h (B, H) -> logits (B, V), h_new (B, H)
    """

    def __init__(self, vocab_size: int, d_emb: int, d_hidden: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.cell = nn.GRUCell(d_emb, d_hidden)
        self.out = nn.Linear(d_hidden, vocab_size)

    def forward(self, y_prev: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        h_new = self.cell(self.embedding(y_prev), h)  # (B, H)
        return self.out(h_new), h_new


def shift_right(targets: Tensor, bos_id: int) -> Tensor:
    """Decoder inputs for teacher forcing: <bos> followed by the targets without their last token."""
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([bos, targets[:, :-1]], dim=1)


def teacher_forcing(step: Callable, h0: Tensor, targets: Tensor, bos_id: int) -> Tensor:
    """Run the decoder over the whole target with teacher forcing.

    At step t the decoder gets the *true* previous token (<bos> at t = 0, else targets[:, t-1]) and
    predicts targets[:, t]. step(y_prev (B,), h (B, H)) -> (logits (B, V), h); targets (B, T_y).
    Returns logits (B, T_y, V).
    """
    inputs = shift_right(targets, bos_id)  # (B, T_y)
    h, logits = h0, []
    for t in range(targets.shape[1]):
        step_logits, h = step(inputs[:, t], h)
        logits.append(step_logits)
    return torch.stack(logits, dim=1)


def greedy_decode(step: Callable, h0: Tensor, bos_id: int, max_len: int) -> Tensor:
    """Decode greedily: feed the decoder its own most likely token at every step, starting from <bos>.

    Returns the logits of every step (B, max_len, V); the tokens it chose and fed back are
    ``logits.argmax(-1)``. Every sequence runs for max_len steps; what follows its first <eos> is
    ignored by the decoders of data/.
    """
    y = torch.full((h0.shape[0],), bos_id, dtype=torch.long, device=h0.device)
    h, logits = h0, []
    for _ in range(max_len):
        step_logits, h = step(y, h)
        y = step_logits.argmax(dim=-1)  # (B,): the most likely next token goes back in
        logits.append(step_logits)
    return torch.stack(logits, dim=1)


def run_cell_over_sequence(cell: nn.GRUCell, inputs: Tensor, h0: Tensor) -> Tensor:
    """The states (B, T, H) of a GRUCell run step by step over inputs (B, T, E) from h0 (B, H), in one fused call.

    nn.GRU computes the same recurrence as a loop of nn.GRUCell, in one optimised kernel; we lend it the
    cell's weights for the call (torch.func.functional_call), so the model keeps a single set of them.
    """
    template = nn.GRU(cell.input_size, cell.hidden_size, batch_first=True, device="meta")
    weights = {"weight_ih_l0": cell.weight_ih, "weight_hh_l0": cell.weight_hh, "bias_ih_l0": cell.bias_ih,
               "bias_hh_l0": cell.bias_hh}
    states, _ = torch.func.functional_call(template, weights, (inputs, h0[None]))
    return states


class Seq2Seq(nn.Module):
    """The encoder-decoder without attention: the decoder sees the source only through the encoder's final state."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_emb: int = 32, d_hidden: int = 128, bos_id: int = 1,
                 eos_id: int = 2) -> None:
        super().__init__()
        self.encoder = Encoder(src_vocab, d_emb, d_hidden)
        self.decoder = DecoderStep(tgt_vocab, d_emb, d_hidden)
        self.bos_id, self.eos_id = bos_id, eos_id

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits (B, T_y, V) for the targets tgt (B, T_y)."""
        _, final = self.encoder(src, src_mask)
        # The same as teacher_forcing(self.decoder, final, tgt, self.bos_id), faster: the GRU runs over the
        # whole shifted target in one call, and the output layer once over every step.
        inputs = self.decoder.embedding(shift_right(tgt, self.bos_id))  # (B, T_y, E)
        states = run_cell_over_sequence(self.decoder.cell, inputs, final)  # (B, T_y, H)
        return self.decoder.out(states)

    @torch.no_grad()
    def generate(self, src: Tensor, src_mask: Tensor, max_len: int) -> tuple[Tensor, None]:
        """Greedy tokens (B, L), L <= max_len: decoding stops once every sequence has written <eos>.

        A sequence that has written <eos> leaves the batch: the decoder steps only the rows still writing
        (in a batch of test sentences about half of the row-steps came after a row's <eos>). Its remaining
        positions hold <eos>.
        """
        _, h = self.encoder(src, src_mask)  # (B, H)
        tokens = torch.full((src.shape[0], max_len), self.eos_id, dtype=torch.long, device=src.device)
        live = torch.arange(src.shape[0], device=src.device)  # (n,): the batch rows still writing
        y = torch.full((src.shape[0],), self.bos_id, dtype=torch.long, device=src.device)
        steps = 0
        while steps < max_len and live.numel() > 0:
            logits, h = self.decoder(y, h)  # (n, V), (n, H)
            y = logits.argmax(dim=-1)
            tokens[live, steps] = y
            steps += 1
            going = y != self.eos_id
            if not bool(going.all()):
                live, y, h = live[going], y[going], h[going]
        return tokens[:, :steps], None


# Training -------------------------------------------------------------------------------------


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def sequence_loss(logits: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
    """Mean cross-entropy over the real target tokens. logits (B, T, V), tgt and tgt_mask (B, T)."""
    loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="none")
    mask = tgt_mask.flatten().to(loss.dtype)
    return (loss * mask).sum() / mask.sum()


def train(
    model: nn.Module,
    batches: Sequence,
    steps: int,
    lr: float = 3e-3,
    clip: float = 1.0,
    seed: int = 0,
    evaluate: Callable[[nn.Module], float] | None = None,
    eval_every: int = 0,
    stop_at: float | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Adam with gradient clipping for ``steps`` updates, cycling through ``batches`` (reshuffled each epoch).

    With ``evaluate`` and ``eval_every``, the model is scored every ``eval_every`` steps (and at the end);
    with ``stop_at``, training stops as soon as the score reaches it. Returns the history:
    {'step', 'loss', 'eval': [(step, seconds, score)], 'seconds'}.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history: dict = {"loss": [], "eval": [], "step": 0}
    start = time.perf_counter()
    order: list[int] = []
    model.train()
    for step in range(1, steps + 1):
        if not order:
            order = torch.randperm(len(batches), generator=generator).tolist()
        batch = batches[order.pop()]
        logits = model(batch.src, batch.src_mask, batch.tgt)
        logits = logits[0] if isinstance(logits, tuple) else logits
        loss = sequence_loss(logits, batch.tgt, batch.tgt_mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        history["loss"].append(loss.item())
        history["step"] = step
        if evaluate is not None and eval_every and (step % eval_every == 0 or step == steps):
            model.eval()
            score = evaluate(model)
            model.train()
            history["eval"].append((step, time.perf_counter() - start, score))
            if log:
                log(f"step {step:5d}  loss {loss.item():.3f}  score {score:.4f}  {time.perf_counter() - start:5.1f} s")
            if stop_at is not None and score >= stop_at:
                break
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


@torch.no_grad()
def translate(model: nn.Module, src_seqs: Sequence[Sequence[int]], tgt_vocab, max_len: int | Callable[[int], int],
              batch_size: int = 500, pad_id: int = 0, return_weights: bool = False):
    """Greedy outputs of ``model`` for token-id sequences, decoded to text (and the attention weights if asked).

    The sequences go in batches of similar length, on the model's device. ``max_len`` is the most tokens to
    write, or a function of a batch's longest source length that gives it.
    """
    from .data.batching import length_batches, pad_sequences

    model.eval()
    device = next(model.parameters()).device
    texts: list[str] = [""] * len(src_seqs)
    weights: list = [None] * len(src_seqs)
    for group in length_batches([len(s) for s in src_seqs], batch_size, shuffle=False):
        src, mask = pad_sequences([src_seqs[i] for i in group], pad_id)
        limit = max_len(src.shape[1]) if callable(max_len) else max_len
        tokens, attn = model.generate(src.to(device), mask.to(device), limit)
        for row, i in enumerate(group):
            texts[i] = tgt_vocab.decode(tokens[row].tolist())
            if attn is not None:
                weights[i] = attn[row, :, : len(src_seqs[i])]
    return (texts, weights) if return_weights else texts


# The model cache ---------------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$TRANSFORMER_COURSE_CACHE``, else ``~/.cache/transformer_course``."""
    return Path(os.environ.get("TRANSFORMER_COURSE_CACHE", Path.home() / ".cache" / "transformer_course"))


def _code_fingerprint(extra: tuple = ()) -> str:
    """A digest of the source of the code that makes and trains the models (plus ``extra`` modules)."""
    from . import bahdanau, seq2seq, training, translation
    from .data import batching, dates, tatoeba, tokenize

    h = hashlib.sha256()
    for module in (seq2seq, bahdanau, training, translation, batching, dates, tatoeba, tokenize, *extra):
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def cached_training(name: str, config: dict, data_fingerprint: str, build: Callable[[], nn.Module],
                    fit: Callable[[nn.Module], dict], code: tuple = ()) -> tuple[nn.Module, dict, bool]:
    """Train ``build()`` with ``fit``, or load it from the cache when the same config, data and code trained it before.

    Returns (model, history, loaded) where ``loaded`` says whether the cache answered.
    """
    key_text = json.dumps({"config": config, "data": data_fingerprint, "code": _code_fingerprint(code),
                           "torch": torch.__version__}, sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{key}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    # One process trains, the others wait for it: two notebooks that need the same model (nbval runs
    # them in parallel) must not both spend minutes training it.
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _load_or_train(path, config, build, fit)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load_or_train(path: Path, config: dict, build: Callable[[], nn.Module],
                   fit: Callable[[nn.Module], dict]) -> tuple[nn.Module, dict, bool]:
    model = build()
    if path.is_file():
        try:
            saved = torch.load(path, map_location="cpu", weights_only=False)
            model.load_state_dict(saved["state"])
            model.eval()
            return model, saved["history"], True
        except Exception:  # a damaged cache entry: train again and overwrite it
            pass
    history = fit(model)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"state": model.state_dict(), "history": history, "config": config}, tmp)
    tmp.replace(path)
    model.eval()
    return model, history, False


# The experiments of chapters 3 and 4 ---------------------------------------------------------------
# Shared so that chapter 4 loads chapter 3's model from the cache (same configuration, same key).

DATE_EXPERIMENT = {"n_train": 20_000, "n_test": 1_000, "seed": 0, "batch_size": 128, "d_emb": 32, "d_hidden": 128,
                   "d_att": 64, "lr": 3e-3, "steps": 1_200, "eval_every": 50, "stop_at": 0.995}
COPY_EXPERIMENT = {"n_train": 20_000, "n_test": 1_000, "min_len": 4, "max_len": 24, "seed": 1, "batch_size": 128,
                   "d_emb": 16, "d_hidden": 128, "d_att": 64, "lr": 3e-3, "steps": 400}


def _build(attention: bool, src_vocab: int, tgt_vocab: int, cfg: dict) -> nn.Module:
    torch.manual_seed(cfg["seed"])
    if attention:
        from .bahdanau import AttentionSeq2Seq

        return AttentionSeq2Seq(src_vocab, tgt_vocab, cfg["d_emb"], cfg["d_hidden"], cfg["d_att"])
    return Seq2Seq(src_vocab, tgt_vocab, cfg["d_emb"], cfg["d_hidden"])


def date_experiment(attention: bool, log: Callable | None = None, **overrides) -> dict:
    """Train (or load) a date normaliser; returns model, history, loaded, accuracy and the data."""
    from .data import date_splits, make_batches
    from .data.dates import date_vocabs
    from .metrics import exact_match

    cfg = {**DATE_EXPERIMENT, **overrides, "attention": attention}
    train_pairs, test_pairs = date_splits(cfg["n_train"], cfg["n_test"], seed=cfg["seed"])
    src_vocab, tgt_vocab = date_vocabs()
    batches = make_batches([src_vocab.encode(a) for a, _ in train_pairs], [tgt_vocab.encode(b) for _, b in train_pairs],
                           cfg["batch_size"], src_vocab.pad_id, tgt_vocab.eos_id, seed=cfg["seed"])
    test_src = [src_vocab.encode(a) for a, _ in test_pairs]
    targets = [b for _, b in test_pairs]

    def accuracy(model: nn.Module) -> float:
        return exact_match(translate(model, test_src, tgt_vocab, max_len=11), targets)

    def fit(model: nn.Module) -> dict:
        return train(model, batches, cfg["steps"], lr=cfg["lr"], seed=cfg["seed"], evaluate=accuracy,
                     eval_every=cfg["eval_every"], stop_at=cfg["stop_at"], log=log)

    name = "dates-attention" if attention else "dates-seq2seq"
    model, history, loaded = cached_training(name, cfg, f"date_splits{cfg['n_train'], cfg['n_test']}",
                                             lambda: _build(attention, len(src_vocab), len(tgt_vocab), cfg), fit)
    return {"model": model, "history": history, "loaded": loaded, "accuracy": accuracy(model), "config": cfg,
            "test_pairs": test_pairs, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab}


def copy_experiment(attention: bool, **overrides) -> dict:
    """Train (or load) a model that repeats strings of 4 to 24 digits; accuracy by input length."""
    from .data import make_batches
    from .data.digits import digit_vocab, make_digit_pairs
    from .metrics import char_accuracy, exact_match

    cfg = {**COPY_EXPERIMENT, **overrides, "attention": attention}
    vocab = digit_vocab()
    train_pairs = make_digit_pairs(cfg["n_train"], cfg["min_len"], cfg["max_len"], seed=cfg["seed"])
    test_pairs = make_digit_pairs(cfg["n_test"], cfg["min_len"], cfg["max_len"], seed=cfg["seed"] + 1000)
    batches = make_batches([vocab.encode(a) for a, _ in train_pairs], [vocab.encode(b) for _, b in train_pairs],
                           cfg["batch_size"], vocab.pad_id, vocab.eos_id, seed=cfg["seed"])

    def fit(model: nn.Module) -> dict:
        return train(model, batches, cfg["steps"], lr=cfg["lr"], seed=cfg["seed"])

    name = "copy-attention" if attention else "copy-seq2seq"
    model, history, loaded = cached_training(name, cfg, "make_digit_pairs",
                                             lambda: _build(attention, len(vocab), len(vocab), cfg), fit)
    outputs = translate(model, [vocab.encode(a) for a, _ in test_pairs], vocab, max_len=cfg["max_len"] + 1)
    by_length = {}
    for n in range(cfg["min_len"], cfg["max_len"] + 1):
        idx = [i for i, (a, _) in enumerate(test_pairs) if len(a) == n]
        if idx:
            preds, targets = [outputs[i] for i in idx], [test_pairs[i][1] for i in idx]
            by_length[n] = (len(idx), char_accuracy(preds, targets), exact_match(preds, targets))
    return {"model": model, "history": history, "loaded": loaded, "by_length": by_length, "config": cfg,
            "test_pairs": test_pairs, "outputs": outputs, "vocab": vocab}
