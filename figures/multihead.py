"""Every head at once: one n x n map per head as small multiples, and the heads' peakiness side by side."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attention_core.statistics import PEAKINESS
from figures.fitting import axis_ticks, block_ranges, pool, tick_widths
from figures.map_traces import heatmap_traces, hover_spec
from figures.stages import BY_KEY
from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, as_numpy, figure, title_height

GRID_PANEL_PIXELS = 240  # the height of one head's map
GRID_PANEL_MIN = 110  # ... and the least it is made to fit a slide (`tallest`)
GRID_COLUMNS = 4
GAP_X, GAP_Y = 0.04, 70  # between panels: a share of the width; pixels (room for the next row's title)
COLORBAR_ROOM = 70  # pixels right of the panels for the shared colour bar and its numbers


def multihead_grid(
    trace,
    stage: str = "weights",
    shared_scale: bool = True,
    style: Style = DEFAULT_STYLE,
    tallest: int | None = None,
    heads: range | None = None,
) -> Figure:
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
    heads = range(trace.heads) if heads is None else heads
    h = len(heads)
    cols = min(h, GRID_COLUMNS)
    rows = math.ceil(h / cols)
    maps = as_numpy(getattr(trace, field))
    # Scores exist for every pair; the mask applies from the masked scores on (as in the walkthrough).
    masked = field in ("masked_scores", "weights")
    allowed = None if trace.mask is None or not masked else trace.mask.cpu().numpy()
    diverging = field != "weights" or trace.signed  # weights are ≥ 0 but differential attention's (A₁ − λ·A₂)
    label_font = max(9, style.font_size - 4)
    blocks = block_ranges(n)
    ticks = axis_ticks(trace.tokens, blocks, most=int(GRID_PANEL_PIXELS // (label_font * 1.4)))
    below = max(tick_widths(ticks, label_font)) * math.sin(math.pi / 4) + label_font + 10
    # The title and its subtitle, then room for the first row's "head 1" above the maps (a line: 1.3 font sizes).
    top = round(TITLE_PAD + title_height(style.font_size + 2, style.font_size - 2) + 12 + 1.3 * (style.font_size - 2))
    panel = GRID_PANEL_PIXELS
    if tallest is not None:  # a slide: the maps share what is left after the titles, the labels and the gaps
        panel = max(GRID_PANEL_MIN, min(panel, int((tallest - top - below - (rows - 1) * GAP_Y) / rows)))
        ticks = axis_ticks(trace.tokens, blocks, most=int(panel // (label_font * 1.4)))
    left = round(14 + max(tick_widths(ticks, label_font)))
    plot_height = rows * panel + (rows - 1) * GAP_Y
    height = round(top + plot_height + below)
    shared_range = _shared_range(maps, allowed, diverging) if shared_scale else None
    panel_width = (style.width - left - (COLORBAR_ROOM if shared_scale else 10)) / cols * (1 - GAP_X)
    cell = min(panel_width, panel) / min(n, len(blocks))

    traces, layout = [], {}
    for i, head in enumerate(heads):  # i: the place in the grid
        z, row_blocks, col_blocks = pool(maps[head], allowed)
        pooled = len(row_blocks) < n
        zrange = shared_range if shared_scale else _fit_range(z, diverging)
        hover = hover_spec(maps[head].shape, pooled, None, trace.tokens, trace.tokens, "query", "key", style.index_base)
        parts = heatmap_traces(
            z,
            diverging=diverging,
            zrange=zrange,
            hover=hover,
            numbers_font=None,
            colorbar=shared_scale and i == 0,
            cross_pixels=0.45 * cell,
            style=style,
        )
        suffix = "" if i == 0 else str(i + 1)
        for part in parts:  # named as its title: the keyboard walk and the chart's summary call it "head 2"
            traces.append({**part, "name": f"head {head + 1}", "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        place = GridPlace(i, cols, h, panel, plot_height)
        layout |= panel_axes(place, suffix, ticks, label_font, len(row_blocks), len(col_blocks))
        layout.setdefault("annotations", []).append(place.title(f"head {head + 1}", style.font_size - 2))
    which, scale_note = grid_title(trace.heads, heads, shared_scale)
    figure_layout = style.layout(
        **layout,
        title=style.title(f"{field.replace('_', ' ')} of {which}", scale_note),
        showlegend=False,
        height=height,
        margin=dict(l=left, r=COLORBAR_ROOM if shared_scale else 10, t=top, b=round(below), autoexpand=False),
    )
    return figure(traces, figure_layout)


@dataclasses.dataclass(frozen=True)
class GridPlace:
    """Where the `i`-th map of `h` goes in a grid of `cols` columns of maps `panel` pixels tall."""

    i: int
    cols: int
    h: int
    panel: float
    plot_height: float  # the maps and the gaps between them, in pixels

    @property
    def row_col(self) -> tuple[int, int]:
        return divmod(self.i, self.cols)

    @property
    def x0(self) -> float:
        return self.row_col[1] / self.cols + (GAP_X / self.cols) / 2

    @property
    def y_top(self) -> float:
        return 1 - self.row_col[0] * (self.panel + GAP_Y) / self.plot_height

    def title(self, text: str, size: int) -> dict:
        """The map's title above it ("head 2")."""
        return {
            "text": text,
            "x": self.x0 + (1 - GAP_X) / self.cols / 2,
            "y": min(1.0, self.y_top),
            "xref": "paper",
            "yref": "paper",
            "yanchor": "bottom",
            "yshift": 4,
            "showarrow": False,
            "font": {"size": size},
        }


