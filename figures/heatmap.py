"""One heatmap builder that every view uses. Plotly only; no Streamlit.

Plotly pitfalls handled here once:
- Equal categorical labels merge ("the cat saw the dog" would lose a row), so the axes are
  integer positions and the tokens are tick text.
- Labels and hovers parse a subset of HTML, so every label is escaped here ("<b>x</b>" stays
  text): callers pass plain text.
- Payload grows with n², so maps larger than MAX_DRAWN are block-averaged for drawing
  (exports keep the exact numbers) and per-cell hover text is only built for small maps.

And the figure is complete when heatmap() returns it: the margins are computed from the labels
(with `automargin` Plotly draws every chart twice, measuring its labels in between), numbers are
written in the cells only where they fit the cell at this width, a title too wide for the chart
moves its details to the subtitle line, and masked cells get a ✕ sized to the cell.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import plotly.graph_objects as go

from figures.style import (
    DEFAULT_STYLE,
    DIVERGING,
    LABEL_CHARS_MAX,
    MAP_PIXELS_MIN,
    MASKED_CROSS,
    MASKED_GREY,
    SEQUENTIAL,
    TITLE_PAD,
    Style,
    escape,
    label_width,
    shorten,
    title_height,
)

MAX_DRAWN = 128  # a map with more rows or columns is block-averaged down to this for drawing
HOVER_TEXT_MAX = 64  # per-cell hover text (tokens, arithmetic) up to this size
TICKS_MAX = 40  # at most this many tick labels per axis; past it every k-th (hover gives the position)
BESIDE_MAP_PIXELS = 160  # of a chart's width, about what the row labels and the colour bar take
AXIS_STANDOFF = 6  # pixels between an axis title and its tick labels
TICK_GAP = 18  # pixels between the plot and its row labels (Streamlit's template: 5-px ticks, then padding; measured)
COLORBAR_GAP, COLORBAR_THICKNESS = 8, 14  # pixels
CELL_PIXELS = 30  # the height of one row of a map at 16 px type, until the map reaches the style's maximum
CROSS_MIN_PIXELS = 7  # a ✕ smaller than this would be a smudge: masked cells are then plain grey
BOLD = 1.1  # Streamlit draws chart titles in bold: about this much wider
TAGS = re.compile(r"<[^>]+>")


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


def _tick_text(labels, blocks, base: int, label_chars: int) -> list[str]:
    if labels is None:  # numbered dimensions, counted as the reader counts
        return [str(a + base) if b - a == 1 else f"{a + base}–{b - 1 + base}" for a, b in blocks]
    if len(blocks) == len(labels):
        return [escape(shorten(t, label_chars)) for t in labels]
    return [f"{escape(shorten(labels[a], label_chars))} ({a + base}–{b - 1 + base})" for a, b in blocks]


def axis_ticks(labels, blocks, most: int = TICKS_MAX, base: int = 1, label_chars: int = LABEL_CHARS_MAX) -> dict:
    """Tick positions and text for one axis. Past `most` labels only every k-th is written: where
    they would overlap, and because a browser spends ~0.3 s laying out 128 rotated labels."""
    text = _tick_text(labels, blocks, base, label_chars)
    most = max(1, min(most, TICKS_MAX))
    stride = math.ceil(len(text) / most) if len(text) > most else 1
    positions = list(range(0, len(text), stride))
    return {"tickmode": "array", "tickvals": positions, "ticktext": [text[i] for i in positions]}


def tick_widths(ticks: dict, font_size: float) -> list[float]:
    """Pixels of each tick label of an axis."""
    return [label_width(html.unescape(t), font_size) for t in ticks["ticktext"]] or [0.0]


def _plain_width(text: str, font_size: float) -> float:
    return label_width(html.unescape(TAGS.sub("", text)), font_size)


def fit_title(title: str, subtitle: str, width: float, font_size: int) -> tuple[str, str, int]:
    """A title and subtitle (plain text) that fit `width` pixels. In turn: the title's shape (after a double
    space) and then its formula (after " = ") move down to the subtitle line; the title's type shrinks to the
    body size; the moved parts are dropped again, shape first (the caller's subtitle, e.g. "head 1 of 2",
    stays); only then is text cut with "…". Returns (title, subtitle, title size)."""
    room = width - 24
    size = font_size + 4

    def too_wide(text: str, font: float, bold: float = BOLD) -> bool:
        return _plain_width(text, font) * bold > room

    moved = {}  # what left the title: "formula" and "shape"
    if too_wide(title, size) and "  " in title:
        title, moved["shape"] = (part.strip() for part in title.split("  ", 1))
    if too_wide(title, size) and " = " in title:
        title, formula = title.split(" = ", 1)
        moved["formula"] = f"= {formula.strip()}"
    while too_wide(title, size) and size > font_size:
        size -= 1

    def line() -> str:
        return " · ".join(part for part in (moved.get("formula"), moved.get("shape"), subtitle) if part)

    for part in ("shape", "formula"):
        if too_wide(line(), font_size, 1.0):
            moved.pop(part, None)

    def cut(text: str, font: float, bold: float) -> str:
        while text and label_width(text, font) * bold > room:
            text = text[:-2] + "…"
        return text

    return cut(title, size, BOLD), cut(line(), font_size, 1.0), size


def fixed_margins(
    *,
    title: bool,
    subtitle: bool,
    title_size: int,
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
    titles = title_height(title_size, font_size if subtitle else 0) if title else 0
    lean = math.radians(abs(x_angle))
    x_labels = (max(x_widths) + label_font) * math.sin(lean) + 4 if x_angle else label_font * line
    top = TITLE_PAD + titles + 10 + (font_size * line + AXIS_STANDOFF if x_title else 0) + x_labels
    left = 10 + y_width + TICK_GAP + (font_size * line + AXIS_STANDOFF if y_title else 0)
    right = 10
    if colorbar:  # the bar, its gap and labels like "−0.25"
        right = COLORBAR_GAP + COLORBAR_THICKNESS + 6 + label_width("−0.25", font_size) + 6
    if x_angle:  # the last label leans out to the right
        right = max(right, x_widths[-1] * math.cos(lean) + 6)
    return {"l": round(left), "r": round(right), "t": round(top), "b": 10, "autoexpand": False}


def y_title_annotation(text: str, labels_width: float, font_size: int) -> dict:
    """A y-axis title as a rotated annotation, AXIS_STANDOFF pixels left of the row labels (which end TICK_GAP
    pixels left of the plot)."""
    return {
        "text": text,
        "textangle": -90,
        "x": 0,
        "xref": "paper",
        "xanchor": "right",
        "xshift": -(labels_width + TICK_GAP + AXIS_STANDOFF),
        "y": 0.5,
        "yref": "paper",
        "showarrow": False,
        "font": {"size": font_size},
    }


def number_width(text: str, font_size: float) -> float:
    """Pixels of a number as Plotly writes it in a cell (Source Sans): digits 0.52 em, "." 0.27, "-" 0.4, a
    little over what Chromium draws ("0.40" at 13 px: 22.6 px; "-0.71": 26.7 px). Labels keep label_width,
    which errs wider: a label cut short would hide a token, a number left out shows the colour bar instead."""
    ems = {".": 0.27, "-": 0.4, "−": 0.4}
    return sum(ems.get(char, 0.52) for char in text) * font_size


def numbers_fit(z: np.ndarray, cell_width: float, cell_height: float, font_size: float) -> bool:
    """Whether every cell's value, written with two decimals, fits inside its cell with a little room."""
    finite = z[np.isfinite(z)]
    if finite.size == 0:
        return True
    widest = max(f"{finite.max():.2f}", f"{finite.min():.2f}", key=len)
    return number_width(widest, font_size) + 6 <= cell_width and font_size + 4 <= cell_height


