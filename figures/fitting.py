"""What fits where, measured before Plotly draws: a big map pooled to what can be drawn, every k-th tick label,
a title that moves its details to the subtitle line, the margins the labels need, numbers only in cells that hold
them. Plotly only; no Streamlit."""

from __future__ import annotations

import functools
import html
import math
import re

import numpy as np

from figures.style import (
    LABEL_CHARS_MAX,
    MAX_DRAWN,
    TITLE_PAD,
    Title,
    escape,
    label_width,
    shorten,
)

HOVER_TEXT_MAX = 64  # per-cell hover text (tokens, arithmetic) up to this size
TICKS_MAX = 40  # at most this many tick labels per axis; past it every k-th (hover gives the position)
BESIDE_MAP_PIXELS = 160  # of a chart's width, about what the row labels and the colour bar take
MAP_WIDTH_MIN = 48  # side by side, a map narrower than this (or PER_COLUMN_MIN per column) is stacked instead
PER_COLUMN_MIN = 10
AXIS_STANDOFF = 6  # pixels between an axis title and its tick labels
TICK_GAP = 18  # pixels between a map and its row labels (5-px ticks, then padding; measured in Chromium)
X_TICK_GAP = 8  # pixels between a map and its column labels above it (measured)
COLORBAR_GAP, COLORBAR_THICKNESS = 8, 14  # pixels
CELL_PIXELS = 30  # the height of one row of a map at 16 px type, until the map reaches the style's maximum
CROSS_MIN_PIXELS = 7  # a ✕ smaller than this would be a smudge: masked cells are then plain grey
BOLD = 1.1  # Streamlit draws chart titles in bold: about this much wider
TAGS = re.compile(r"<[^>]+>")


@functools.lru_cache(maxsize=1024)
def block_ranges(size: int, limit: int = MAX_DRAWN) -> tuple[tuple[int, int], ...]:
    """Split range(size) into at most `limit` contiguous blocks ((start, stop), ...). Kept: every map of a
    sentence asks for the same few."""
    if size <= limit:
        return tuple((i, i + 1) for i in range(size))
    edges = np.linspace(0, size, limit + 1).round().astype(int)
    return tuple((int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True))


