"""The Plotly traces of one (already pooled) map: its values, the grey of masked cells with a ✕ on each, and its
hover. Plotly only; no Streamlit."""

from __future__ import annotations

import numpy as np

from figures.fitting import COLORBAR_GAP, COLORBAR_THICKNESS, CROSS_MIN_PIXELS, HOVER_TEXT_MAX
from figures.style import (
    DEFAULT_STYLE,
    MASKED_CROSS,
    MASKED_GREY,
    Style,
    escape,
)


def colour_range(z: np.ndarray, diverging: bool) -> tuple[float, float]:
    finite = z[np.isfinite(z)]
    if finite.size == 0:
        return (0.0, 1.0)
    if diverging:
        bound = float(np.abs(finite).max()) or 1.0
        return (-bound, bound)
    return (float(min(finite.min(), 0.0)), float(finite.max()) or 1.0)


def heatmap_traces(
    z: np.ndarray,
    *,
    diverging: bool,
    zrange: tuple[float, float],
    hover: dict,
    numbers_font: int | None,
    colorbar: bool,
    cross_pixels: float,
    style: Style = DEFAULT_STYLE,
    colorbar_place: dict | None = None,
    name: str = "",
    shown: dict | None = None,
) -> list[dict]:
    """The traces of one (already pooled) map: the values (named `name`), the grey masked cells (NaN where
    every cell of a block is masked) and a ✕ on each of them. Used by heatmaps() and by the multi-head grid.
    colorbar_place: where the colour bar goes (paper x, y, len), by default right of the whole figure.
    shown: the panel's title and subtitle as drawn (fitted to its width), kept in the value trace's `meta`
    so that a reader of the figure (a test, a benchmark) finds the panel and what it says."""
    x, y = np.arange(z.shape[1]), np.arange(z.shape[0])
    gap = 1 if max(z.shape) <= 48 else 0
    heat = {
        "type": "heatmap",
        "z": z.astype(np.float32),  # float32 ships as compact base64
        "x": x,
        "y": y,
        "colorscale": style.colorscale(diverging),
        "zmin": zrange[0],
        "zmax": zrange[1],
        "zmid": 0.0 if diverging else None,
        "hoverongaps": False,
        "showscale": colorbar,
        "colorbar": style.colorbar(
            thickness=COLORBAR_THICKNESS,
            xanchor="left",
            **(colorbar_place or {"x": 1.0, "xpad": COLORBAR_GAP}),
        ),
        "name": name,
        "meta": shown or {},
        "xgap": gap,
        "ygap": gap,
        **hover,
    }
    if numbers_font:
        heat["texttemplate"] = "%{z:.2f}"
        heat["textfont"] = {"size": numbers_font}
    return [heat, *masked_traces(np.isnan(z), gap, cross_pixels)]


def masked_traces(masked: np.ndarray, gap: int, cross_pixels: float) -> list[dict]:
    """The grey of the masked cells, and a ✕ on each where a cell is big enough to hold one (none if nothing is
    masked)."""
    if not masked.any():
        return []
    x, y = np.arange(masked.shape[1]), np.arange(masked.shape[0])
    outline = masked_outline(masked) if gap == 0 and cross_pixels < CROSS_MIN_PIXELS else None
    traces = [
        outline
        or {
            "type": "heatmap",
            "z": np.where(masked, 1.0, np.nan).astype(np.float32),
            "x": x,
            "y": y,
            "colorscale": [[0, MASKED_GREY], [1, MASKED_GREY]],
            "showscale": False,
            "hovertemplate": "masked: this query may not look at this key<extra></extra>",
            "xgap": gap,
            "ygap": gap,
            "hoverongaps": False,
        }
    ]
    if cross_pixels >= CROSS_MIN_PIXELS:
        rows, cols = np.nonzero(masked)
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": cols.astype(np.int32),
                "y": rows.astype(np.int32),
                "marker": {
                    "symbol": "x-thin",
                    "size": round(min(cross_pixels, 16)),
                    "line": {"width": 2, "color": MASKED_CROSS},
                },
                "hoverinfo": "skip",
                "showlegend": False,
            }
        )
    return traces


def masked_outline(masked: np.ndarray) -> dict | None:
    """A large map's masked cells as one grey outline: a rectangle for each run of masked cells in a row, filled,
    where that is far smaller than a second map of their own. A causal map of 256 × 256 cells is 255 rectangles,
    about 20 kB of JSON, against 350 kB of numbers that the browser also drew as a second heatmap (a long text's
    overview changes 20-35 ms sooner after a key, docs/benchmarks.md). None where the runs are many (a dilated
    mask's every other key): the second map is then the smaller."""
    steps = np.diff(np.pad(masked, ((0, 0), (1, 1))).astype(np.int8), axis=1)  # +1 where a run starts, -1 past it
    starts, stops = np.argwhere(steps == 1), np.argwhere(steps == -1)[:, 1]  # row by row, in order
    if len(starts) > 2 * masked.shape[0]:
        return None
    rows, left, right = starts[:, 0], starts[:, 1] - 0.5, stops - 0.5
    top, bottom = rows - 0.5, rows + 0.5
    corners_x = np.stack([left, right, right, left, left], axis=1).tolist()  # each rectangle closed on its corner
    corners_y = np.stack([top, top, bottom, bottom, top], axis=1).tolist()
    xs = [v for corners in corners_x for v in (*corners, None)]  # None: a gap, so each is a shape of its own
    ys = [v for corners in corners_y for v in (*corners, None)]
    return {
        "type": "scatter",
        "mode": "lines",
        "x": xs[:-1],
        "y": ys[:-1],
        "fill": "toself",
        "fillcolor": MASKED_GREY,
        "line": {"width": 0, "color": MASKED_GREY},
        "hoveron": "fills",
        "hoverinfo": "text",
        "text": "masked: this query may not look at this key",
        "showlegend": False,
    }


def hover_spec(shape, pooled: bool, hover_text, row_labels, col_labels, y_name: str, x_name: str, base: int) -> dict:
    small = not pooled and max(shape) <= HOVER_TEXT_MAX
    if small and hover_text is not None:
        return {"text": hover_text, "hovertemplate": "%{text}<extra></extra>"}
    if small:
        rl = [escape(t) for t in row_labels] if row_labels is not None else [str(i + base) for i in range(shape[0])]
        cl = [escape(t) for t in col_labels] if col_labels is not None else [str(j + base) for j in range(shape[1])]
        text = [[f"{y_name} {rl[i]} · {x_name} {cl[j]}" for j in range(shape[1])] for i in range(shape[0])]
        return {"text": text, "hovertemplate": "%{text}<br>value = %{z:.4f}<extra></extra>"}
    if pooled:
        return {"hovertemplate": f"{y_name} block %{{y}} · {x_name} block %{{x}}<br>mean = %{{z:.4f}}<extra></extra>"}
    return {"hovertemplate": f"{y_name} #%{{y}} · {x_name} #%{{x}}<br>value = %{{z:.4f}}<extra></extra>"}
