"""Every head at once: one n x n map per head as small multiples, and the heads' peakiness side by side."""

from __future__ import annotations

import math

import numpy as np

from attention_core.statistics import PEAKINESS
from figures.heatmap import _hover, axis_ticks, block_ranges, heatmap_traces, pool, tick_widths
from figures.stages import BY_KEY
from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, as_numpy, figure, title_height

GRID_PANEL_PIXELS = 240  # the height of one head's map
GRID_PANEL_MIN = 110  # ... and the least it is made to fit a slide (`tallest`)
GRID_COLUMNS = 4
GAP_X, GAP_Y = 0.04, 70  # between panels: a share of the width; pixels (room for the next row's title)
COLORBAR_ROOM = 70  # pixels right of the panels for the shared colour bar and its numbers


def multihead_grid(trace, stage: str = "weights", shared_scale: bool = True, style: Style = DEFAULT_STYLE,
                   tallest: int | None = None, heads: range | None = None) -> Figure:  # fmt: skip
    """One stage's [h, n, n] map (STAGES' `grid` field) for every head, as small multiples. The queries
    label the first column, the keys the bottom panel of each column (every k-th token where they would
    overlap); every hover names both tokens. With one colour scale, one colour bar speaks for every head;
    with a scale per head no single bar could, so the hover gives each value. `tallest`: the most pixels the
    figure may take (a slide's room); its maps are made shorter to fit, down to GRID_PANEL_MIN. `heads`: the
    heads drawn (a slide's page of them), on the colour scale of all of them."""
    field = BY_KEY[stage].grid
    if field is None:
        raise ValueError(f"stage {stage!r} has no map per head; choose one of scores, scaled_scores, mask, weights")
    n = trace.n_tokens
    heads = range(trace.n_heads) if heads is None else heads
    h = len(heads)
    cols = min(h, GRID_COLUMNS)
    rows = math.ceil(h / cols)
    maps = as_numpy(getattr(trace, field))
    # Scores exist for every pair; the mask applies from the masked scores on (as in the walkthrough).
    masked = field in ("masked_scores", "weights")
    allowed = None if trace.mask is None or not masked else trace.mask.cpu().numpy()
    diverging = field != "weights"
    label_font = max(9, style.font_size - 4)
    blocks = block_ranges(n)
    ticks = axis_ticks(trace.tokens, blocks, most=int(GRID_PANEL_PIXELS // (label_font * 1.4)))
    below = max(tick_widths(ticks, label_font)) * math.sin(math.pi / 4) + label_font + 10
    line = 1.3  # line height, in font sizes: title, subtitle and the first row's "head 1" above the maps
    # The title and its subtitle, then room for the first row's "head 1" above the maps.
    top = round(TITLE_PAD + title_height(style.font_size + 2, style.font_size - 2) + 12 + line * (style.font_size - 2))
    panel = GRID_PANEL_PIXELS
    if tallest is not None:  # a slide: the maps share what is left after the titles, the labels and the gaps
        panel = max(GRID_PANEL_MIN, min(panel, int((tallest - top - below - (rows - 1) * GAP_Y) / rows)))
        ticks = axis_ticks(trace.tokens, blocks, most=int(panel // (label_font * 1.4)))
    left = round(14 + max(tick_widths(ticks, label_font)))
    plot_height = rows * panel + (rows - 1) * GAP_Y
    height = round(top + plot_height + below)
    if shared_scale:
        finite = maps[np.isfinite(maps)] if allowed is None else maps[:, allowed]
        bound = float(np.abs(finite).max()) if finite.size else 1.0
        shared_range = (-bound, bound) if diverging else (0.0, 1.0)
    panel_width = (style.width - left - (COLORBAR_ROOM if shared_scale else 10)) / cols * (1 - GAP_X)
    cell = min(panel_width, panel) / min(n, len(blocks))

    traces, layout = [], {}
    for i, head in enumerate(heads):  # i: the place in the grid
        z, row_blocks, col_blocks = pool(maps[head], allowed)
        pooled = len(row_blocks) < n
        zrange = shared_range if shared_scale else _fit_range(z, diverging)
        hover = _hover(maps[head].shape, pooled, None, trace.tokens, trace.tokens, "query", "key", style.index_base)
        parts = heatmap_traces(
            z, diverging=diverging, zrange=zrange, hover=hover, numbers_font=None,
            colorbar=shared_scale and i == 0, cross_pixels=0.45 * cell, style=style,
        )  # fmt: skip
        suffix = "" if i == 0 else str(i + 1)
        for part in parts:  # named as its title: the keyboard walk and the chart's summary call it "head 2"
            traces.append({**part, "name": f"head {head + 1}", "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        row, col = divmod(i, cols)
        x0 = col / cols + (GAP_X / cols) / 2
        y_top = 1 - row * (panel + GAP_Y) / plot_height
        y_bottom = y_top - panel / plot_height
        last_in_column = i + cols >= h
        axis = {**ticks, "ticks": "", "showgrid": False, "zeroline": False, "tickfont": {"size": label_font},
                "automargin": False}  # fmt: skip
        layout[f"xaxis{suffix}"] = {
            **axis,
            "domain": [x0, x0 + (1 - GAP_X) / cols],
            "anchor": f"y{suffix}",
            "range": [-0.5, len(col_blocks) - 0.5],
            "showticklabels": last_in_column,
            "tickangle": -45,
        }
        layout[f"yaxis{suffix}"] = {
            **axis,
            "domain": [max(0.0, y_bottom), min(1.0, y_top)],
            "anchor": f"x{suffix}",
            "range": [len(row_blocks) - 0.5, -0.5],
            "showticklabels": col == 0,
        }
        layout.setdefault("annotations", []).append(
            {
                "text": f"head {head + 1}",
                "x": x0 + (1 - GAP_X) / cols / 2,
                "y": min(1.0, y_top),
                "xref": "paper",
                "yref": "paper",
                "yanchor": "bottom",
                "yshift": 4,
                "showarrow": False,
                "font": {"size": style.font_size - 2},
            }
        )
    scale_note = "one colour scale for all heads" if shared_scale else "a colour scale per head: hover for values"
    which = f"all {h} heads"
    if trace.n_heads == 1:  # not "all 1 heads", and one head's one scale is nothing to remark on
        scale_note, which = "", "head 1"
    if h < trace.n_heads:  # a page of them
        first, last = heads[0] + 1, heads[-1] + 1
        which = f"heads {first}–{last} of {trace.n_heads}" if h > 1 else f"head {first} of {trace.n_heads}"
    figure_layout = style.layout(
        **layout,
        title=style.title(f"{field.replace('_', ' ')} of {which}", scale_note),
        showlegend=False,
        height=height,
        margin={
            "l": left,
            "r": COLORBAR_ROOM if shared_scale else 10,
            "t": top,
            "b": round(below),
            "autoexpand": False,
        },
    )
    return figure(traces, figure_layout)


def _fit_range(z: np.ndarray, diverging: bool) -> tuple[float, float]:
    finite = z[np.isfinite(z)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    return (-bound, bound) if diverging else (0.0, max(bound, 1e-12))


def head_summary_figure(trace, style: Style = DEFAULT_STYLE) -> Figure:
    """Mean peakiness per head (the registry's statistics on a 0..1 scale): which heads focus, which spread out."""
    summary = trace.head_summary()
    heads = [f"head {s['head'] + 1}" for s in summary]
    line = 1.3 * style.font_size
    layout = style.layout(
        barmode="group",
        title=style.title("Peakiness per head", f"means over {trace.averaged_rows_text}"),
        yaxis={"range": [0, 1.05], "title": {"text": "mean over the rows"}},
        xaxis={},
        height=round(320 + 3 * line),
        # The legend sits under the bars, in the margin kept for it; the subtitle's line above them.
        margin={"l": 70, "r": 10, "t": round(TITLE_PAD + 20 + 2 * line), "b": round(30 + 2 * line)},
        legend={**style.base_layout()["legend"], "orientation": "h", "x": 0, "y": 0, "yref": "container",
                "yanchor": "bottom"},
    )  # fmt: skip
    bars = [  # the registry's peakiness statistics that share the 0..1 axis
        dict(type="bar", name=f"mean {stat.name} ({stat.focused} = focused)", x=heads,
             y=[s[f"mean_{stat.key}"] for s in summary])
        for stat in PEAKINESS
        if stat.top == 1.0
    ]  # fmt: skip
    return figure(bars, layout)
