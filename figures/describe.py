"""Every chart in words: its accessible name and a summary computed from its numbers (ui/live_chart gives both
to the chart, for a screen reader; the chart also reads each cell out as the arrow keys walk it).

A map of weights (each row sums to 1) is summed up by its most focused row: "row 'eat' puts 0.70 on
'Alice'". A map of other numbers by where its largest and smallest values are. Lines and bars by their
range. The numbers are written as the cells write them (two decimals), except that a value too small to show
in two decimals is written in two significant digits: "0.0012", never a false "0.00"; and a weight that two
decimals would round up to 1 is written "> 0.99", never a false "1.00" (softmax gives a row that has a choice
no weight of exactly 1), as the lectures' sentences write it (attention_core.lectures.weight_text).
"""

from __future__ import annotations

import html
import re

import numpy as np

from figures.style import Figure

MAPS_NAMED_MOST = 4  # a figure of more maps says how many more there are
ROW_SUM_TOLERANCE = 1e-3  # a map is a map of weights when every unmasked row sums to 1 within this
TAG = re.compile(r"<[^>]+>")


def plain(text) -> str:
    """Plotly's text as words: its tags (<b>, <br>, <sub>) dropped, and a token's escaped characters ("&lt;",
    figures.style.escape) written as the token has them ("<")."""
    return html.unescape(re.sub(r"\s+", " ", TAG.sub(" ", str(text or ""))).strip())


def number(value: float) -> str:
    """Two decimals, as the cells write them; a small non-zero value in two significant digits; a large one
    whole, with thousands marked."""
    value = float(value) + 0.0  # -0.0 is written 0.00
    if value != 0 and abs(value) < 0.005:
        return f"{value:.2g}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"


def weight(value: float) -> str:
    """A weight as number() writes it, but "> 0.99" for one under 1 that two decimals would round to 1.00: the
    rule of attention_core.lectures.weight_text, not imported from there because that loads torch, and this
    module comes with ui.live_chart, before app.py's preload of plotly.js."""
    return ">\u00a00.99" if 0.995 <= value < 1 else number(value)  # no break space: one line


def _labels(layout: dict, trace: dict, letter: str, count: int) -> list[str]:
    """The tokens (or numbers) along a map's axis, by position; a position without a label is counted from 1."""
    ref = trace.get(f"{letter}axis", letter)
    axis = layout.get(f"{letter}axis{ref[1:]}", {})
    by_position = dict(zip(list(axis.get("tickvals", [])), axis.get("ticktext", []), strict=False))
    return [plain(by_position.get(i, i + 1)) for i in range(count)]


def is_value_map(trace: dict) -> bool:
    """A heatmap of numbers: not the grey layer of masked cells, nor a picture that has no hover (thumbnails)."""
    masked_layer = str(trace.get("hovertemplate", "")).startswith("masked")
    return trace.get("type") == "heatmap" and not masked_layer and trace.get("hoverinfo") != "skip"


def is_weights(z: np.ndarray) -> bool:
    """Every value in [0, 1] and every row with an unmasked cell sums to 1: softmax rows."""
    finite = np.isfinite(z)
    if not finite.any() or (z[finite] < 0).any() or (z[finite] > 1).any():
        return False
    sums = np.nansum(z, axis=1)[finite.any(axis=1)]
    return bool(np.all(np.abs(sums - 1) <= ROW_SUM_TOLERANCE))


