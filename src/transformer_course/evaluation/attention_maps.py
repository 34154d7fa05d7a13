"""Every attention map of a trained Transformer for one sentence pair, per layer and head (chapter 9): the
encoder's self-attention, the decoder's masked self-attention and its cross-attention to the source."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .._checks import Model

__all__ = ["attention_maps"]


@torch.no_grad()
def attention_maps(model: Model, src_ids: Sequence[int], tgt_in_ids: Sequence[int]) -> dict[str, Tensor]:
    """The attention weights of every layer and head while ``model`` reads one source and one decoder input.

    src_ids: the source's token ids (T_x); tgt_in_ids: the decoder's input (T_y), <bos> and the output tokens, as
    in teacher forcing. Returns {"encoder": (L_enc, h, T_x, T_x), "decoder": (L_dec, h, T_y, T_y),
    "cross": (L_dec, h, T_y, T_x)}: row i of a map is what query position i attends to.

    The model runs unchanged, except that each attention module is asked for its weights (its fused kernel does
    not compute them): hooks on the modules, removed before returning."""
    records: dict[str, list[Tensor]] = {"encoder": [], "decoder": [], "cross": []}
    handles = []

    def watch(kind: str, module: nn.Module) -> None:
        def ask_for_weights(mod, args, kwargs):
            # forward(x, memory, mask, need_weights, ...): need_weights is the fourth argument, given either way
            if len(args) >= 4:
                return args[:3] + (True,) + args[4:], kwargs
            return args, {**kwargs, "need_weights": True}

        def keep(mod, args, kwargs, output):
            records[kind].append(output[1][0])  # (h, T_q, T_k) of the one sentence

        handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
        handles.append(module.register_forward_hook(keep, with_kwargs=True))

    for layer in model.encoder.layers:
        watch("encoder", layer.self_attn)
    for layer in model.decoder.layers:
        watch("decoder", layer.self_attn)
        watch("cross", layer.cross_attn)
    was_training = model.training
    try:
        model.eval()
        src = torch.tensor([list(src_ids)], device=next(model.parameters()).device)  # (1, T_x)
        src_mask = torch.ones_like(src, dtype=torch.bool)
        memory = model.encode(src, src_mask)  # (1, T_x, d)
        model.decode(memory, src_mask, torch.tensor([list(tgt_in_ids)], device=src.device))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return {kind: torch.stack(maps).cpu() for kind, maps in records.items()}
