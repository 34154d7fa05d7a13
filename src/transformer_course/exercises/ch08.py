"""Chapter 8 exercises: the encoder layer, the decoder layer, the model's forward pass (shifted targets and the
decoder's masks), the label-smoothed loss and the warm-up schedule of "Attention is all you need", and an
experiment: the whole model trained on a toy task, judged by what it writes."""

from __future__ import annotations

import functools
import math

import torch

from ..grading.registry import Case, Exercise, Mistake, describe, randn, register
from ..models import transformer as ref
from ..training.loop import label_smoothed_loss, noam_lr

NOTEBOOK = "08_transformer.ipynb"
PAD, BOS, EOS = 0, 1, 2

# The exercises build these; using PyTorch's own would skip the point of the exercise.
BUILTIN_TRANSFORMER = (
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "MultiheadAttention",
    "multi_head_attention_forward",
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention",
)
BUILTIN_LOSS = ("cross_entropy", "CrossEntropyLoss")


# Weights of the cases: random, with every bias and LayerNorm parameter away from its initial value, so that
# a parameter used in the wrong place cannot go unnoticed.


def _linear(g: torch.Generator, name: str, d_out: int, d_in: int) -> dict:
    return {
        f"{name}.weight": randn(g, d_out, d_in, scale=1 / math.sqrt(d_in)),
        f"{name}.bias": randn(g, d_out, scale=0.2),
    }


def _norm(g: torch.Generator, name: str, d: int) -> dict:
    return {f"{name}.weight": 1 + randn(g, d, scale=0.3), f"{name}.bias": randn(g, d, scale=0.3)}


def _attention(g: torch.Generator, name: str, d: int) -> dict:
    return {**_linear(g, f"{name}.w_qkv", 3 * d, d), **_linear(g, f"{name}.w_o", d, d)}


def _encoder_layer_state(g: torch.Generator, d: int, d_ff: int, prefix: str = "") -> dict:
    return {
        **_attention(g, f"{prefix}self_attn", d),
        **_norm(g, f"{prefix}self_attn_norm", d),
        **_linear(g, f"{prefix}ff.linear1", d_ff, d),
        **_linear(g, f"{prefix}ff.linear2", d, d_ff),
        **_norm(g, f"{prefix}ff_norm", d),
    }


def _decoder_layer_state(g: torch.Generator, d: int, d_ff: int, prefix: str = "") -> dict:
    return {
        **_attention(g, f"{prefix}self_attn", d),
        **_norm(g, f"{prefix}self_attn_norm", d),
        **_attention(g, f"{prefix}cross_attn", d),
        **_norm(g, f"{prefix}cross_attn_norm", d),
        **_linear(g, f"{prefix}ff.linear1", d_ff, d),
        **_linear(g, f"{prefix}ff.linear2", d, d_ff),
        **_norm(g, f"{prefix}ff_norm", d),
    }


