"""Figures shared by the chapters: attention heatmaps and masks."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch


def attention_heatmap(
    weights: torch.Tensor,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    annotate: bool = True,
    cmap: str = "viridis",
    colorbar: bool = True,
) -> plt.Axes:
    """Draw a (T_q, T_k) matrix of attention weights: row i is what query i attends to. Without ``colorbar``
    (grids of many maps, which share the scale 0 to 1) no colour bar is drawn beside it."""
    w = torch.as_tensor(weights).detach().cpu().double()
    if w.dim() != 2:
        raise ValueError(f"attention_heatmap draws one (T_q, T_k) matrix, got shape {tuple(w.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * w.shape[1] + 1.5, 0.6 * w.shape[0] + 1))
    image = ax.imshow(
        w.numpy(), cmap=cmap, vmin=0.0, vmax=max(1.0, float(w.nan_to_num().max())) if w.dtype != torch.bool else 1
    )
    # Without names, the positions are the labels: matplotlib writes any label with str(), its stubs ask for strings.
    ax.set_xticks(
        range(w.shape[1]),
        labels=list(keys) if keys is not None else range(w.shape[1]),  # type: ignore[arg-type]
        rotation=45 if keys is not None else 0,
    )
    ax.set_yticks(
        range(w.shape[0]),
        labels=list(queries) if queries is not None else range(w.shape[0]),  # type: ignore[arg-type]
    )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if annotate and w.numel() <= 100:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                value = w[i, j].item()
                ax.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if value < 0.6 else "black",
                )
    if title:
        ax.set_title(title)
    if colorbar:
        plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def mask_image(
    mask: torch.Tensor, ax: plt.Axes | None = None, title: str | None = None, legend: bool = True
) -> plt.Axes:
    """Draw a boolean (T_q, T_k) mask: filled where attending is allowed, with a legend that says so (below the
    axes; ``legend=False`` leaves it out, for all but one panel of a row of masks)."""
    m = torch.as_tensor(mask).detach().cpu()
    if m.dim() != 2 or m.dtype != torch.bool:
        raise ValueError(f"mask_image draws one boolean (T_q, T_k) mask, got {m.dtype} of shape {tuple(m.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(3, 3.4))
    cmap = plt.get_cmap("Blues")
    ax.imshow(m.numpy(), cmap=cmap, vmin=0, vmax=1)
    ax.set_xticks(range(m.shape[1]))
    ax.set_yticks(range(m.shape[0]))
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    if title:
        ax.set_title(title)
    if legend:
        patches = [
            Patch(facecolor=cmap(1.0), edgecolor="grey", label="may attend (True)"),
            Patch(facecolor=cmap(0.0), edgecolor="grey", label="hidden (False)"),
        ]
        ax.legend(handles=patches, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8, frameon=False)
    return ax
