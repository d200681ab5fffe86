"""One heatmap builder that every view uses. Plotly only; no Streamlit.

Three Plotly pitfalls are handled here once:
- Equal categorical labels merge ("the cat saw the dog" would lose a row), so the axes are
  integer positions and the tokens are tick text.
- Labels and hovers parse a subset of HTML, so every token is escaped ("<b>x</b>" stays text).
- Payload grows with n², so maps larger than MAX_DRAWN are block-averaged for drawing
  (exports keep the exact numbers) and per-cell hover text is only built for small maps.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

MAX_DRAWN = 128  # a map with more rows or columns is block-averaged down to this for drawing
NUMBERS_MAX = 16  # numbers are written in the cells up to this many rows and columns
HOVER_TEXT_MAX = 64  # per-cell hover text (tokens, arithmetic) up to this size
TICKS_MAX = 40  # at most this many tick labels per axis; past it every k-th (hover gives the position)
# Colour-blind-safe scales (ColorBrewer RdBu is diverging and safe; cividis was designed for it).
DIVERGING = "RdBu_r"
SEQUENTIAL = "Cividis"
MASKED_GREY = "rgba(150, 150, 150, 0.55)"


def escape(label: str) -> str:
    """Make a token safe to show as Plotly text: "<b>" is drawn as the four characters <b>."""
    return html.escape(str(label), quote=False)


def block_ranges(size: int, limit: int = MAX_DRAWN) -> list[tuple[int, int]]:
    """Split range(size) into at most `limit` contiguous blocks [(start, stop), ...]."""
    blocks = min(size, limit)
    edges = np.linspace(0, size, blocks + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def pool(matrix: np.ndarray, allowed: np.ndarray | None = None, limit: int = MAX_DRAWN):
    """Block-average a 2-D matrix to at most limit x limit, ignoring cells that are not allowed.

    Returns (pooled values with NaN where a block has no allowed cell, row blocks, column blocks).
    """
    rows, cols = block_ranges(matrix.shape[0], limit), block_ranges(matrix.shape[1], limit)
    ok = np.ones(matrix.shape, dtype=bool) if allowed is None else allowed
    values = np.where(ok, matrix, 0.0).astype(np.float64)
    if len(rows) == matrix.shape[0] and len(cols) == matrix.shape[1]:
        return np.where(ok, matrix, np.nan), rows, cols
    row_starts = [a for a, _ in rows]
    col_starts = [a for a, _ in cols]
    sums = np.add.reduceat(np.add.reduceat(values, row_starts, axis=0), col_starts, axis=1)
    counts = np.add.reduceat(np.add.reduceat(ok.astype(np.float64), row_starts, axis=0), col_starts, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return pooled, rows, cols


def _tick_text(labels, blocks) -> list[str]:
    if labels is None:
        return [str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b in blocks]
    if len(blocks) == len(labels):
        return [escape(t) for t in labels]
    return [f"{escape(labels[a])} ({a}–{b - 1})" for a, b in blocks]


def axis_ticks(labels, blocks, pooled: bool) -> dict:
    """Tick positions and text for one axis. Past TICKS_MAX labels only every k-th token is written:
    a browser spends ~0.3 s laying out 128 rotated labels per chart, and they overlap anyway."""
    if labels is None and not pooled:
        return {}
    text = _tick_text(labels, blocks)
    stride = math.ceil(len(text) / TICKS_MAX) if len(text) > TICKS_MAX else 1
    positions = list(range(0, len(text), stride))
    return {"tickvals": positions, "ticktext": [text[i] for i in positions]}


def heatmap(
    matrix,
    *,
    title: str,
    row_labels=None,
    col_labels=None,
    x_title: str = "",
    y_title: str = "",
    diverging: bool = True,
    allowed=None,
    show_numbers: bool = True,
    hover_text=None,
    zrange: tuple[float, float] | None = None,
    font_size: int = 16,
    height: int | None = None,
) -> go.Figure:
    """A labelled heatmap of a 2-D array (rows top to bottom, like the matrix on paper).

    row_labels / col_labels: tokens for the axes (None = numbered dimensions).
    allowed: bool array, False cells are drawn as grey "masked" cells, not as a colour.
    hover_text: optional 2-D array of (already escaped) strings, used when the map is small.
    zrange: fix the colour range (e.g. shared across heads); otherwise fitted to the data.
    """
    data = np.asarray(matrix, dtype=np.float64)
    ok = None if allowed is None else np.asarray(allowed, dtype=bool)
    z, rows, cols = pool(data, ok)
    pooled = len(rows) < data.shape[0] or len(cols) < data.shape[1]
    z32 = z.astype(np.float32)  # float32 ships as compact base64

    finite = z[np.isfinite(z)]
    if zrange is None:
        if finite.size == 0:
            zrange = (0.0, 1.0)
        elif diverging:
            bound = float(np.abs(finite).max()) or 1.0
            zrange = (-bound, bound)
        else:
            zrange = (float(min(finite.min(), 0.0)), float(finite.max()) or 1.0)

    y_name = y_title or "row"
    x_name = x_title or "column"
    heat = {
        "type": "heatmap",
        "z": z32,
        "x": np.arange(len(cols)),
        "y": np.arange(len(rows)),
        "colorscale": DIVERGING if diverging else SEQUENTIAL,
        "zmin": zrange[0],
        "zmax": zrange[1],
        "zmid": 0.0 if diverging else None,
        "hoverongaps": False,
        "colorbar": {"thickness": 14},
        "xgap": 1 if len(cols) <= 48 else 0,
        "ygap": 1 if len(rows) <= 48 else 0,
    }
    small = not pooled and data.shape[0] <= HOVER_TEXT_MAX and data.shape[1] <= HOVER_TEXT_MAX
    if small and hover_text is not None:
        heat["text"] = hover_text
        heat["hovertemplate"] = "%{text}<extra></extra>"
    elif small and (row_labels is not None or col_labels is not None):
        rl = [escape(t) for t in row_labels] if row_labels is not None else [str(i) for i in range(data.shape[0])]
        cl = [escape(t) for t in col_labels] if col_labels is not None else [str(j) for j in range(data.shape[1])]
        heat["text"] = [[f"{y_name} {rl[i]} · {x_name} {cl[j]}" for j in range(data.shape[1])] for i in range(len(rl))]
        heat["hovertemplate"] = "%{text}<br>value = %{z:.4f}<extra></extra>"
    elif pooled:
        heat["hovertemplate"] = f"{y_name} block %{{y}} · {x_name} block %{{x}}<br>mean = %{{z:.4f}}<extra></extra>"
    else:
        heat["hovertemplate"] = f"{y_name} #%{{y}} · {x_name} #%{{x}}<br>value = %{{z:.4f}}<extra></extra>"
    if show_numbers and not pooled and max(data.shape) <= NUMBERS_MAX:
        heat["texttemplate"] = "%{z:.2f}"
        heat["textfont"] = {"size": max(10, font_size - 3)}

    traces = [heat]
    if ok is not None and not ok.all():
        masked = np.where(np.isnan(z), 1.0, np.nan)  # after pooling, NaN means: every cell masked
        crosses = max(z.shape) <= NUMBERS_MAX * 2
        traces.append(
            {
                "type": "heatmap",
                "z": masked.astype(np.float32),
                "x": heat["x"],
                "y": heat["y"],
                "colorscale": [[0, MASKED_GREY], [1, MASKED_GREY]],
                "showscale": False,
                "hovertemplate": "masked: this query may not look at this key<extra></extra>",
                "text": np.where(np.isnan(z), "✕", "").tolist() if crosses else None,
                "texttemplate": "%{text}" if crosses else None,
                "textfont": {"size": max(10, font_size - 4), "color": "rgba(60,60,60,0.8)"},
                "xgap": heat["xgap"],
                "ygap": heat["ygap"],
                "hoverongaps": False,
            }
        )

    size = height or int(min(760, max(260, 120 + 30 * len(rows))))
    label_font = font_size if max(len(rows), len(cols)) <= 40 else max(9, font_size - 6)
    x_ticks = axis_ticks(col_labels, cols, pooled)
    y_ticks = axis_ticks(row_labels, rows, pooled)
    layout = {
        "title": {"text": title, "font": {"size": font_size + 4}, "yref": "container", "y": 0.99, "yanchor": "top"},
        "height": size,
        "margin": {"l": 10, "r": 10, "t": 80 + 2 * font_size + title.count("<br>") * (font_size + 10), "b": 10},
        "font": {"size": font_size},
        "xaxis": {
            **x_ticks,
            "title": {"text": x_title},
            "side": "top",
            "tickangle": -45 if col_labels is not None and len(cols) > 6 else 0,
            "tickfont": {"size": label_font},
            "showgrid": False,
            "zeroline": False,
            "range": [-0.5, len(cols) - 0.5],
        },
        "yaxis": {
            **y_ticks,
            "title": {"text": y_title},
            "autorange": "reversed",
            "tickfont": {"size": label_font},
            "showgrid": False,
            "zeroline": False,
        },
    }
    # One constructor call: Plotly validates once, where update_layout/update_axes calls each re-walk the figure.
    figure = go.Figure(data=traces, layout=layout)
    return figure
