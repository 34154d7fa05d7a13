"""Attention beyond text: captioning images of digits with a GRU that attends over image regions (chapter 4).

A caption is a translation from an image {cite}`xu2015show`: the encoder turns the image into a row of region
features h_j, one per window of 12 columns centred on each strip of 4, and chapter 4's attention decoder (reused
unchanged, so that the only new idea is what it attends over) scores them with the same
e_tj = v^T tanh(W s_{t-1} + U h_j) that it uses over the words of a sentence. The task is synthetic and made by
code: 2 to 4 digits drawn from 5x7 bitmap glyphs with random size, slant, spacing, stroke width and noise,
captioned by their digits ("3 7 1").

Shapes: B batch, H x W image (16 x 64), T = W / 4 regions, L caption length (digits and <eos>), V = 12 tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..models.bahdanau import AttentionDecoderStep

__all__ = [
    "BOS",
    "EOS",
    "GLYPHS",
    "CaptionData",
    "CaptionRun",
    "Captioner",
    "attention_on_digit_rate",
    "caption_accuracy",
    "check_images",
    "decode",
    "glyph_bitmaps",
    "make_captions",
    "train_captioner",
]

HEIGHT, WIDTH, STRIDE = 16, 64, 4  # image size; region j is centred on the strip of columns 4j to 4j + 3
EOS, BOS = 10, 11  # token ids: the digits are 0-9
# 5x7 bitmaps, one string per row, '#' for ink.
GLYPHS = {
    "0": (" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "),
    "1": ("  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "),
    "2": (" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"),
    "3": ("#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "),
    "4": ("   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "),
    "5": ("#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "),
    "6": ("  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "),
    "7": ("#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "),
    "8": (" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "),
    "9": (" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "),
}


def glyph_bitmaps() -> Tensor:
    """The ten glyphs as a (10, 7, 5) boolean tensor, digit d at index d."""
    return torch.tensor([[[ch == "#" for ch in row] for row in GLYPHS[str(d)]] for d in range(10)])


@dataclass
class CaptionData:
    """images (B, 1, H, W) in [0, 1]; captions such as "3 7 1"; spans (B, 4, 2): the first and last column with
    ink of digit t of image b, NaN where an image has fewer than 4 digits."""

    images: Tensor
    captions: list[str]
    spans: Tensor

    def targets(self) -> Tensor:
        """(B, L) token ids: the digits then <eos>, padded with -100 (which cross_entropy ignores)."""
        L = max(len(c.split()) for c in self.captions) + 1
        out = torch.full((len(self.captions), L), -100, dtype=torch.long)
        for b, caption in enumerate(self.captions):
            ids = [int(d) for d in caption.split()] + [EOS]
            out[b, : len(ids)] = torch.tensor(ids)
        return out


def make_captions(n: int, seed: int, min_digits: int = 2, max_digits: int = 4, noise: float = 0.1) -> CaptionData:
    """n images of min_digits to max_digits digits in a row, the same for the same arguments.

    Each ink pixel of a glyph becomes a Gaussian dot; each image has its own stroke width, each digit its own
    scale, slant and height, the gaps between digits are random and every dot is jittered, so that a digit's
    place and shape must be found in the pixels, not read off a fixed grid. All images are drawn at once, in
    float32 whatever the default dtype, so that a seed gives the same images everywhere.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 1 <= min_digits <= max_digits <= 4:
        raise ValueError(
            f"need 1 <= min_digits <= max_digits <= 4 (a 64-pixel row holds 4), got {min_digits}, {max_digits}"
        )
    g = torch.Generator().manual_seed(seed)

    def uniform(lo: float, hi: float, *shape: int) -> Tensor:
        return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float32)

    count = torch.randint(min_digits, max_digits + 1, (n,), generator=g)  # (B,) digits per image
    real = torch.arange(4) < count[:, None]  # (B, 4): which of the 4 slots hold a digit
    digits = torch.randint(10, (n, 4), generator=g)
    sx, sy, slant = uniform(1.4, 2.0, n, 4), uniform(1.5, 1.9, n, 4), uniform(-0.3, 0.3, n, 4)  # pixels per glyph cell
    sigma = uniform(0.55, 0.85, n, 1)  # (B, 1) stroke width
    widths = (4 * sx + 2 * sigma) * real  # (B, 4)
    free = WIDTH - 2 - widths.sum(1, keepdim=True) - 2 * (count[:, None] - 1)  # room left beside 2-pixel gaps
    cuts = uniform(0, 1, n, 4).masked_fill(~real, 1.0).sort(dim=1).values * free  # (B, 4) space left of each
    left = 1 + sigma + cuts + (widths + 2).cumsum(1) - (widths + 2)  # (B, 4): the left edge of each glyph
    top = 1.5 + (HEIGHT - 3 - 6 * sy) * uniform(0, 1, n, 4)  # (B, 4)
    bitmaps = glyph_bitmaps().flatten(1)  # (10, 35)
    r, c = torch.arange(35) // 5, torch.arange(35) % 5  # each glyph cell's row and column
    ys = top[..., None] + r * sy[..., None]  # (B, 4, 35)
    xs = left[..., None] + c * sx[..., None] + slant[..., None] * (3 - r)
    ys = ys.flatten(1) + 0.3 * torch.randn(n, 140, generator=g, dtype=torch.float32)  # (B, 140): every dot jittered
    xs = xs.flatten(1) + 0.3 * torch.randn(n, 140, generator=g, dtype=torch.float32)
    ink_cells = (bitmaps[digits] & real[..., None]).flatten(1)  # (B, 140): the cells with ink
    # Keep only the cells with ink (fewer than half), moved to the front: N columns, the rest padding.
    keep = ink_cells.float().argsort(dim=1, descending=True, stable=True)[:, : int(ink_cells.sum(1).max())]
    ys, xs, present = ys.gather(1, keep), xs.gather(1, keep), ink_cells.gather(1, keep).float()  # (B, N)
    # A dot is a Gaussian exp(-(dy^2 + dx^2) / 2 sigma^2) = gy(y) gx(x), so the sum of all the dots of an image
    # is one matrix product (H, N) @ (N, W); sums above 1, where dots overlap, are clipped to full ink.
    ink = torch.empty(n, HEIGHT, WIDTH, dtype=torch.float32)
    for i in range(0, n, 256):  # 256 images at a time, whose terms stay in the cache: twice as fast as all at once
        part, two_var = slice(i, i + 256), 2 * sigma[i : i + 256, None] ** 2  # (b, 1, 1)
        gy = torch.exp(-((torch.arange(HEIGHT)[:, None] - ys[part, None]) ** 2) / two_var) * present[part, None]
        gx = torch.exp(-((torch.arange(WIDTH)[:, None] - xs[part, None]) ** 2) / two_var)  # (b, W, N)
        ink[part] = gy @ gx.transpose(1, 2)  # (b, H, W)
    images = (ink + noise * torch.randn(ink.shape, generator=g, dtype=torch.float32)).clamp(0, 1)[:, None]
    reach = 3 * slant.abs() + sigma  # how far slant and stroke carry the ink beyond the glyph's cells
    spans = torch.stack([(left - reach).clamp(min=0), (left + 4 * sx + reach).clamp(max=WIDTH - 1)], dim=-1)
    spans[~real] = float("nan")
    captions = [" ".join(str(d) for d in row[:k]) for row, k in zip(digits.tolist(), count.tolist())]
    return CaptionData(images, captions, spans)


