import pytest
import torch

from transformer_course.data import make_batch
from transformer_course.experiments.translation import max_output_length
from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import build_model


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_configuration_builds_a_model_with_the_course_interface(name):
    config = {**CONFIGS[name]}
    for key in ("d_emb", "d_hidden", "d_att", "d_readout", "d_model", "d_ff"):
        if key in config:
            config[key] = 8  # the same structure, small enough for a unit test
    if "n_heads" in config:
        config["n_heads"] = 2
    model = build_model(config, 20)
    batch = make_batch([[4, 5, 6], [7, 8]], [[9, 10], [11, 12, 13]], 0, 2)
    out = model(batch.src, batch.src_mask, batch.tgt)
    logits = out[0] if isinstance(out, tuple) else out
    assert logits.shape == (2, 4, 20)
    model.eval()
    tokens, _ = model.generate(batch.src, batch.src_mask, 5)
    assert tokens.dtype == torch.int64 and tokens.shape[0] == 2 and 1 <= tokens.shape[1] <= 5


def test_build_model_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown model kind 'lstm'"):
        build_model({"model": "lstm"}, 10)


def test_outputs_may_run_longer_than_their_source():
    assert max_output_length(1) > 1 and max_output_length(20) >= 30