def pool(matrix: np.ndarray, allowed: np.ndarray | None = None, limit: int = MAX_DRAWN):
    """Block-average the last two axes of `matrix` (one map, or a stack of them: heads x rows x columns) to
    at most limit x limit, ignoring cells that are not allowed (`allowed`: rows x columns, the same for every
    map of a stack).

    Returns (pooled values with NaN where a block has no allowed cell, row blocks, column blocks).
    """
    rows, cols = block_ranges(matrix.shape[-2], limit), block_ranges(matrix.shape[-1], limit)
    ok = np.ones(matrix.shape[-2:], dtype=bool) if allowed is None else allowed
    if len(rows) == matrix.shape[-2] and len(cols) == matrix.shape[-1]:
        return np.where(ok, matrix, np.nan), rows, cols
    values = np.where(ok, matrix, 0.0).astype(np.float64)
    row_starts = [a for a, _ in rows]
    col_starts = [a for a, _ in cols]
    sums = np.add.reduceat(np.add.reduceat(values, row_starts, axis=-2), col_starts, axis=-1)
    counts = np.add.reduceat(np.add.reduceat(ok.astype(np.float64), row_starts, axis=-2), col_starts, axis=-1)
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
    they would overlap, and because a browser is slow to lay out many rotated labels (docs/design-notes.md)."""
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


def fit_title(whole: Title, subtitle: str, width: float, font_size: int) -> tuple[str, str, int]:
    """A title and subtitle (plain text) that fit `width` pixels. In turn: the title's shape and then its formula
    move down to the subtitle line; the title's type shrinks to the
    body size; the title's last words move down to the head of the subtitle line, whole ("q after" over "RoPE",
    never "q aft…"); the moved formula and shape are dropped again, shape first (the caller's subtitle, e.g.
    "head 1 of 2", stays); only then is text cut with "…". Returns (title, subtitle, title size)."""
    room = width - 24
    size = font_size + 4

    def too_wide(text: str, font: float, bold: float = BOLD) -> bool:
        return _plain_width(text, font) * bold > room

    moved = {}  # what left the title: "formula" and "shape"
    title = whole.text
    if too_wide(title, size) and whole.shape:
        title, moved["shape"] = Title(whole.name, whole.formula).text, whole.shape
    if too_wide(title, size) and whole.formula:
        title, moved["formula"] = whole.name, f"= {whole.formula}"
    while too_wide(title, size) and size > font_size:
        size -= 1
    words, rest = title.split(" "), []
    while too_wide(" ".join(words), size) and len(words) > 1:
        rest.insert(0, words.pop())
    title = " ".join(words)

    def line() -> str:
        parts = (" ".join(rest), moved.get("formula"), moved.get("shape"), subtitle)
        return " · ".join(part for part in parts if part)

    for part in ("shape", "formula"):
        if too_wide(line(), font_size, 1.0):
            moved.pop(part, None)

    def cut(text: str, font: float, bold: float) -> str:
        while len(text) > 1 and label_width(text, font) * bold > room:  # "…" alone is as short as it gets
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
    titles = (title_size * line if title else 0) + (font_size * line if subtitle else 0)  # drawn by heatmaps()
    top = TITLE_PAD + titles + 10 + (font_size * line + AXIS_STANDOFF if x_title else 0)
    top += x_labels_height(x_widths, label_font, x_angle) + X_TICK_GAP
    left = 10 + y_width + TICK_GAP + (font_size * 1.4 + AXIS_STANDOFF if y_title else 0)
    right = 10
    if colorbar:  # the bar, its gap and labels like "−0.25"
        right = COLORBAR_GAP + COLORBAR_THICKNESS + 6 + label_width("−0.25", font_size) + 6
    if x_angle:  # the last label leans out to the right
        right = max(right, x_widths[-1] * math.cos(math.radians(abs(x_angle))) + 6)
    return {"l": round(left), "r": round(right), "t": round(top), "b": 10, "autoexpand": False}


def x_labels_height(widths: list[float], label_font: float, angle: int) -> float:
    """Pixels the column labels take above a map: upright, one line; slanted, their longest one leans up."""
    if not angle:
        return label_font * 1.3
    return (max(widths) + label_font) * math.sin(math.radians(abs(angle))) + 4


def axis_title_annotations(laid, x0: float, x1: float, y1: float, y_mid: float, width: float, font: int) -> list:
    """The axis titles of one map, placed here: without automargin Plotly puts an axis title where it likes
    (an x title over the chart's title, a y title over the row labels). The x title sits AXIS_STANDOFF pixels
    above the column labels (which end X_TICK_GAP pixels above the map's top, paper y1); the y title the same
    left of the row labels (TICK_GAP pixels left of the map, paper x0), in paper units so that it moves with
    the map when the chart is drawn narrower or wider than `width` pixels."""
    common = {"xref": "paper", "yref": "paper", "showarrow": False, "font": {"size": font}}
    out = []
    if laid.panel.x_title:
        above = (
            X_TICK_GAP
            + x_labels_height(tick_widths(laid.x_ticks, laid.label_font), laid.label_font, laid.x_angle)
            + AXIS_STANDOFF
        )
        half = label_width(laid.panel.x_title, font) / width / 2  # wider than a narrow map: kept inside the chart
        centre = min(max((x0 + x1) / 2, half), 1 - half)
        out.append(
            {
                **common,
                "text": escape(laid.panel.x_title),
                "x": centre,
                "xanchor": "center",
                "y": y1,
                "yanchor": "bottom",
                "yshift": above,
            }
        )
    if laid.panel.y_title and laid.rows_shown:
        left = max(tick_widths(laid.y_ticks, laid.label_font)) + TICK_GAP + AXIS_STANDOFF
        out.append(
            {
                **common,
                "text": escape(laid.panel.y_title),
                "textangle": -90,
                "x": x0 - left / width,
                "xanchor": "right",
                "y": y_mid,
                "yanchor": "middle",
            }
        )
    return out


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
    # A line of type is ~1.25 font sizes tall: 4 pixels of room are enough at 13 px, not at a projector's 23 px.
    return number_width(widest, font_size) + 6 <= cell_width and max(font_size + 4, 1.25 * font_size) <= cell_height
