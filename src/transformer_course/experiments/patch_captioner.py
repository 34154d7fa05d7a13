"""Chapter 4's captions read by a Transformer encoder (chapter 8): a Transformer on input that is not text.

The image is cut into 16 patches of 16 x 4 pixels, side by side, as a Vision Transformer cuts a photograph. A patch
is narrower than a digit (6 to 10 pixels), so no patch alone shows which digit it belongs to; chapter 8's encoder
layers let every patch read every other before chapter 4's attention decoder reads them. ``PatchCaptioner`` with
``n_layers=0`` is the same model without the encoder layers: each patch knows only its own pixels and position.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..models.transformer_layers import Encoder
from .captioning import HEIGHT, STRIDE, Captioner, check_images

__all__ = ["PatchCaptioner"]


class PatchCaptioner(Captioner):
    """encode: images (B, 1, H, W) -> regions h (B, T, d_enc), T = W / 4 patches, and s_0 (B, d_hidden).

    A patch's H x 4 pixels are projected to d_enc and a learnt position vector is added; then ``n_layers`` pre-norm
    encoder layers (self-attention over the patches, then a feed-forward network). The decoder is chapter 4's,
    unchanged: it attends over the patches as the Captioner's decoder attends over its windows.
    """

    def __init__(self, n_layers: int = 2, n_heads: int = 4, d_enc: int = 64, d_ff: int = 128, **decoder) -> None:
        super().__init__(d_enc=d_enc, **decoder)
        del self.patch, self.project  # the windows' two projections: a patch has one of its own
        self.embed = nn.Linear(HEIGHT * STRIDE, d_enc)
        self.encoder = Encoder(n_layers, d_enc, n_heads, d_ff, norm_first=True) if n_layers else None

    def encode(self, images: Tensor) -> tuple[Tensor, Tensor]:
        check_images(images)
        patches = images[:, 0].unfold(2, STRIDE, STRIDE).transpose(1, 2).flatten(2)  # (B, T, H * 4)
        x = self.embed(patches) + self.position  # (B, T, d_enc)
        h = x if self.encoder is None else self.encoder(x)  # (B, T, d_enc): every patch has read every other
        return h, torch.tanh(self.init_state(h.mean(dim=1)))
