"""Views of a whole real model: every layer and head at once. Plotly and NumPy only.

They read a ModelTrace (attention_core.models) by duck typing: .layers (one AttentionTrace per
layer), .kv_head_of, .info. At 30 layers x 9 heads x 128² weights the maps alone would be 18 MB,
so the thumbnails are block-averaged (to at most THUMB cells a side, and to at most MOSAIC_CELLS
cells in all) and drawn as ONE heatmap (a mosaic with blank gaps), not 270 subplots: under 0.4 MB
and fast to paint.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_core.reading import merge_words
from attention_core.statistics import STATISTICS, without_first
from figures.fitting import pool
from figures.reading import statistic_grid_figure
from figures.style import DEFAULT_STYLE, MAP_PIXELS_MAX, TITLE_PAD, Figure, Style, figure, title_height

THUMB = 24  # thumbnails are at most THUMB x THUMB cells
MOSAIC_CELLS = 60_000  # and all of them together at most this many (30 x 9 maps -> 13 x 13 each, plus gaps)


def head_labels(model_trace) -> list[str]:
    """ "head 4 (kv 2)" where key/value heads are shared (grouped-query attention), else "head 4"."""
    grouped = len(set(model_trace.kv_head_of)) < len(model_trace.kv_head_of)
    return [
        f"head {head + 1} (kv {kv + 1})" if grouped else f"head {head + 1}"
        for head, kv in enumerate(model_trace.kv_head_of)
    ]


def layer_labels(model_trace) -> list[str]:
    return [f"layer {index + 1}" for index in range(len(model_trace.layers))]


def entropy_grid_figure(model_trace, style: Style = DEFAULT_STYLE) -> Figure:
    """Mean normalized entropy per layer (rows) and head (columns): dark = peaked head. The numbers are
    written in the cells where they fit (they do for 30 layers x 9 heads across the page)."""
    return statistic_grid_figure(
        model_trace.grid("normalized_entropy").numpy(),
        STATISTICS["normalized_entropy"],
        layer_labels(model_trace),
        head_labels(model_trace),
        f"0 = each row on one token, 1 = spread evenly; means over {model_trace.layers[0].averaged_rows_text}",
        style,
        title="Mean normalized entropy per layer and head",
    )


def thumbnail_mosaic(
    model_trace, size: int = THUMB, hide_first: bool = False, groups: list | None = None
) -> tuple[np.ndarray, int]:
    """All layers' and heads' weights, each block-averaged to t x t (t <= n, size) and scaled to its
    own maximum, tiled with one blank (NaN) row/column between maps. Returns (mosaic, t). `hide_first`: the
    first token's column blank and each row re-normalized over the others (statistics.without_first);
    `groups`: by words (reading.word_groups), each word's pieces merged (reading.merge_words)."""
    n = len(groups) if groups else len(model_trace.tokens)
    n_layers, heads = len(model_trace.layers), len(model_trace.kv_head_of)
    t = max(1, min(n, size, math.isqrt(MOSAIC_CELLS // (n_layers * heads)) - 1))  # - 1: the gap
    mosaic = np.full((n_layers * (t + 1) - 1, heads * (t + 1) - 1), np.nan, dtype=np.float32)
    for layer_index, layer in enumerate(model_trace.layers):
        weights = layer.weights.detach().cpu().double()  # heads x n x n
        pieces = weights.shape[-1]
        allowed = np.ones((pieces, pieces), dtype=bool) if layer.mask is None else layer.mask.cpu().numpy()
        if groups:  # a word sees a word where any of its pieces sees one of the other's
            weights = merge_words(weights, groups)
            allowed = merge_words(torch.from_numpy(allowed).double().unsqueeze(0), groups)[0].numpy() > 0
        if hide_first and n > 1:
            weights = without_first(weights)[0]
            allowed = allowed & (np.arange(n) > 0)[None, :]
        weights = weights.numpy()
        small, _, _ = pool(weights, allowed, limit=t)  # every head of the layer at once: heads x t x t
        peaks = np.nan_to_num(small).max(axis=(1, 2))  # weights are >= 0: a block with no allowed cell counts 0
        for head in range(heads):
            top, left = layer_index * (t + 1), head * (t + 1)
            mosaic[top : top + t, left : left + t] = small[head] / (peaks[head] or 1.0)
    return mosaic, t


def thumbnails_figure(
    model_trace, style: Style = DEFAULT_STYLE, size: int = THUMB, hide_first: bool = False, groups: list | None = None
) -> Figure:
    """Small attention maps of every layer x head, in one heatmap (see thumbnail_mosaic)."""
    mosaic, t = thumbnail_mosaic(model_trace, size, hide_first, groups)
    n_layers, heads = len(model_trace.layers), len(model_trace.kv_head_of)
    centres_y = [i * (t + 1) + (t - 1) / 2 for i in range(n_layers)]
    centres_x = [j * (t + 1) + (t - 1) / 2 for j in range(heads)]
    pooled = f", each averaged down to {t}x{t}" if t < (len(groups) if groups else len(model_trace.tokens)) else ""
    axis = {"tickmode": "array", "showgrid": False, "zeroline": False}
    hidden = ("; the first token hidden, rows re-normalized" if hide_first else "") + ("; by words" if groups else "")
    subtitle = f"rows = query, columns = key; each map scaled to its own maximum{pooled}{hidden}"
    layout = style.layout(
        title=style.title(f"Attention weights of all {n_layers} layers x {heads} heads", subtitle),
        # read normally up to 1,500 px; on a slide (smaller maps) no taller than a map and its title
        height=int(
            min(
                1500 if style.max_map_pixels >= MAP_PIXELS_MAX else style.max_map_pixels + 160,
                140 + n_layers * max(48, 3 * t),
            )
        ),
        # the title and its subtitle, then the head labels on top of the mosaic
        margin={
            "l": 10,
            "r": 10,
            "t": round(
                TITLE_PAD + title_height(style.font_size + 2, style.font_size - 2) + 14 + 1.3 * (style.font_size - 2)
            ),
            "b": 10,
        },
        plot_bgcolor="rgba(0,0,0,0)",
        yaxis={**axis, "tickvals": centres_y, "ticktext": layer_labels(model_trace), "autorange": "reversed"},
        xaxis={**axis, "tickvals": centres_x, "ticktext": head_labels(model_trace), "side": "top"},
    )
    layout["font"] = {**layout["font"], "size": style.font_size - 2}
    heat = dict(
        type="heatmap",
        z=mosaic,
        colorscale=style.colorscale(diverging=False),
        zmin=0.0,
        zmax=1.0,
        hoverinfo="skip",
        colorbar=style.colorbar(thickness=12, title={"text": "÷ map max"}),
    )
    return figure([heat], layout)


__all__ = ["entropy_grid_figure", "head_labels", "layer_labels", "thumbnail_mosaic", "thumbnails_figure"]
