"""The course's Transformer and PyTorch's ``nn.Transformer``: weight copying both ways, and a wrapper with the
course's interface, which the tests use to prove agreement and the benchmark to compare speed.

``nn.Transformer`` is only the encoder-decoder stack: embeddings and the output layer are held separately
(``src_embed``, ``tgt_embed``, ``out``). Its parameters map one to one onto ours:

    ours (transformer.py)                  nn.Transformer (batch_first=True)
    *.self_attn.w_qkv.{weight,bias}        *.self_attn.in_proj_{weight,bias}      (W_Q, W_K, W_V stacked alike)
    *.self_attn.w_o                        *.self_attn.out_proj
    decoder.layers.i.cross_attn.*          decoder.layers.i.multihead_attn.*
    *.ff.linear1, *.ff.linear2             *.linear1, *.linear2
    *.self_attn_norm                       *.norm1
    decoder.layers.i.cross_attn_norm       decoder.layers.i.norm2
    *.ff_norm                              *.norm2 (encoder), *.norm3 (decoder)
    encoder.norm, decoder.norm             encoder.norm, decoder.norm

One difference: ``nn.Transformer`` always ends each stack with a LayerNorm, but the paper's post-norm
Transformer has none (its last layer already ends with one); ``TorchTransformer`` removes them for post-norm.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.batching import shift_right
from .attention import causal_mask
from .positional import PositionalEncoding
from .transformer import Transformer

__all__ = [
    "TorchTransformer",
    "copy_from_torch",
    "copy_to_torch",
    "lm_logits_with_torch",
    "parameter_names",
    "to_torch",
]

_ENCODER_LAYER = {
    "self_attn.w_qkv": "self_attn.in_proj_",
    "self_attn.w_o": "self_attn.out_proj.",
    "ff.linear1": "linear1.",
    "ff.linear2": "linear2.",
    "self_attn_norm": "norm1.",
    "ff_norm": "norm2.",
}
_DECODER_LAYER = {
    "self_attn.w_qkv": "self_attn.in_proj_",
    "self_attn.w_o": "self_attn.out_proj.",
    "cross_attn.w_qkv": "multihead_attn.in_proj_",
    "cross_attn.w_o": "multihead_attn.out_proj.",
    "ff.linear1": "linear1.",
    "ff.linear2": "linear2.",
    "self_attn_norm": "norm1.",
    "cross_attn_norm": "norm2.",
    "ff_norm": "norm3.",
}


def parameter_names(model: Transformer) -> dict[str, str]:
    """{our parameter name: nn.Transformer's} for the encoder and decoder stacks (embeddings and output excluded)."""
    names = {}
    for stack, table in (("encoder", _ENCODER_LAYER), ("decoder", _DECODER_LAYER)):
        for i in range(len(getattr(model, stack).layers)):
            for ours, theirs in table.items():
                for kind in ("weight", "bias"):
                    names[f"{stack}.layers.{i}.{ours}.{kind}"] = f"{stack}.layers.{i}.{theirs}{kind}"
        if getattr(model, stack).norm is not None:
            names.update({f"{stack}.norm.{kind}": f"{stack}.norm.{kind}" for kind in ("weight", "bias")})
    return names


def _check_compatible(model: Transformer, theirs: nn.Transformer) -> None:
    if not isinstance(model, Transformer):
        raise TypeError(f"expected the course's transformer.Transformer, got {type(model).__name__}")
    if not isinstance(theirs, nn.Transformer):
        raise TypeError(f"expected a torch.nn.Transformer, got {type(theirs).__name__}")
    cfg = model.config
    for stack, n in (("encoder", cfg["n_encoder_layers"]), ("decoder", cfg["n_decoder_layers"])):
        layers = getattr(theirs, stack).layers
        first = layers[0]
        found = {
            "layers": len(layers),
            "d_model": first.self_attn.embed_dim,
            "n_heads": first.self_attn.num_heads,
            "d_ff": first.linear1.out_features,
            "norm_first": first.norm_first,
            "final LayerNorm": getattr(theirs, stack).norm is not None,
        }
        wanted = {
            "layers": n,
            "d_model": cfg["d_model"],
            "n_heads": cfg["n_heads"],
            "d_ff": cfg["d_ff"],
            "norm_first": cfg["norm_first"],
            "final LayerNorm": cfg["norm_first"],
        }
        wrong = {k: (found[k], wanted[k]) for k in wanted if found[k] != wanted[k]}
        if wrong:
            raise ValueError(
                f"nn.Transformer's {stack} does not match the model: "
                + ", ".join(f"{k} is {a}, should be {b}" for k, (a, b) in wrong.items())
            )
        if not first.self_attn.batch_first or not (first.activation is F.relu or isinstance(first.activation, nn.ReLU)):
            raise ValueError("only nn.Transformer(batch_first=True) with activation='relu' is supported")


def _copy_extras(model: Transformer, extras: dict[str, nn.Module | None], to_model: bool) -> None:
    for name, module in extras.items():
        if module is None:
            continue
        ours = getattr(model, name)
        for kind in ("weight", "bias"):
            if hasattr(ours, kind) and getattr(ours, kind) is not None:
                src, dst = (
                    (getattr(module, kind), getattr(ours, kind))
                    if to_model
                    else (getattr(ours, kind), getattr(module, kind))
                )
                dst.copy_(src)


@torch.no_grad()
def copy_to_torch(
    model: Transformer,
    theirs: nn.Transformer,
    src_embed: nn.Embedding | None = None,
    tgt_embed: nn.Embedding | None = None,
    out: nn.Linear | None = None,
) -> nn.Transformer:
    """Copy the model's stacks into ``theirs`` (and its embeddings and output layer into the modules given)."""
    _check_compatible(model, theirs)
    mine, their_params = dict(model.named_parameters(remove_duplicate=False)), dict(theirs.named_parameters())
    for ours, name in parameter_names(model).items():
        their_params[name].copy_(mine[ours])
    _copy_extras(model, {"src_embed": src_embed, "tgt_embed": tgt_embed, "out": out}, to_model=False)
    return theirs


@torch.no_grad()
def copy_from_torch(
    model: Transformer,
    theirs: nn.Transformer,
    src_embed: nn.Embedding | None = None,
    tgt_embed: nn.Embedding | None = None,
    out: nn.Linear | None = None,
) -> Transformer:
    """Copy ``theirs``' stacks (and the embeddings and output layer given) into the model; returns the model."""
    _check_compatible(model, theirs)
    mine, their_params = dict(model.named_parameters(remove_duplicate=False)), dict(theirs.named_parameters())
    for ours, name in parameter_names(model).items():
        mine[ours].copy_(their_params[name])
    _copy_extras(model, {"src_embed": src_embed, "tgt_embed": tgt_embed, "out": out}, to_model=True)
    return model


class TorchTransformer(nn.Module):
    """``nn.Transformer(batch_first=True)`` between the course's embeddings (scaled, plus positions) and output layer.

    forward(src (B, T_x), src_mask (B, T_x) bool, tgt (B, T_y) = targets + <eos>) -> logits (B, T_y, V), as
    transformer.Transformer (untied embeddings). ``transformer`` is the nn.Transformer.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 256,
        n_heads: int = 4,
        n_encoder_layers: int = 3,
        n_decoder_layers: int = 3,
        d_ff: int = 1024,
        dropout: float = 0.1,
        norm_first: bool = False,
        max_len: int = 512,
        bos_id: int = 1,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.d_model, self.bos_id, self.pad_id = d_model, bos_id, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        with warnings.catch_warnings():  # a notice that pre-norm encoders skip the nested-tensor inference path
            warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
            self.transformer = nn.Transformer(
                d_model,
                n_heads,
                n_encoder_layers,
                n_decoder_layers,
                d_ff,
                dropout,
                batch_first=True,
                norm_first=norm_first,
            )
        if not norm_first:  # the paper's post-norm stacks end with their last layer's LayerNorm, not another one
            self.transformer.encoder.norm = self.transformer.decoder.norm = None
        self.out = nn.Linear(d_model, tgt_vocab)

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor) -> Tensor:
        tgt_in = shift_right(tgt, self.bos_id)
        scale = self.d_model**0.5
        x = self.positional(self.src_embed(src) * scale)
        y = self.positional(self.tgt_embed(tgt_in) * scale)
        # PyTorch's boolean masks mean the opposite of ours: True = may NOT attend.
        states = self.transformer(
            x,
            y,
            tgt_mask=~causal_mask(tgt_in.shape[1], device=tgt.device),
            src_key_padding_mask=~src_mask,
            tgt_key_padding_mask=tgt_in == self.pad_id,
            memory_key_padding_mask=~src_mask,
        )
        return self.out(states)


def to_torch(model: Transformer) -> TorchTransformer:
    """A TorchTransformer with the model's weights, dtype, device and train/eval mode."""
    cfg = {k: v for k, v in model.config.items() if k != "tie_embeddings"}
    p = model.out.weight
    theirs = TorchTransformer(**cfg).to(device=p.device, dtype=p.dtype)
    copy_to_torch(model, theirs.transformer, theirs.src_embed, theirs.tgt_embed, theirs.out)
    return theirs.train(model.training)


def _torch_lm_layer(ours: nn.Module, model: Any) -> nn.TransformerEncoderLayer:
    """PyTorch's encoder layer holding one of the language model's layers: a decoder layer without
    cross-attention has exactly an encoder layer's parameters (``_ENCODER_LAYER``)."""
    c = model.config
    theirs = nn.TransformerEncoderLayer(
        c["d_model"], c["n_heads"], c["d_ff"], dropout=0.0, activation="relu", batch_first=True,
        norm_first=c["norm_first"],
    )  # fmt: skip
    state = {}
    for name, tensor in ours.state_dict().items():
        prefix = next(p for p in _ENCODER_LAYER if name.startswith(p + "."))
        state[_ENCODER_LAYER[prefix] + name[len(prefix) + 1 :]] = tensor
    theirs.load_state_dict(state)
    return theirs.to(model.embed.weight.dtype).eval()


@torch.no_grad()
def lm_logits_with_torch(model: Any, ids: Tensor) -> Tensor:
    """A ``language_model.TransformerLM``'s logits (B, T, V) for ids (B, T) without padding, computed by
    PyTorch's own layers: scaled embeddings plus positions, ``nn.TransformerEncoderLayer`` under a causal mask with the model's
    weights, the final LayerNorm (pre-norm), and the transposed embedding as the output layer. Agreement with
    ``model(ids)`` checks everything of ours in between."""
    d = model.config["d_model"]
    x = model.embed(ids) * d**0.5 + model.positional.pe[: ids.shape[1]].to(model.embed.weight.dtype)  # (B, T, d)
    causal = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], dtype=x.dtype)  # (T, T): -inf above
    for ours in model.layers:
        x = _torch_lm_layer(ours, model)(x, src_mask=causal, is_causal=True)
    if model.norm is not None:
        x = model.norm(x)
    return F.linear(x, model.embed.weight, model.out.bias)  # (B, T, V)