def panel_axes(place: GridPlace, suffix: str, ticks: dict, label_font: int, rows: int, cols: int) -> dict:
    """One map's two axes: the keys under the bottom map of each column, the queries left of the first column."""
    y_bottom = place.y_top - place.panel / place.plot_height
    axis = {
        **ticks,
        "ticks": "",
        "showgrid": False,
        "zeroline": False,
        "tickfont": {"size": label_font},
        "automargin": False,
    }
    return {
        f"xaxis{suffix}": {
            **axis,
            "domain": [place.x0, place.x0 + (1 - GAP_X) / place.cols],
            "anchor": f"y{suffix}",
            "range": [-0.5, cols - 0.5],
            "showticklabels": place.i + place.cols >= place.h,  # the last in its column
            "tickangle": -45,
        },
        f"yaxis{suffix}": {
            **axis,
            "domain": [max(0.0, y_bottom), min(1.0, place.y_top)],
            "anchor": f"x{suffix}",
            "range": [rows - 0.5, -0.5],
            "showticklabels": place.row_col[1] == 0,
        },
    }


def grid_title(count: int, heads: range, shared_scale: bool) -> tuple[str, str]:
    """Which heads the grid shows, and what its colour scale means."""
    h = len(heads)
    scale_note = "one colour scale for all heads" if shared_scale else "a colour scale per head: hover for values"
    which = f"all {h} heads"
    if count == 1:  # not "all 1 heads", and one head's one scale is nothing to remark on
        scale_note, which = "", "head 1"
    if h < count:  # a page of them
        first, last = heads[0] + 1, heads[-1] + 1
        which = f"heads {first}–{last} of {count}" if h > 1 else f"head {first} of {count}"
    return which, scale_note


def _shared_range(maps: np.ndarray, allowed: np.ndarray | None, diverging: bool) -> tuple[float, float]:
    """One colour scale for every head: their largest size where a query may look (weights: 0 to 1)."""
    finite = maps[np.isfinite(maps)] if allowed is None else maps[:, allowed]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    return (-bound, bound) if diverging else (0.0, 1.0)


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
        legend={
            **style.base_layout()["legend"],
            "orientation": "h",
            "x": 0,
            "y": 0,
            "yref": "container",
            "yanchor": "bottom",
        },
    )
    bars = [  # the registry's peakiness statistics that share the 0..1 axis
        dict(
            type="bar",
            name=f"mean {stat.name} ({stat.focused} = focused)",
            x=heads,
            y=[s[f"mean_{stat.key}"] for s in summary],
        )
        for stat in PEAKINESS
        if stat.top == 1.0
    ]
    return figure(bars, layout)