def check_images(images: Tensor) -> None:
    """Refuse anything but a batch of the task's images, (B, 1, HEIGHT, WIDTH)."""
    if images.dim() != 4 or tuple(images.shape[1:]) != (1, HEIGHT, WIDTH):
        raise ValueError(f"images must have shape (B, 1, {HEIGHT}, {WIDTH}), got {tuple(images.shape)}")


class Captioner(nn.Module):
    """An encoder of image regions and chapter 4's attention decoder.

    encode: images (B, 1, H, W) -> regions h (B, T, d_enc) and the first decoder state s_0 (B, d_hidden).
    Region j is the window of all H rows and the 12 columns 4j - 4 to 4j + 7, centred on its strip of 4: wide
    enough to hold a whole digit (6 to 10 pixels) wherever it sits. A linear projection of the window's H x 12
    pixels, a ReLU and a second projection make its vector. The projections are the same for every window, so a
    learnt position vector is added to each region: without it the decoder could not ask for "the region to the
    right of the last one".
    """

    def __init__(self, d_enc: int = 64, d_hidden: int = 64, d_att: int = 32, d_emb: int = 16, d_patch: int = 96):
        super().__init__()
        self.patch = nn.Linear(HEIGHT * 3 * STRIDE, d_patch)
        self.project = nn.Linear(d_patch, d_enc)
        self.position = nn.Parameter(0.1 * torch.randn(WIDTH // STRIDE, d_enc))
        self.init_state = nn.Linear(d_enc, d_hidden)
        self.decoder = AttentionDecoderStep(12, d_emb, d_hidden, d_enc, d_att)

    def encode(self, images: Tensor) -> tuple[Tensor, Tensor]:
        check_images(images)
        windows = F.pad(images[:, 0], (STRIDE, STRIDE)).unfold(2, 3 * STRIDE, STRIDE)  # (B, H, T, 12)
        x = F.relu(self.patch(windows.transpose(1, 2).flatten(2)))  # (B, T, d_patch): one row per window
        h = torch.tanh(self.project(x) + self.position)  # (B, T, d_enc)
        return h, torch.tanh(self.init_state(h.mean(dim=1)))  # as in Xu et al.: s_0 from the mean region

    def forward(self, images: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced logits (B, L, V) and attention weights (B, L, T); targets (B, L) padded with -100."""
        h, s = self.encode(images)
        keys = self.decoder.U(h)  # (B, T, A): the same at every step
        # The inputs are <bos> and the targets shifted right; padding becomes 0, its loss is ignored anyway.
        y_prev = torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1].clamp(min=0)], dim=1)
        logits, weights = [], []
        for t in range(targets.shape[1]):
            step_logits, s, w = self.decoder(y_prev[:, t], s, h, None, keys)
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, dim=1), torch.stack(weights, dim=1)

    @torch.no_grad()
    def generate(self, images: Tensor, max_len: int = 5) -> tuple[Tensor, Tensor]:
        """Greedy tokens (B, max_len) and the weights (B, max_len, T) of every step; steps after <eos> run on."""
        h, s = self.encode(images)
        keys, y = self.decoder.U(h), torch.full((images.shape[0],), BOS, dtype=torch.long)
        tokens, weights = [], []
        for _ in range(max_len):
            logits, s, w = self.decoder(y, s, h, None, keys)
            y = logits.argmax(dim=-1)
            tokens.append(y)
            weights.append(w)
        return torch.stack(tokens, dim=1), torch.stack(weights, dim=1)


def decode(tokens: Tensor) -> list[str]:
    """Token rows (B, L) to captions: the digits before the first <eos>, separated by spaces."""
    out = []
    for row in tokens.tolist():
        digits = row[: row.index(EOS)] if EOS in row else row
        out.append(" ".join(str(d) if d < 10 else "?" for d in digits))
    return out


@dataclass
class CaptionRun:
    """What train_captioner returns: the trained model (in eval mode), its loss curve and its training time."""

    model: Captioner
    losses: list[float] = field(default_factory=list)  # the training loss of every step
    seconds: float = 0.0


def train_captioner(
    seed: int = 0,
    steps: int = 600,
    batch_size: int = 64,
    lr: float = 1e-2,
    n_train: int = 4000,
    threads: int = 1,
    build: Callable[[], Captioner] = Captioner,
) -> CaptionRun:
    """Train a Captioner (or what ``build`` makes: another encoder, the same decoder) with Adam on n_train images
    (seed `seed`) in float32 on `threads` CPU threads.

    Deterministic given its arguments: it fixes the dtype, the thread count and the random seed itself, and
    puts back the caller's dtype and thread count when done.
    """
    if steps < 1 or batch_size < 1 or threads < 1:
        raise ValueError(f"steps, batch_size and threads must be positive, got {steps}, {batch_size}, {threads}")
    dtype, old_threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(threads)
    try:
        data = make_captions(n_train, seed)
        targets = data.targets()
        torch.manual_seed(seed)
        model = build()
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)  # down to 0
        order, run, start = torch.Generator().manual_seed(seed), CaptionRun(model), time.perf_counter()
        for _ in range(steps):
            idx = torch.randint(n_train, (batch_size,), generator=order)
            logits, _ = model(data.images[idx], targets[idx])
            loss = F.cross_entropy(logits.flatten(0, 1), targets[idx].flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            run.losses.append(loss.item())
        run.seconds = time.perf_counter() - start
    finally:
        torch.set_default_dtype(dtype)
        torch.set_num_threads(old_threads)
    model.eval()
    return run


def caption_accuracy(model: Captioner, data: CaptionData) -> float:
    """The share of images whose greedy caption equals the true one exactly."""
    tokens, _ = model.generate(data.images.to(next(model.parameters()).dtype))
    return sum(p == c for p, c in zip(decode(tokens), data.captions)) / len(data.captions)


def attention_on_digit_rate(model: Captioner, data: CaptionData) -> float:
    """How often step t's most-attended region lies over digit t, over every digit of every image.

    Region j covers columns 4j to 4j + 3; it lies over digit t when its centre, column 4j + 1.5, falls within the
    digit's ink span. The weights are the greedy decoder's own, so a caption cut short counts as a miss.
    """
    tokens, weights = model.generate(data.images.to(next(model.parameters()).dtype))  # (B, L), (B, L, T)
    written = torch.tensor([len(c.split()) for c in decode(tokens)])  # (B,) steps before the first <eos>
    centre = STRIDE * weights[:, :4].argmax(dim=-1) + (STRIDE - 1) / 2  # (B, 4) columns
    real = ~data.spans[..., 0].isnan()  # (B, 4)
    hit = (data.spans[..., 0] <= centre) & (centre <= data.spans[..., 1]) & (torch.arange(4) < written[:, None])
    return float((hit & real).sum() / real.sum())
