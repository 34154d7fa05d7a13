"""The shared figures (transformer_course.evaluation.plots): what they draw, and a clear error for what they cannot."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from transformer_course.evaluation.plots import attention_heatmap, mask_image
from transformer_course.models.attention import causal_mask


def test_a_mask_says_which_colour_may_attend():
    ax = mask_image(causal_mask(4), title="causal")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["may attend (True)", "hidden (False)"]
    assert ax.get_xlabel() == "key position" and ax.get_ylabel() == "query position"
    assert ax.images[0].get_array().tolist() == causal_mask(4).int().tolist()
    assert mask_image(causal_mask(4), legend=False).get_legend() is None
    plt.close("all")


def test_a_mask_that_is_not_one_boolean_matrix_is_refused():
    with pytest.raises(ValueError, match="one boolean"):
        mask_image(torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="one boolean"):
        mask_image(torch.ones(3, 3))


def test_an_attention_heatmap_draws_the_weights():
    weights = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(0)), dim=-1)
    ax = attention_heatmap(weights, queries=["x", "y", "z"], keys=["a", "b", "c", "d", "e"])
    assert torch.allclose(torch.as_tensor(ax.images[0].get_array()).double(), weights.double(), atol=1e-6)
    plt.close("all")
