"""attention_maps: every layer's and head's weights, which are those the model computes with."""

import torch

from transformer_course.evaluation.attention_maps import attention_maps
from transformer_course.models.transformer import Transformer


def test_every_map_is_there_and_agrees_with_what_the_model_computes():
    torch.manual_seed(0)
    model = Transformer(
        20, 18, d_model=16, n_heads=4, n_encoder_layers=3, n_decoder_layers=2, d_ff=32, dropout=0.1, norm_first=True
    )
    src_ids = [5, 9, 3, 12, 7, 2]
    src, src_mask = torch.tensor([src_ids]), torch.ones(1, 6, dtype=torch.bool)
    tokens, cross_last = model.eval().generate(
        src, src_mask, 5, eos_id=None
    )  # (1, 5), (1, 5, 6): last layer, mean of heads
    tgt_in = [model.bos_id] + tokens[0, :-1].tolist()
    model.train()
    maps = attention_maps(model, src_ids, tgt_in)
    assert model.training  # left as it was found
    assert maps["encoder"].shape == (3, 4, 6, 6)
    assert maps["decoder"].shape == (2, 4, 5, 5) and maps["cross"].shape == (2, 4, 5, 6)
    for weights in maps.values():
        assert torch.allclose(weights.sum(-1), torch.ones(())) and (weights >= 0).all()
    assert maps["decoder"].triu(1).abs().max() == 0  # the causal mask: no query attends to a later position
    # the last layer's cross-attention, averaged over heads, is what greedy decoding reports at each step
    assert torch.allclose(maps["cross"][-1].mean(0), cross_last[0], atol=1e-5)
    # the hooks are gone: the next call of the model does not compute weights it was not asked for
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