def map_summary(z: np.ndarray, rows: list[str], cols: list[str]) -> str:
    """One sentence on one map: its size, masked cells, and its most telling values."""
    z = np.asarray(z, dtype=float)
    size = f"{z.shape[0]} × {z.shape[1]}"
    finite = np.isfinite(z)
    masked = int((~finite).sum())
    masked_text = f", {masked} cells masked" if masked else ""
    if not finite.any():
        return f"{size}, every cell masked"
    filled = np.where(finite, z, -np.inf)
    if is_weights(z):
        # The row whose largest weight is the largest of all, among rows that could choose (a causal map's
        # first row has one key, whose weight is 1 whatever the numbers).
        choosing = finite.sum(axis=1) > 1
        peaks = np.where(choosing if choosing.any() else finite.any(axis=1), filled.max(axis=1), -np.inf)
        row = int(np.argmax(peaks))
        col = int(np.argmax(filled[row]))
        return (
            f"{size} weights, each row sums to 1{masked_text}; the most focused row, '{rows[row]}', puts "
            f"{weight(z[row, col])} on '{cols[col]}'"
        )
    if np.nanmin(z) == np.nanmax(z):
        return f"{size}{masked_text}; every value {number(np.nanmax(z))}"
    high = np.unravel_index(int(np.argmax(filled)), z.shape)
    low = np.unravel_index(int(np.argmin(np.where(finite, z, np.inf))), z.shape)
    return (
        f"{size}{masked_text}; largest {number(z[high])} at row '{rows[high[0]]}', column '{cols[high[1]]}'; "
        f"smallest {number(z[low])} at row '{rows[low[0]]}', column '{cols[low[1]]}'"
    )


def _series_summary(trace: dict) -> str:
    """A line's or bar's values: how many, and their range (with the label of each end where it has labels)."""
    horizontal = trace.get("orientation") == "h"
    values = np.asarray(trace.get("x" if horizontal else "y", []), dtype=float).ravel()
    where = trace.get("y" if horizontal else "x")
    where = [] if where is None else list(where)
    name = plain(trace.get("name")) or "values"
    if not np.isfinite(values).any():
        return ""
    low, high = int(np.nanargmin(values)), int(np.nanargmax(values))
    if values.size == 1 or values[low] == values[high]:
        return f"{name}: {number(values[high])}"
    labelled = len(where) == values.size and all(isinstance(w, str) for w in where)
    at = (lambda i: f" ({plain(where[i])})") if labelled else (lambda i: "")
    return f"{name}: {values.size} values from {number(values[low])}{at(low)} to {number(values[high])}{at(high)}"


def describe(figure: Figure) -> tuple[str, str]:
    """(name, summary) of a figure: its title (or its maps' titles), and what its numbers show."""
    layout, traces = figure.parts, figure.traces
    title = layout.get("title")
    title_text = plain(title.get("text") if isinstance(title, dict) else title)
    maps = [t for t in traces if is_value_map(t)]
    # A map's name without the shape written after two spaces; a map with no name is called "map 2".
    names = [plain(str(t.get("name") or f"map {i + 1}").split("  ")[0]) for i, t in enumerate(maps)]
    name = title_text or ", ".join(names[:MAPS_NAMED_MOST]) or "chart"
    parts = []
    for trace, map_name in zip(maps[:MAPS_NAMED_MOST], names, strict=False):
        z = np.asarray(trace["z"], dtype=float)
        if z.ndim != 2 or z.size == 0:
            continue
        rows, cols = _labels(layout, trace, "y", z.shape[0]), _labels(layout, trace, "x", z.shape[1])
        parts.append(f"{map_name}: {map_summary(z, rows, cols)}")
    if len(maps) > MAPS_NAMED_MOST:
        parts.append(f"and {len(maps) - MAPS_NAMED_MOST} more maps")
    pictures = [] if maps else [np.asarray(t["z"], dtype=float) for t in traces if t.get("type") == "heatmap"]
    for z in pictures:  # a heatmap drawn as a picture (the thumbnails): its size and range
        if z.ndim == 2 and np.isfinite(z).any():
            parts.append(
                f"a picture of {z.shape[0]} × {z.shape[1]} cells from {number(np.nanmin(z))} to {number(np.nanmax(z))}"
            )
    if not maps and not pictures:
        parts = [s for s in (_series_summary(t) for t in traces if t.get("type") in ("scatter", "bar")) if s]
        more = len(parts) - MAPS_NAMED_MOST
        parts = parts[:MAPS_NAMED_MOST] + ([f"and {more} more"] if more > 0 else [])
    return name, (". ".join(parts) + ".") if parts else name
