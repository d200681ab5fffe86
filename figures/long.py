"""A long text's maps (attention_core/long_maps.py): one head's overview, at most 256 × 256 cells, each the maximum
(or the mean) of the block of weights it covers, with the pooling and the block's size said in its title, and
a log colour scale on request (a weight of 1e-4 beside a sink's 0.9 is white on a linear one)."""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_core.long_maps import CELLS, cell_size
from figures.heatmap import Panel, heatmaps
from figures.style import DEFAULT_STYLE, Figure, Style, Title, shape_text

LOG_FLOOR = 1e-6  # on the log scale, a weight below this (a hidden key's 0 among them) is drawn at it


def cell_labels(n: int, size: int, base: int = 0) -> list[str]:
    """Each cell's tokens, as positions counted from `base`: "7" for a cell of one token, "16–31" for sixteen."""
    labels = []
    for first in range(0, n, size):
        last = min(first + size, n) - 1
        labels.append(str(first + base) if first == last else f"{first + base}–{last + base}")
    return labels


def overview_figure(
    values: torch.Tensor,
    n: int,
    pool: str,
    where: str,
    log: bool = False,
    causal: bool = True,
    style: Style = DEFAULT_STYLE,
) -> Figure:
    """The overview of one head (`values`: long_maps.overview's cells) over n tokens; `where`: which model, layer
    and head, said under the title. In a causal model a cell whose every key comes after every query is hidden by
    the mask: drawn grey, as every map draws what a mask hides, not as a weight of 0."""
    size = cell_size(n, CELLS)
    side = math.ceil(n / size)
    if values.shape != (side, side):
        raise ValueError(f"an overview of {n:,} tokens has {side} cells a side; got {list(values.shape)}")
    z = values.double().cpu().numpy()
    if log:
        z = np.log10(np.maximum(z, LOG_FLOOR))
    pooled = "one weight a cell" if size == 1 else f"the {pool} of each {size}×{size} block of weights"
    title = Title("log₁₀ weights" if log else "weights", pooled, shape_text(n, n))
    labels = cell_labels(n, size, style.index_base)
    panel = Panel(
        z,
        title,
        where,
        row_labels=labels,
        col_labels=labels,
        x_title="key tokens",
        y_title="query tokens",
        diverging=False,
        allowed=np.tri(side, dtype=bool) if causal else None,
        zrange=(math.log10(LOG_FLOOR), 0.0) if log else (0.0, 1.0),
        colorbar=True,
        drawn_most=CELLS,
    )
    return heatmaps([panel], style)