def _keys(lengths: list[int], t: int) -> torch.Tensor:
    """(B, 1, 1, t) key padding mask: True at the first lengths[b] positions."""
    return (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def _causal(t: int) -> torch.Tensor:
    return torch.ones(t, t, dtype=torch.bool).tril()


# 8.1 the encoder layer -------------------------------------------------------------------------------------


def _encoder_cases(g: torch.Generator) -> list[Case]:
    small = {"d_model": 8, "n_heads": 2, "d_ff": 16}
    return [
        Case(
            "B = 2, T = 5, d_model = 8, 2 heads, d_ff = 16, no mask",
            (randn(g, 2, 5, 8),),
            init=small,
            state=_encoder_layer_state(g, 8, 16),
        ),
        Case(
            "B = 3, T = 6, padding mask (B, 1, 1, T) for lengths 6, 3 and 1",
            (randn(g, 3, 6, 8),),
            {"mask": _keys([6, 3, 1], 6)},
            init=small,
            state=_encoder_layer_state(g, 8, 16),
        ),
        Case(
            "d_model = 12, 3 heads, d_ff = 20, B = 2, T = 4, lengths 4 and 2",
            (randn(g, 2, 4, 12),),
            {"mask": _keys([4, 2], 4)},
            init={"d_model": 12, "n_heads": 3, "d_ff": 20},
            state=_encoder_layer_state(g, 12, 20),
        ),
        Case(
            "a causal mask (T, T), B = 1, T = 5",
            (randn(g, 1, 5, 8),),
            {"mask": _causal(5)},
            init=small,
            state=_encoder_layer_state(g, 8, 16),
        ),
    ]


class _EncoderNormOnSublayer(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        x = x + self.self_attn_norm(self.self_attn(x, mask=mask)[0])
        return x + self.ff_norm(self.ff(x))


class _EncoderNormBeforeSum(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        x = self.self_attn_norm(x) + self.self_attn(x, mask=mask)[0]
        return self.ff_norm(x) + self.ff(x)


class _EncoderPreNorm(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        x = x + self.self_attn(self.self_attn_norm(x), mask=mask)[0]
        return x + self.ff(self.ff_norm(x))


class _EncoderNoResidual(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        x = self.self_attn_norm(self.self_attn(x, mask=mask)[0])
        return self.ff_norm(self.ff(x))


class _EncoderMaskIgnored(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        return super().forward(x)


class _EncoderOneNorm(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        x = self.self_attn_norm(x + self.self_attn(x, mask=mask)[0])
        return self.self_attn_norm(x + self.ff(x))


class _EncoderNoFeedForward(ref.EncoderLayer):
    def forward(self, x, mask=None, packing=None):
        return self.self_attn_norm(x + self.self_attn(x, mask=mask)[0])


# 8.2 the decoder layer -------------------------------------------------------------------------------------


def _decoder_cases(g: torch.Generator) -> list[Case]:
    small = {"d_model": 8, "n_heads": 2, "d_ff": 16}
    target_padding = _causal(5) & _keys([5, 2, 4], 5)  # (B, 1, T_y, T_y)
    return [
        # T_y = T_x first: a layer that mixes up queries and memory still runs on it, and gets its hint
        Case(
            "B = 2, T_y = T_x = 4, causal self-mask, source lengths 4 and 2",
            (randn(g, 2, 4, 8), randn(g, 2, 4, 8)),
            {"self_mask": _causal(4), "memory_mask": _keys([4, 2], 4)},
            init=small,
            state=_decoder_layer_state(g, 8, 16),
        ),
        Case(
            "B = 3, T_y = 5, T_x = 3, self-mask causal and target padding (B, 1, T_y, T_y), source lengths 3, 1, 2",
            (randn(g, 3, 5, 8), randn(g, 3, 3, 8)),
            {"self_mask": target_padding, "memory_mask": _keys([3, 1, 2], 3)},
            init=small,
            state=_decoder_layer_state(g, 8, 16),
        ),
        Case(
            "B = 1, T_y = 2, T_x = 6, causal self-mask, no source padding",
            (randn(g, 1, 2, 8), randn(g, 1, 6, 8)),
            {"self_mask": _causal(2), "memory_mask": _keys([6], 6)},
            init=small,
            state=_decoder_layer_state(g, 8, 16),
        ),
        Case(
            "d_model = 12, 3 heads, d_ff = 20, B = 2, T_y = 3, T_x = 5, source lengths 5 and 3",
            (randn(g, 2, 3, 12), randn(g, 2, 5, 12)),
            {"self_mask": _causal(3), "memory_mask": _keys([5, 3], 5)},
            init={"d_model": 12, "n_heads": 3, "d_ff": 20},
            state=_decoder_layer_state(g, 12, 20),
        ),
    ]


class _DecoderLayerBase(ref.DecoderLayer):
    """A decoder layer whose three sub-layers are spelled out, for the wrong variants below."""

    def layer(self, y, memory, self_mask, cross_q, cross_kv, cross_mask):
        y = self.self_attn_norm(y + self.self_attn(y, mask=self_mask)[0])
        y = self.cross_attn_norm(y + self.cross_attn(cross_q(y, memory), cross_kv(y, memory), cross_mask)[0])
        return self.ff_norm(y + self.ff(y))


class _DecoderNoCausal(_DecoderLayerBase):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        return self.layer(y, memory, None, lambda h, m: h, lambda h, m: m, memory_mask)


class _DecoderMemoryAsQueries(_DecoderLayerBase):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        return self.layer(y, memory, self_mask, lambda h, m: m, lambda h, m: h, memory_mask)


class _DecoderCrossOnItself(_DecoderLayerBase):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        return self.layer(y, memory, self_mask, lambda h, m: h, lambda h, m: h, self_mask)


class _DecoderNoMemoryMask(_DecoderLayerBase):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        return self.layer(y, memory, self_mask, lambda h, m: h, lambda h, m: m, None)


class _DecoderMasksSwapped(_DecoderLayerBase):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        return self.layer(y, memory, memory_mask, lambda h, m: h, lambda h, m: m, self_mask)


class _DecoderPreNorm(ref.DecoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm_first = True


class _DecoderNoCross(ref.DecoderLayer):
    def forward(self, y, memory, self_mask=None, memory_mask=None, packing=None, memory_packing=None):
        y = self.self_attn_norm(y + self.self_attn(y, mask=self_mask)[0])
        return self.ff_norm(y + self.ff(y))


# 8.3 the forward pass: shifted targets and the decoder's masks ---------------------------------------------


class FullTransformer(ref.Transformer):
    """The reference model computing every position, padding included, as a model written plainly does."""

    def _packing(self, mask):
        return None


def _logits(model, src, src_mask, tgt_in, self_mask, memory_mask="source padding"):
    if isinstance(memory_mask, str):
        memory_mask = src_mask[:, None, None, :]
    memory = model.encoder(model._embed(model.src_embed, src), memory_mask)
    return model.out(model.decoder(model._embed(model.tgt_embed, tgt_in), memory, self_mask, memory_mask))


def _shift(tgt, first):
    return torch.cat([torch.full_like(tgt[:, :1], first), tgt[:, :-1]], dim=1)


class _ForwardNotShifted(FullTransformer):
    def forward(self, src, src_mask, tgt):
        return _logits(self, src, src_mask, tgt, _causal(tgt.shape[1]) & (tgt != PAD)[:, None, None, :])


class _ForwardShiftedLeft(FullTransformer):
    def forward(self, src, src_mask, tgt):
        tgt_in = torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], PAD)], dim=1)
        return _logits(self, src, src_mask, tgt_in, _causal(tgt.shape[1]) & (tgt_in != PAD)[:, None, None, :])


class _ForwardPadShiftedIn(FullTransformer):
    def forward(self, src, src_mask, tgt):
        tgt_in = _shift(tgt, PAD)
        return _logits(self, src, src_mask, tgt_in, _causal(tgt.shape[1]) & (_shift(tgt, BOS) != PAD)[:, None, None, :])


class _ForwardNoCausal(FullTransformer):
    def forward(self, src, src_mask, tgt):
        tgt_in = _shift(tgt, BOS)
        return _logits(self, src, src_mask, tgt_in, (tgt_in != PAD)[:, None, None, :])


class _ForwardPaddingFromTargets(FullTransformer):
    def forward(self, src, src_mask, tgt):
        return _logits(self, src, src_mask, _shift(tgt, BOS), _causal(tgt.shape[1]) & (tgt != PAD)[:, None, None, :])


class _ForwardNoTargetPadding(FullTransformer):
    def forward(self, src, src_mask, tgt):
        return _logits(self, src, src_mask, _shift(tgt, BOS), _causal(tgt.shape[1]))


class _ForwardNoSourceMask(FullTransformer):
    def forward(self, src, src_mask, tgt):
        tgt_in, self_mask = ref.decoder_inputs(tgt, BOS, PAD)
        return _logits(self, src, src_mask, tgt_in, self_mask, None)


def _model_state(g: torch.Generator, src_vocab: int, tgt_vocab: int, d: int, d_ff: int, n_enc: int, n_dec: int) -> dict:
    state = {
        "src_embed.weight": randn(g, src_vocab, d, scale=d**-0.5),
        "tgt_embed.weight": randn(g, tgt_vocab, d, scale=d**-0.5),
    }
    for i in range(n_enc):
        state.update(_encoder_layer_state(g, d, d_ff, f"encoder.layers.{i}."))
    for i in range(n_dec):
        state.update(_decoder_layer_state(g, d, d_ff, f"decoder.layers.{i}."))
    return {**state, **_linear(g, "out", tgt_vocab, d)}


def _targets(g: torch.Generator, vocab: int, lengths: list[int], t: int) -> torch.Tensor:
    """(B, t) targets y_1 .. y_{n-1} <eos> <pad> ...: lengths count the <eos>."""
    tgt = torch.randint(3, vocab, (len(lengths), t), generator=g)
    positions, n = torch.arange(t)[None, :], torch.tensor(lengths)[:, None]
    return tgt.masked_fill(positions == n - 1, EOS).masked_fill(positions >= n, PAD)


def _sources(g: torch.Generator, vocab: int, lengths: list[int], t: int) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    return torch.randint(3, vocab, (len(lengths), t), generator=g).masked_fill(~mask, PAD), mask


def _forward_cases(g: torch.Generator) -> list[Case]:
    small = {
        "src_vocab": 11,
        "tgt_vocab": 9,
        "d_model": 8,
        "n_heads": 2,
        "n_encoder_layers": 1,
        "n_decoder_layers": 2,
        "d_ff": 16,
        "max_len": 16,
    }
    other = {**small, "n_heads": 4, "n_encoder_layers": 2, "n_decoder_layers": 1}
    cases = []
    for label, init, src_lengths, t_x, tgt_lengths, t_y in (
        ("B = 3, source lengths 5, 3, 2; target lengths 4, 2, 1 (counting <eos>)", small, [5, 3, 2], 5, [4, 2, 1], 4),
        ("B = 2, no source padding (T_x = 4); target lengths 5 and 3", small, [4, 4], 4, [5, 3], 5),
        ("B = 1, T_x = 6, T_y = 3, no padding at all", small, [6], 6, [3], 3),
        ("4 heads, 2 encoder layers, 1 decoder layer; B = 4, mixed lengths", other, [3, 6, 1, 4], 6, [2, 5, 3, 1], 5),
    ):
        src, src_mask = _sources(g, 11, src_lengths, t_x)
        state = _model_state(g, 11, 9, 8, 16, init["n_encoder_layers"], init["n_decoder_layers"])
        cases.append(Case(label, (src, src_mask, _targets(g, 9, tgt_lengths, t_y)), init=init, state=state))
    return cases


# 8.4 the label-smoothed loss -------------------------------------------------------------------------------


def _loss_cases(g: torch.Generator) -> list[Case]:
    def case(label, b, t, v, lengths, smoothing):
        targets = torch.randint(0, v, (b, t), generator=g)
        mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
        return Case(
            label, (randn(g, b, t, v, scale=3.0), targets.masked_fill(~mask, PAD), mask), {"smoothing": smoothing}
        )

    return [
        case("B = 2, T = 3, V = 5, smoothing 0.1, lengths 3 and 2", 2, 3, 5, [3, 2], 0.1),
        case("B = 3, T = 4, V = 7, smoothing 0.2, lengths 4, 1 and 3", 3, 4, 7, [4, 1, 3], 0.2),
        case("B = 2, T = 5, V = 6, no smoothing (0.0), lengths 2 and 5", 2, 5, 6, [2, 5], 0.0),
        case("B = 1, T = 6, V = 11, smoothing 0.1, no padding", 1, 6, 11, [6], 0.1),
    ]


def _ls_parts(logits, targets):
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs, -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _ls_mean(loss, mask):
    return (loss * mask).sum() / mask.sum()


def _ls_other_classes(logits, targets, mask, smoothing):
    log_probs, nll = _ls_parts(logits, targets)
    others = (-log_probs.sum(-1) - nll) / (logits.shape[-1] - 1)  # eps / (V - 1) on every wrong token
    return _ls_mean((1 - smoothing) * nll + smoothing * others, mask)


def _ls_padding_too(logits, targets, mask, smoothing):
    log_probs, nll = _ls_parts(logits, targets)
    return ((1 - smoothing) * nll - smoothing * log_probs.mean(-1)).mean()


def _ls_no_smoothing(logits, targets, mask, smoothing):
    return _ls_mean(_ls_parts(logits, targets)[1], mask)


def _ls_summed(logits, targets, mask, smoothing):
    log_probs, nll = _ls_parts(logits, targets)
    return (((1 - smoothing) * nll - smoothing * log_probs.mean(-1)) * mask).sum()


def _ls_summed_over_vocabulary(logits, targets, mask, smoothing):
    log_probs, nll = _ls_parts(logits, targets)
    return _ls_mean((1 - smoothing) * nll - smoothing * log_probs.sum(-1), mask)


def _ls_weights_swapped(logits, targets, mask, smoothing):
    log_probs, nll = _ls_parts(logits, targets)
    return _ls_mean(smoothing * nll - (1 - smoothing) * log_probs.mean(-1), mask)


# 8.5 the learning-rate schedule ----------------------------------------------------------------------------


def noam_schedule(step, d_model: int, warmup: int, factor: float = 1.0) -> torch.Tensor:
    """training.noam_lr at every step of a tensor of steps (1, 2, ...): a float64 tensor of the same shape."""
    steps = torch.as_tensor(step, dtype=torch.float64)
    rates = [noam_lr(int(s), d_model, warmup, factor) for s in steps.flatten().tolist()]
    return torch.tensor(rates, dtype=torch.float64).reshape(steps.shape)


def _schedule_cases(g: torch.Generator) -> list[Case]:
    warmup = int(torch.randint(50, 2000, (1,), generator=g))
    steps = torch.randint(1, 20 * warmup, (30,), generator=g).sort().values.to(torch.float64)
    return [
        Case("steps 1 to 12, d_model = 512, warmup = 4", (torch.arange(1, 13, dtype=torch.float64), 512, 4)),
        Case(
            "steps 1 to 20000 every 250, d_model = 512, warmup = 4000 (the paper's)",
            (torch.arange(1, 20001, 250, dtype=torch.float64), 512, 4000),
        ),
        Case(
            "steps 1 to 300, d_model = 256, warmup = 100, factor = 2",
            (torch.arange(1, 301, dtype=torch.float64), 256, 100),
            {"factor": 2.0},
        ),
        Case(
            f"30 steps between 1 and {20 * warmup}, d_model = 64, warmup = {warmup}, factor = 0.5",
            (steps, 64, warmup),
            {"factor": 0.5},
        ),
    ]


def _noam_inverted(step, d_model, warmup, factor=1.0):
    return factor * d_model**-0.5 * torch.maximum(step**-0.5, step * warmup**-1.5)


def _noam_no_d_model(step, d_model, warmup, factor=1.0):
    return factor * torch.minimum(step**-0.5, step * warmup**-1.5)


def _noam_warmup_exponent(step, d_model, warmup, factor=1.0):
    return factor * d_model**-0.5 * torch.minimum(step**-0.5, step * warmup**-0.5)


def _noam_factor_ignored(step, d_model, warmup, factor=1.0):
    return d_model**-0.5 * torch.minimum(step**-0.5, step * warmup**-1.5)


def _noam_linear_decay(step, d_model, warmup, factor=1.0):
    return factor * d_model**-0.5 * torch.minimum(step**-1.0, step * warmup**-2.0)


def _noam_shifted(step, d_model, warmup, factor=1.0):
    # the off-by-one of a loop that counts its steps from 0: the rate of step s - 1 at step s (0 at step 1)
    return _noam_at(step - 1, d_model, warmup, factor)


def _noam_at(step, d_model, warmup, factor):
    return factor * d_model**-0.5 * torch.minimum(step**-0.5, step * warmup**-1.5)


# 8.6 an experiment: train the whole model, judged by what it writes ----------------------------------------

COPY_VOCAB = 14  # chapter 4's digit vocabulary: <pad>, <bos>, <eos>, <unk>, then the digits 0 to 9 (4 to 13)
# Its sizes are ints and its dropout a float: read as a dict[str, float], it is passed on with type: ignore[arg-type].
COPY_MODEL = {
    "d_model": 32,
    "n_heads": 4,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "d_ff": 64,
    "dropout": 0.0,
    "max_len": 16,
}
COPY_STRINGS = 200  # new strings the judge decodes with the weights of each case
COPY_PASS = 0.9  # the share of them the weights must repeat exactly (the recipe: at least 0.97 over 100 seeds)
COPY_SMOOTHING = 0.1


def copy_batch(n: int, generator: torch.Generator, min_len: int = 3, max_len: int = 8):
    """n strings of min_len to max_len random digits: src (n, max_len) ids padded with <pad>, src_mask
    (n, max_len) bool (True at the digits), tgt (n, max_len + 1): the same digits, <eos>, then <pad>."""
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator)
    digits = torch.randint(4, COPY_VOCAB, (n, max_len), generator=generator)
    src_mask = torch.arange(max_len) < lengths[:, None]
    src = digits.masked_fill(~src_mask, PAD)
    tgt = torch.cat([src, torch.full((n, 1), PAD)], dim=1)
    tgt[torch.arange(n), lengths] = EOS
    return src, src_mask, tgt


def train_copy_model(seed: int) -> dict:
    """The weights of a small Transformer (COPY_MODEL) trained to repeat strings of digits as the chapter's
    solution trains its own: 160 steps of 128 new strings each, the label-smoothed loss, Adam and the warm-up
    schedule (30 steps, factor 0.5). A dict name -> tensor."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = FullTransformer(COPY_VOCAB, COPY_VOCAB, **COPY_MODEL).float()  # type: ignore[arg-type]  # see COPY_MODEL
    # The chapter's model starts from PyTorch's own initialisation (the course's Glorot matrices train less surely
    # in so few steps: 4 in 100 seeds repeat fewer than 95% of the strings, against none).
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.reset_parameters()
    for embedding in (model.src_embed, model.tgt_embed):
        torch.nn.init.normal_(embedding.weight, std=COPY_MODEL["d_model"] ** -0.5)
    # foreach: one update for all the parameters at once, the same numbers sooner on a CPU
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    model.train()
    for step in range(1, 161):
        src, src_mask, tgt = copy_batch(128, generator)
        for group in optimizer.param_groups:
            group["lr"] = noam_lr(step, COPY_MODEL["d_model"], 30, factor=0.5)  # type: ignore[arg-type]  # an int
        loss = label_smoothed_loss(model(src, src_mask, tgt), tgt, tgt != PAD, COPY_SMOOTHING)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def _copy_cases(g: torch.Generator) -> list[Case]:
    # The judge's strings come from a seed of their own, drawn here and never given to the student's function
    # (Case.judged): from the training seed it receives, it could otherwise draw them and train on them.
    # One training per grading: the recipe repeats at least 97% of the strings on each of 100 seeds (the pass
    # mark is 90%), and each known mistake fails on every seed tried, so more trainings would only add time
    # (about 8 s each in the grader's worker, whose watch on built-ins slows training about twofold).
    seeds = torch.randint(0, 2**31 - 1, (1,), generator=g).tolist()
    tests = torch.randint(0, 2**31 - 1, (1,), generator=g).tolist()
    return [
        Case(
            f"training seed {s}, then {COPY_STRINGS} new strings of 3 to 8 digits to repeat",
            (s,),
            judged={"strings_seed": t},
        )
        for s, t in zip(seeds, tests)
    ]


def _copy_strings(seed: int):
    """The judge's strings for one case, from its own seed (Case.judged["strings_seed"])."""
    return copy_batch(COPY_STRINGS, torch.Generator().manual_seed(seed))


@functools.cache
def _copy_shapes() -> dict:
    # Built on the CPU, not on the meta device: the model is small (a millisecond), while the meta device's
    # initialisers import torch._dynamo, about 2 s of a grading run.
    model = FullTransformer(COPY_VOCAB, COPY_VOCAB, **COPY_MODEL)  # type: ignore[arg-type]  # see COPY_MODEL
    return {name: tuple(value.shape) for name, value in model.state_dict().items()}


def _tokens(ids) -> str:
    """Token ids as text, up to the first <eos>: '2057<eos>'."""
    names = {PAD: "<pad>", BOS: "<bos>", EOS: "<eos>", 3: "<unk>"}
    words = [names.get(int(i), str(int(i) - 4)) for i in ids]
    return "".join(words[: words.index("<eos>") + 1] if "<eos>" in words else words)


def copy_score(weights: dict, seed: int) -> tuple[int, torch.Tensor, torch.Tensor, float]:
    """(strings repeated exactly, the judge's sources, what the weights wrote greedily, their teacher-forced
    loss), on the judge's strings of ``seed`` (a case's judged["strings_seed"]); weights as checked by the judge."""
    # The ignore: see COPY_MODEL.
    model = FullTransformer(COPY_VOCAB, COPY_VOCAB, **COPY_MODEL).double().eval()  # type: ignore[arg-type]
    model.load_state_dict({name: value.detach().double() for name, value in weights.items()})
    src, src_mask, tgt = _copy_strings(seed)
    with torch.no_grad():
        written, _ = model.generate(src, src_mask, tgt.shape[1], use_cache=False)  # (N, <= T_x + 1), no <bos>
        loss = label_smoothed_loss(model(src, src_mask, tgt), tgt, tgt != PAD, COPY_SMOOTHING).item()
    written = torch.cat([written, torch.full((len(src), tgt.shape[1] - written.shape[1]), EOS)], dim=1)
    right = ((written == tgt) | (tgt == PAD)).all(dim=1)  # every digit and the <eos>; after it, anything
    return int(right.sum()), src, written, loss


def _judge_copy(case: Case, answer) -> str | None:
    if not isinstance(answer, dict):
        got = f"a {type(answer).__name__} of {len(answer)}" if isinstance(answer, (tuple, list)) else describe(answer)
        return f"the answer should be the trained model's weights, a dict from names to tensors; got {got}"
    shapes = _copy_shapes()
    missing, unexpected = [k for k in shapes if k not in answer], [k for k in answer if k not in shapes]
    if missing or unexpected:
        sizes = ", ".join(f"{k}={v}" for k, v in COPY_MODEL.items())
        return (
            f"the weights should be those of Transformer({COPY_VOCAB}, {COPY_VOCAB}, {sizes}), but "
            f"{len(missing)} of its names are missing{f' ({missing[0]}, ...)' if missing else ''} and "
            f"{len(unexpected)} are not its own{f' ({str(unexpected[0])[:60]}, ...)' if unexpected else ''}"
        )
    for name, shape in shapes.items():
        value = answer[name]
        if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
            return f"the weight {name} should be a floating-point tensor, got {describe(value)}"
        if tuple(value.shape) != shape:
            return f"the weight {name} should have shape {shape}, got {tuple(value.shape)}"
        if not bool(torch.isfinite(value).all()):
            return f"the weight {name} holds NaN or infinite values: the training diverged"
    seed = case.judged["strings_seed"]
    right, src, written, loss = copy_score(answer, seed)
    if right >= COPY_PASS * COPY_STRINGS:
        return None
    _, _, tgt = _copy_strings(seed)
    wrong = int(((written == tgt) | (tgt == PAD)).all(dim=1).logical_not().nonzero()[0])
    n = int((src[wrong] != PAD).sum())
    eos_first = int((written[:, 0] == EOS).sum())
    return (
        f"decoded greedily, these weights repeat {right} of {COPY_STRINGS} new strings ({right / COPY_STRINGS:.0%}; "
        f"at least {COPY_PASS:.0%} needed), e.g. {_tokens(src[wrong, :n])} -> {_tokens(written[wrong])}"
        + (f", and {eos_first} outputs start with <eos>" if eos_first >= COPY_STRINGS // 4 else "")
        + f"; teacher-forced with the decoder's masks, their loss on these strings is {loss:.2f} "
        f"(the floor that label smoothing allows: {_copy_floor():.2f})"
    )


def _copy_floor() -> float:
    """The least label-smoothed loss: the entropy of the smoothed target distribution."""
    q = torch.full((COPY_VOCAB,), COPY_SMOOTHING / COPY_VOCAB, dtype=torch.float64)
    q[0] += 1 - COPY_SMOOTHING
    return float(-(q * q.log()).sum())


# The stand-ins below return tensors or tuples only: the self-check compares a mistake's output with the
# student's answer, and only those compare safely with any answer.


def _copy_returns_loss(seed):
    return torch.tensor(0.548)  # the training loss of a decoder that saw the answer: as low as smoothing allows


def _copy_returns_outputs(seed):
    return _copy_strings(seed)[2]  # what a perfect model would write, instead of the weights


def _copy_returns_parameters(seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = FullTransformer(COPY_VOCAB, COPY_VOCAB, **COPY_MODEL).float()
    return tuple(p.detach() for p in model.parameters())


register(
    Exercise(
        id="8.1",
        title="the encoder layer",
        idea=(
            "two sub-layers, self-attention then the feed-forward network, each wrapped in dropout, a residual "
            "connection and a layer norm."
        ),
        points=3,
        name="EncoderLayer",
        kind="module",
        reference=ref.EncoderLayer,
        make_cases=_encoder_cases,
        mistakes=(
            Mistake(
                "the LayerNorm is applied to the sub-layer's output before the residual sum, x + LayerNorm(Sublayer(x)); "
                "the paper normalises the sum: LayerNorm(x + Sublayer(x)).",
                _EncoderNormOnSublayer,
            ),
            Mistake(
                "the residual is added after the norm, LayerNorm(x) + Sublayer(x): add first, then normalise the sum, "
                "LayerNorm(x + Sublayer(x)).",
                _EncoderNormBeforeSum,
            ),
            Mistake(
                "this is pre-norm, x + Sublayer(LayerNorm(x)); this exercise asks for the paper's post-norm, "
                "LayerNorm(x + Sublayer(x)).",
                _EncoderPreNorm,
            ),
            Mistake(
                "the residual connection is missing: add the sub-layer's input to its output, LayerNorm(x + Sublayer(x)).",
                _EncoderNoResidual,
            ),
            Mistake(
                "the mask is not passed to the self-attention: padding keys must stay hidden.", _EncoderMaskIgnored
            ),
            Mistake(
                "both sub-layers use self_attn_norm: the feed-forward sub-layer has its own LayerNorm, self.ff_norm.",
                _EncoderOneNorm,
            ),
            Mistake(
                "the feed-forward sub-layer is missing: after self-attention comes LayerNorm(z + FFN(z)).",
                _EncoderNoFeedForward,
            ),
        ),
        forbidden=BUILTIN_TRANSFORMER,
    ),
    Exercise(
        id="8.2",
        title="the decoder layer",
        idea=(
            "three sub-layers: masked self-attention over the target, cross-attention to the memory, and the "
            "feed-forward network, each with its dropout, residual connection and layer norm."
        ),
        points=4,
        name="DecoderLayer",
        kind="module",
        reference=ref.DecoderLayer,
        make_cases=_decoder_cases,
        mistakes=(
            Mistake(
                "the self-attention ignores self_mask, so every position sees the targets after it (no causal mask): "
                "pass mask=self_mask.",
                _DecoderNoCausal,
            ),
            Mistake(
                "the encoder's output is used as the queries of the cross-attention: the queries come from the decoder "
                "(y), the keys and values from the memory.",
                _DecoderMemoryAsQueries,
            ),
            Mistake(
                "the cross-attention attends to the decoder itself: its keys and values are the encoder's output, "
                "memory.",
                _DecoderCrossOnItself,
            ),
            Mistake(
                "the cross-attention ignores memory_mask: padded source positions must stay hidden.",
                _DecoderNoMemoryMask,
            ),
            Mistake(
                "the masks are swapped: self_mask belongs to the self-attention, memory_mask to the cross-attention.",
                _DecoderMasksSwapped,
            ),
            Mistake(
                "this is pre-norm, y + Sublayer(LayerNorm(y)); this exercise asks for post-norm, "
                "LayerNorm(y + Sublayer(y)).",
                _DecoderPreNorm,
            ),
            Mistake(
                "the cross-attention sub-layer is missing: between self-attention and the feed-forward network, the "
                "decoder attends to the memory.",
                _DecoderNoCross,
            ),
        ),
        forbidden=BUILTIN_TRANSFORMER,
    ),
    Exercise(
        id="8.3",
        title="the forward pass: shifted targets and the decoder's masks",
        idea=(
            "the decoder reads the targets shifted right behind <bos>, may not see later positions, and may not "
            "attend to padding, in the target or in the source."
        ),
        points=3,
        name="Transformer",
        kind="module",
        reference=FullTransformer,
        make_cases=_forward_cases,
        mistakes=(
            Mistake(
                "the targets are not shifted: the decoder's input is <bos> followed by tgt[:, :-1], so that "
                "position t reads y_t and predicts y_{t+1}; fed tgt itself, it sees the answer.",
                _ForwardNotShifted,
            ),
            Mistake(
                "the targets are shifted the wrong way: the decoder reads <bos> followed by every target token but "
                "the last.",
                _ForwardShiftedLeft,
            ),
            Mistake("the first decoder input must be <bos> (self.bos_id), not <pad>.", _ForwardPadShiftedIn),
            Mistake(
                "the causal mask is missing: position t may only attend to positions 0 .. t of the decoder's input.",
                _ForwardNoCausal,
            ),
            Mistake(
                "the padding mask comes from the targets, but the decoder reads the shifted input: take "
                "tgt_in != pad_id.",
                _ForwardPaddingFromTargets,
            ),
            Mistake(
                "the target padding mask is missing: hide the keys where tgt_in is <pad>, on top of the causal mask "
                "(the causal mask alone hides them from real positions, but not from every position).",
                _ForwardNoTargetPadding,
            ),
            Mistake(
                "the source padding mask is missing: pass memory_mask = src_mask[:, None, None, :] to encode and decode.",
                _ForwardNoSourceMask,
            ),
        ),
        forbidden=BUILTIN_TRANSFORMER,
    ),
    Exercise(
        id="8.4",
        title="the label-smoothed loss",
        idea=(
            "mix the one-hot target with a uniform distribution over the vocabulary, take the cross-entropy with "
            "the model's log-probabilities, and average over the real tokens only."
        ),
        points=3,
        name="label_smoothed_loss",
        kind="function",
        reference=label_smoothed_loss,
        make_cases=_loss_cases,
        mistakes=(
            Mistake(
                "the smoothing mass is spread over the V - 1 wrong tokens only; PyTorch's convention (and this "
                "exercise's) spreads it over all V tokens, the right one included: the uniform term is "
                "-log_probs.mean(-1).",
                _ls_other_classes,
            ),
            Mistake(
                "the loss is averaged over padding positions too: average over the real tokens only, "
                "(loss * mask).sum() / mask.sum().",
                _ls_padding_too,
            ),
            Mistake(
                "there is no smoothing: mix (1 - smoothing) * NLL with smoothing * (the mean of -log p over the "
                "vocabulary).",
                _ls_no_smoothing,
            ),
            Mistake("the loss is summed over the tokens: divide by the number of real tokens.", _ls_summed),
            Mistake(
                "the uniform term sums -log p over the vocabulary: average it (divide by V).",
                _ls_summed_over_vocabulary,
            ),
            Mistake(
                "the weights are swapped: 1 - smoothing goes to the right token's NLL, smoothing to the uniform term.",
                _ls_weights_swapped,
            ),
        ),
        forbidden=BUILTIN_LOSS,
        atol=1e-5,
        rtol=1e-5,
    ),
    Exercise(
        id="8.5",
        title="the warm-up schedule",
        idea=(
            "the rate rises linearly during the warm-up and then falls as one over the square root of the step; "
            "one formula with a minimum gives both parts."
        ),
        points=2,
        name="noam_lr",
        kind="function",
        reference=noam_schedule,
        make_cases=_schedule_cases,
        mistakes=(
            Mistake(
                "the warm-up is inverted (max instead of min): the rate must rise linearly for `warmup` steps, "
                "then decay as 1 / sqrt(step).",
                _noam_inverted,
            ),
            Mistake("the factor d_model^-0.5 is missing.", _noam_no_d_model),
            Mistake(
                "the warm-up branch is step * warmup^-0.5; the paper's is step * warmup^-1.5, which meets "
                "step^-0.5 exactly at step = warmup.",
                _noam_warmup_exponent,
            ),
            Mistake("the `factor` argument is ignored: multiply by it.", _noam_factor_ignored),
            Mistake(
                "the decay is 1 / step; the paper's is 1 / sqrt(step), and the warm-up step * warmup^-1.5.",
                _noam_linear_decay,
            ),
            Mistake(
                "the schedule is one step late: the steps count from 1, and step 1 already gets the rate "
                "factor * d_model^-0.5 * warmup^-1.5, not 0.",
                _noam_shifted,
            ),
        ),
        atol=1e-12,
        rtol=1e-6,
    ),
    Exercise(
        id="8.6",
        title="train your own Transformer",
        idea=(
            "the decoder must learn to write each next token without seeing it; only new strings decoded "
            "greedily with the trained weights show whether it has, since a decoder that sees the answer also "
            "reaches a low training loss."
        ),
        points=3,
        name="train_copy_model",
        kind="function",
        reference=train_copy_model,
        make_cases=_copy_cases,
        judge=_judge_copy,
        mistakes=(
            Mistake(
                "this is a loss, not the weights. The grader decodes new strings with the weights, because a low "
                "training loss proves little: a decoder that sees the token it must predict gets one too.",
                _copy_returns_loss,
            ),
            Mistake(
                "these are strings written out, not the weights: the grader decodes strings of its own with the "
                "weights you return.",
                _copy_returns_outputs,
            ),
            Mistake(
                "the parameters without their names (and, here, untrained): return the state dictionary, names "
                "included, so that the grader can load it into the same model.",
                _copy_returns_parameters,
            ),
        ),
        forbidden=BUILTIN_TRANSFORMER + BUILTIN_LOSS,
    ),
)
