"""patch_captioner: chapter 4's captioning decoder over a Transformer encoder of image patches."""

import pytest
import torch

from transformer_course.experiments import captioning
from transformer_course.experiments.patch_captioner import PatchCaptioner


@pytest.fixture
def images():
    return captioning.make_captions(3, seed=5).images  # (3, 1, 16, 64)


def test_shapes_and_the_decoder_unchanged(images):
    torch.manual_seed(0)
    model = PatchCaptioner(n_layers=2)
    h, s0 = model.encode(images)
    assert h.shape == (3, 16, 64) and s0.shape == (3, 64)
    assert not hasattr(model, "patch") and not hasattr(model, "project")
    logits, weights = model(images, captioning.make_captions(3, seed=5).targets())
    assert logits.shape[-1] == 12 and weights.shape[-1] == 16
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]))
    with pytest.raises(ValueError, match="images must have shape"):
        model.encode(images[:, :, :8])


def test_a_patch_is_four_columns_and_reads_the_others_only_through_the_encoder(images):
    torch.manual_seed(0)
    for n_layers, reads_others in ((0, False), (2, True)):
        model = PatchCaptioner(n_layers=n_layers).eval()
        changed = images.clone()
        changed[:, :, :, 40:44] = 1.0  # patch 10's pixels only
        with torch.no_grad():
            before, after = model.encode(images)[0], model.encode(changed)[0]
        moved = (after - before).abs().amax(dim=(0, 2)) > 1e-6  # (16,): which patches' vectors changed
        assert moved[10]
        assert bool(moved[torch.arange(16) != 10].any()) == reads_others


def test_training_takes_any_encoder_and_is_deterministic():
    def build():
        return PatchCaptioner(n_layers=1, d_ff=32)

    a = captioning.train_captioner(seed=3, steps=4, batch_size=8, n_train=40, build=build)
    b = captioning.train_captioner(seed=3, steps=4, batch_size=8, n_train=40, build=build)
    assert isinstance(a.model, PatchCaptioner) and a.losses == b.losses
