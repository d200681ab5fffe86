"""One heatmap builder that every view uses. Plotly only; no Streamlit.

Three Plotly pitfalls are handled here once:
- Equal categorical labels merge ("the cat saw the dog" would lose a row), so the axes are
  integer positions and the tokens are tick text.
- Labels and hovers parse a subset of HTML, so every token is escaped ("<b>x</b>" stays text).
- Payload grows with n², so maps larger than MAX_DRAWN are block-averaged for drawing
  (exports keep the exact numbers) and per-cell hover text is only built for small maps.

And one for speed: with `automargin` on (Streamlit's theme turns it on), Plotly draws every chart,
measures its labels, then draws it again with the margins it found. Here the margins are computed
from the labels instead (`label_width`), so each chart is drawn once: half the drawing time.
"""

from __future__ import annotations

import html
import math
import unicodedata

import numpy as np
import plotly.graph_objects as go

MAX_DRAWN = 128  # a map with more rows or columns is block-averaged down to this for drawing
NUMBERS_MAX = 16  # numbers are written in the cells up to this many rows and columns
HOVER_TEXT_MAX = 64  # per-cell hover text (tokens, arithmetic) up to this size
TICKS_MAX = 40  # at most this many tick labels per axis; past it every k-th (hover gives the position)
PAGE_PIXELS = 900  # about how wide a chart is drawn across the page (wide layout, 1400-px window)
BESIDE_MAP_PIXELS = 160  # of a chart's width, about what the row labels and the colour bar take
EVERY_NUMBER_MAX = 12  # up to this many numbered dimensions, each is labelled
LABEL_CHARS_MAX = 16  # a longer token is cut to this many characters on an axis ("…"); hovers keep it whole
# Colour-blind-safe scales (ColorBrewer RdBu is diverging and safe; cividis was designed for it).
DIVERGING = "RdBu_r"
SEQUENTIAL = "Cividis"
MASKED_GREY, MASKED_CROSS = "rgb(190, 190, 190)", "rgb(40, 40, 40)"  # opaque: the same on a light or dark page
AXIS_STANDOFF = 6  # pixels between an axis title and its tick labels
COLORBAR_GAP, COLORBAR_THICKNESS = 8, 14  # pixels
CELL_PIXELS = 30  # the height of one row of a map at 16 px type, until the map reaches MAP_PIXELS_MAX
MAP_PIXELS_MIN, MAP_PIXELS_MAX = 140, 620
# Plotly's default template is ~6 KB of JSON per figure, and Streamlit's theme replaces its styling in
# the browser anyway: without it a rerun of the walkthrough sends ~100 KB less.
NO_TEMPLATE = go.layout.Template()


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


def shorten(label: str, limit: int = LABEL_CHARS_MAX) -> str:
    """A label of at most `limit` characters: "antidisestablishm…" keeps the margins sane."""
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


def label_width(text: str, font_size: float) -> float:
    """About how many pixels a label is wide, erring on the wide side: wide characters (CJK, emoji)
    1.2 em, zero-width and combining characters nothing, lower-case letters, digits and punctuation
    0.6 em, the rest (capitals, other scripts) 0.75 em."""
    ems = 0.0
    for char in text:
        if unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        if unicodedata.east_asian_width(char) in ("W", "F"):
            ems += 1.2
        elif char.isascii() and not char.isupper():
            ems += 0.6
        else:
            ems += 0.75
    return ems * font_size


def _tick_text(labels, blocks) -> list[str]:
    if labels is None:
        return [str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b in blocks]
    if len(blocks) == len(labels):
        return [escape(shorten(t)) for t in labels]
    return [f"{escape(shorten(labels[a]))} ({a}–{b - 1})" for a, b in blocks]


def axis_ticks(labels, blocks, pooled: bool, most: int = TICKS_MAX) -> dict:
    """Tick positions and text for one axis. Past `most` labels only every k-th token is written:
    where they would overlap, and because a browser spends ~0.3 s laying out 128 rotated labels.
    Numbered dimensions are left to Plotly; a few get every number (else a wide chart says 0.5, 1.5…)."""
    if labels is None and not pooled:
        return {"tick0": 0, "dtick": 1} if len(blocks) <= EVERY_NUMBER_MAX else {}
    text = _tick_text(labels, blocks)
    most = max(1, min(most, TICKS_MAX))
    stride = math.ceil(len(text) / most) if len(text) > most else 1
    positions = list(range(0, len(text), stride))
    return {"tickvals": positions, "ticktext": [text[i] for i in positions]}


def tick_widths(ticks: dict, count: int, font_size: float) -> list[float]:
    """Pixels of each tick label of an axis (Plotly numbers 0..count-1 when there is no ticktext)."""
    texts = [html.unescape(t) for t in ticks.get("ticktext", [])] or [str(max(count - 1, 0))]
    return [label_width(t, font_size) for t in texts]


def widest_tick(ticks: dict, count: int, font_size: float) -> float:
    return max(tick_widths(ticks, count, font_size))