def _colour_range(z: np.ndarray, diverging: bool) -> tuple[float, float]:
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
) -> list[dict]:
    """The traces of one (already pooled) map: the values, the grey masked cells (NaN where every
    cell of a block is masked) and a ✕ on each of them. Used by heatmap() and by the multi-head grid."""
    x, y = np.arange(z.shape[1]), np.arange(z.shape[0])
    gap = 1 if max(z.shape) <= 48 else 0
    heat = {
        "type": "heatmap",
        "z": z.astype(np.float32),  # float32 ships as compact base64
        "x": x,
        "y": y,
        "colorscale": DIVERGING if diverging else SEQUENTIAL,
        "zmin": zrange[0],
        "zmax": zrange[1],
        "zmid": 0.0 if diverging else None,
        "hoverongaps": False,
        "showscale": colorbar,
        "colorbar": style.colorbar(thickness=COLORBAR_THICKNESS, x=1.0, xanchor="left", xpad=COLORBAR_GAP),
        "xgap": gap,
        "ygap": gap,
        **hover,
    }
    if numbers_font:
        heat["texttemplate"] = "%{z:.2f}"
        heat["textfont"] = {"size": numbers_font}
    traces = [heat]
    masked = np.isnan(z)
    if masked.any():
        traces.append(
            {
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
        )
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


def _hover(shape, pooled: bool, hover_text, row_labels, col_labels, y_name: str, x_name: str, base: int) -> dict:
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


def heatmap(
    matrix,
    *,
    title: str,
    style: Style = DEFAULT_STYLE,
    subtitle: str = "",
    row_labels=None,
    col_labels=None,
    x_title: str = "",
    y_title: str = "",
    diverging: bool = True,
    allowed=None,
    hover_text=None,
    zrange: tuple[float, float] | None = None,
    colorbar: bool | None = None,
    x_tick_angle: int | None = None,
    height: int | None = None,
    label_chars: int = LABEL_CHARS_MAX,
) -> go.Figure:
    """A labelled heatmap of a 2-D array (rows top to bottom, like the matrix on paper).

    title, subtitle, row_labels, col_labels, x_title, y_title: plain text (escaped here).
    row_labels / col_labels: tokens for the axes (None = numbered dimensions, counted from
    style.index_base). allowed: bool array; False cells are drawn grey with a ✕, not as a colour.
    hover_text: optional 2-D array of (already escaped) strings, used when the map is small.
    zrange: fix the colour range (e.g. weights 0..1, or shared across heads); else fitted to the data.
    colorbar: None draws one unless the cells carry their numbers (then they say what a bar would).
    x_tick_angle: the column labels' angle; by default -45° when there are more than 6 tokens.
    label_chars: tokens longer than this are cut on the axes (hovers keep them whole).
    Numbers are written in the cells when style.show_numbers and they fit the cells at style.width.
    Where labels would run into each other only every k-th is written; hovers name every cell.
    """
    data = np.asarray(matrix, dtype=np.float64)
    ok = None if allowed is None else np.asarray(allowed, dtype=bool)
    z, rows, cols = pool(data, ok)
    pooled = len(rows) < data.shape[0] or len(cols) < data.shape[1]
    zrange = zrange or _colour_range(z, diverging)
    font, base = style.font_size, style.index_base

    label_font = font if max(len(rows), len(cols)) <= 40 else max(9, font - 6)
    cell = CELL_PIXELS * (1 + 0.6 * (font / 16 - 1))  # larger type (presentation mode): taller rows, not as much
    map_pixels = round(min(style.max_map_pixels, max(MAP_PIXELS_MIN, cell * len(rows))))
    # A slanted column label needs ~1.5 font sizes of width; a row label one line of type.
    x_most, y_most = int((style.width - BESIDE_MAP_PIXELS) / (1.5 * label_font)), int(map_pixels / label_font)
    x_ticks = axis_ticks(col_labels, cols, most=x_most, base=base, label_chars=label_chars)
    y_ticks = axis_ticks(row_labels, rows, most=y_most, base=base, label_chars=label_chars)
    if x_tick_angle is None:
        x_tick_angle = -45 if col_labels is not None and len(cols) > 6 else 0
    title, subtitle, title_size = fit_title(title, subtitle, style.width, font)

    def margins(bar: bool) -> dict:
        return fixed_margins(
            title=bool(title),
            subtitle=bool(subtitle),
            title_size=title_size,
            font_size=font,
            label_font=label_font,
            x_widths=tick_widths(x_ticks, label_font),
            y_width=max(tick_widths(y_ticks, label_font)),
            x_angle=x_tick_angle,
            x_title=bool(x_title),
            y_title=bool(y_title),
            colorbar=bar,
        )

    margin = margins(bar=False)
    cell_width = (style.width - margin["l"] - margin["r"]) / len(cols)
    cell_height = map_pixels / len(rows)
    numbers_font = max(10, font - 3)
    numbers = style.show_numbers and not pooled and numbers_fit(z, cell_width, cell_height, numbers_font)
    bar = not numbers if colorbar is None else colorbar
    if bar:
        margin = margins(bar=True)
        cell_width = (style.width - margin["l"] - margin["r"]) / len(cols)

    y_name, x_name = escape(y_title or "row"), escape(x_title or "column")
    hover = _hover(data.shape, pooled, hover_text, row_labels, col_labels, y_name, x_name, base)
    traces = heatmap_traces(
        z,
        diverging=diverging,
        zrange=zrange,
        hover=hover,
        numbers_font=numbers_font if numbers else None,
        colorbar=bar,
        cross_pixels=0.5 * min(cell_width, cell_height),
        style=style,
    )
    axis = {"automargin": False, "showgrid": False, "zeroline": False, "tickfont": {"size": label_font}}
    layout = style.layout(
        title=style.title(escape(title), escape(subtitle), title_size, font),
        height=height or margin["t"] + map_pixels + margin["b"],
        margin=margin,
        showlegend=False,
        xaxis={
            **axis,
            **x_ticks,
            "title": {"text": escape(x_title), "standoff": AXIS_STANDOFF, "font": {"size": font}},
            "side": "top",
            "tickangle": x_tick_angle,
            "range": [-0.5, len(cols) - 0.5],
        },
        yaxis={**axis, **y_ticks, "range": [len(rows) - 0.5, -0.5]},  # row 1 at the top, as on paper
        # Without automargin Plotly ignores an axis title's standoff and draws a y title over the row labels;
        # placed here in pixels, it sits left of the widest one.
        annotations=[y_title_annotation(escape(y_title), max(tick_widths(y_ticks, label_font)), font)]
        if y_title
        else [],
    )
    # One constructor call: Plotly validates once, where update_layout/update_axes calls each re-walk the figure.
    return go.Figure(data=traces, layout=layout)