def fixed_margins(
    *,
    title: str,
    subtitle: str,
    font_size: int,
    label_font: int,
    x_widths: list[float],
    y_width: float,
    x_angle: int,
    x_title: bool,
    y_title: bool,
    colorbar: bool,
) -> dict:
    """Margins that fit the title, the x labels on top (upright or at -45°), the y labels on the left
    and the colour bar on the right, so that Plotly need not measure them (see the module docstring)."""
    line = 1.3  # line height, in font sizes
    title_height = (font_size + 4) * line if title else 0
    title_height += font_size * line if subtitle else 0
    lean = math.radians(abs(x_angle))
    x_labels = (max(x_widths) + label_font) * math.sin(lean) + 4 if x_angle else label_font * line
    top = 10 + title_height + 8 + (font_size * line + AXIS_STANDOFF if x_title else 0) + x_labels
    left = 10 + y_width + 6 + (font_size * line + AXIS_STANDOFF if y_title else 0)
    right = 10
    if colorbar:  # the bar, its gap and labels like "−0.25"
        right = COLORBAR_GAP + COLORBAR_THICKNESS + 6 + label_width("−0.25", font_size) + 6
    if x_angle:  # the last label leans out to the right
        right = max(right, x_widths[-1] * math.cos(lean) + 6)
    return {"l": round(left), "r": round(right), "t": round(top), "b": 10, "autoexpand": False}


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
    x_tick_angle: int | None = None,
    subtitle: str = "",
    width: int = PAGE_PIXELS,
) -> go.Figure:
    """A labelled heatmap of a 2-D array (rows top to bottom, like the matrix on paper).

    row_labels / col_labels: tokens for the axes (None = numbered dimensions).
    allowed: bool array, False cells are drawn as grey "masked" cells, not as a colour.
    hover_text: optional 2-D array of (already escaped) strings, used when the map is small.
    zrange: fix the colour range (e.g. shared across heads); otherwise fitted to the data.
    show_numbers: write each value in its cell (small maps only); the cells then say what a colour
    bar would, so none is drawn.
    x_tick_angle: the column labels' angle; by default -45° when there are more than 6 tokens.
    subtitle: a second, smaller line under the title (one line each: Plotly misplaces a title with
    "<br>" when it is anchored at the top).
    width: about how many pixels wide the chart will be drawn. Where labels would run into each other
    (a slanted column label needs ~1.5 font sizes of width, a row label one of height), only every
    k-th is written; hovers still name every row and column.
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
        "colorbar": {"thickness": COLORBAR_THICKNESS, "x": 1.0, "xanchor": "left", "xpad": COLORBAR_GAP},
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
    numbers = show_numbers and not pooled and max(data.shape) <= NUMBERS_MAX
    if numbers:
        heat["texttemplate"] = "%{z:.2f}"
        heat["textfont"] = {"size": max(10, font_size - 3)}
        heat["showscale"] = False

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
                "textfont": {"size": max(10, font_size - 4), "color": MASKED_CROSS},
                "xgap": heat["xgap"],
                "ygap": heat["ygap"],
                "hoverongaps": False,
            }
        )

    label_font = font_size if max(len(rows), len(cols)) <= 40 else max(9, font_size - 6)
    cell = CELL_PIXELS * font_size / 16  # larger type (presentation mode) gets larger cells
    map_pixels = round(min(MAP_PIXELS_MAX, max(MAP_PIXELS_MIN, cell * len(rows))))
    x_ticks = axis_ticks(col_labels, cols, pooled, most=int((width - BESIDE_MAP_PIXELS) / (1.5 * label_font)))
    y_ticks = axis_ticks(row_labels, rows, pooled, most=int(map_pixels / label_font))  # one line of type a row
    if x_tick_angle is None:
        x_tick_angle = -45 if col_labels is not None and len(cols) > 6 else 0
    margin = fixed_margins(
        title=title,
        subtitle=subtitle,
        font_size=font_size,
        label_font=label_font,
        x_widths=tick_widths(x_ticks, len(cols), label_font),
        y_width=widest_tick(y_ticks, len(rows), label_font),
        x_angle=x_tick_angle,
        x_title=bool(x_title),
        y_title=bool(y_title),
        colorbar=not numbers,
    )
    axis = {"automargin": False, "showgrid": False, "zeroline": False, "tickfont": {"size": label_font}}
    layout = {
        "template": NO_TEMPLATE,
        "title": {
            "text": title,
            "font": {"size": font_size + 4},
            "subtitle": {"text": subtitle, "font": {"size": font_size}},
            "yref": "container",
            "y": 0.99,
            "yanchor": "top",
        },
        "height": height or margin["t"] + map_pixels + margin["b"],
        "margin": margin,
        "font": {"size": font_size},
        "hoverlabel": {"align": "left"},
        "xaxis": {
            **axis,
            **x_ticks,
            "title": {"text": x_title, "standoff": AXIS_STANDOFF, "font": {"size": font_size}},
            "side": "top",
            "tickangle": x_tick_angle,
            "range": [-0.5, len(cols) - 0.5],
        },
        "yaxis": {
            **axis,
            **y_ticks,
            "title": {"text": y_title, "standoff": AXIS_STANDOFF, "font": {"size": font_size}},
            "autorange": "reversed",
        },
    }
    # One constructor call: Plotly validates once, where update_layout/update_axes calls each re-walk the figure.
    figure = go.Figure(data=traces, layout=layout)
    return figure
