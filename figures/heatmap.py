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

import dataclasses
import functools
import html
import math
import re

import numpy as np

from figures.style import (
    DEFAULT_STYLE,
    LABEL_CHARS_MAX,
    MAP_PIXELS_MIN,
    MASKED_CROSS,
    MASKED_GREY,
    TITLE_PAD,
    Figure,
    Style,
    escape,
    figure,
    label_width,
    shorten,
)

MAX_DRAWN = 128  # a map with more rows or columns is block-averaged down to this for drawing
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
    body size; the title's last words move down to the head of the subtitle line, whole ("q after" over "RoPE",
    never "q aft…"); the moved formula and shape are dropped again, shape first (the caller's subtitle, e.g.
    "head 1 of 2", stays); only then is text cut with "…". Returns (title, subtitle, title size)."""
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
        above = X_TICK_GAP + x_labels_height(tick_widths(laid.x_ticks, laid.label_font), laid.label_font,
                                             laid.x_angle) + AXIS_STANDOFF  # fmt: skip
        half = label_width(laid.panel.x_title, font) / width / 2  # wider than a narrow map: kept inside the chart
        centre = min(max((x0 + x1) / 2, half), 1 - half)
        out.append({**common, "text": escape(laid.panel.x_title), "x": centre, "xanchor": "center",
                    "y": y1, "yanchor": "bottom", "yshift": above})  # fmt: skip
    if laid.panel.y_title and laid.rows_shown:
        left = max(tick_widths(laid.y_ticks, laid.label_font)) + TICK_GAP + AXIS_STANDOFF
        out.append({**common, "text": escape(laid.panel.y_title), "textangle": -90, "x": x0 - left / width,
                    "xanchor": "right", "y": y_mid, "yanchor": "middle"})  # fmt: skip
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


@dataclasses.dataclass(frozen=True)
class Panel:
    """One map of a figure: a 2-D array and how to draw it.

    title, subtitle, row_labels, col_labels, x_title, y_title: plain text (escaped when drawn).
    row_labels / col_labels: tokens for the axes (None = numbered dimensions, counted from
    style.index_base). allowed: bool array; False cells are drawn grey with a ✕, not as a colour.
    hover_text: optional 2-D array of (already escaped) strings, used when the map is small.
    zrange: fix the colour range (e.g. weights 0..1, or shared across heads); else fitted to the data.
    colorbar: None draws one unless the cells carry their numbers (then they say what a bar would).
    x_tick_angle: the column labels' angle; by default -45° when there are more than 6 tokens.
    label_chars: tokens longer than this are cut on the axes (hovers keep them whole).
    drawn_most: a map with more rows or columns is block-averaged down to this many (MAX_DRAWN by default).
    """

    matrix: object
    title: str
    subtitle: str = ""
    row_labels: object = None
    col_labels: object = None
    x_title: str = ""
    y_title: str = ""
    diverging: bool = True
    allowed: object = None
    hover_text: object = None
    zrange: tuple[float, float] | None = None
    colorbar: bool | None = None
    x_tick_angle: int | None = None
    label_chars: int = LABEL_CHARS_MAX
    drawn_most: int = MAX_DRAWN  # rows and columns drawn at most; more are block-averaged (pool)


@dataclasses.dataclass
class _Laid:
    """A panel measured for the width it gets: what it draws and the pixels it needs around its map."""

    panel: Panel
    data: np.ndarray
    z: np.ndarray
    pooled: bool
    label_font: int
    map_pixels: int
    x_ticks: dict
    y_ticks: dict
    x_angle: int
    title: str
    subtitle: str
    title_size: int
    numbers: bool
    bar: bool
    margin: dict  # pixels left of, right of, above and below the map, within the panel's share of the figure
    cross_pixels: float
    rows_shown: bool = True  # False: the panel to its left names the same rows (see heatmaps)
    width: float = 0.0  # the panel's share of the figure, pixels

    @property
    def map_width(self) -> float:
        return self.width - self.margin["l"] - self.margin["r"]

    @property
    def height(self) -> float:
        return self.margin["t"] + self.map_pixels + self.margin["b"]


def _lay(panel: Panel, width: float, style: Style, rows_shown: bool = True) -> _Laid:
    """Measure a panel drawn `width` pixels wide: pooling, ticks, title, numbers that fit, margins.
    rows_shown=False: no row labels or y title (the panel to its left has the same rows)."""
    data = np.asarray(panel.matrix, dtype=np.float64)
    ok = None if panel.allowed is None else np.asarray(panel.allowed, dtype=bool)
    z, rows, cols = pool(data, ok, limit=panel.drawn_most)
    pooled = len(rows) < data.shape[0] or len(cols) < data.shape[1]
    font, base, chars = style.font_size, style.index_base, panel.label_chars

    label_font = font if max(len(rows), len(cols)) <= 40 else max(9, font - 6)
    cell = CELL_PIXELS * (1 + 0.6 * (font / 16 - 1))  # larger type (presentation mode): taller rows, not as much
    map_pixels = round(min(style.max_map_pixels, max(MAP_PIXELS_MIN, cell * len(rows))))
    # A slanted column label needs ~1.5 font sizes of width; a row label one line of type.
    beside = BESIDE_MAP_PIXELS if rows_shown else BESIDE_MAP_PIXELS / 2  # no row labels: the colour bar at most
    x_most, y_most = int((width - beside) / (1.5 * label_font)), int(map_pixels / label_font)
    x_ticks = axis_ticks(panel.col_labels, cols, most=x_most, base=base, label_chars=chars)
    y_ticks = axis_ticks(panel.row_labels, rows, most=y_most, base=base, label_chars=chars)
    if not rows_shown:
        y_ticks = {**y_ticks, "showticklabels": False}
    x_angle = panel.x_tick_angle
    if x_angle is None:
        x_angle = -45 if panel.col_labels is not None and len(cols) > 6 else 0
    title, subtitle, title_size = fit_title(panel.title, panel.subtitle, width, font)

    def margins(bar: bool) -> dict:
        margin = fixed_margins(
            title=bool(title),
            subtitle=bool(subtitle),
            title_size=title_size,
            font_size=font,
            label_font=label_font,
            x_widths=tick_widths(x_ticks, label_font),
            y_width=max(tick_widths(y_ticks, label_font)) if rows_shown else 0,
            x_angle=x_angle,
            x_title=bool(panel.x_title),
            y_title=bool(panel.y_title) and rows_shown,
            colorbar=bar,
        )
        # A y title longer than a short map (3 rows of W_Q on a projector: "input dimension") is centred on it and
        # hangs past both ends: room below the map for it (above it, the title lines are taller than the overhang).
        if panel.y_title and rows_shown:
            overhang = (label_width(panel.y_title, font) - map_pixels) / 2
            margin["b"] = max(margin["b"], round(overhang + 10))
        return margin

    margin = margins(bar=False)
    cell_height = map_pixels / len(rows)
    numbers_font = max(10, font - 3)
    fits = numbers_fit(z, (width - margin["l"] - margin["r"]) / len(cols), cell_height, numbers_font)
    numbers = style.show_numbers and not pooled and fits
    bar = not numbers if panel.colorbar is None else panel.colorbar
    if bar:
        margin = margins(bar=True)
        if width - margin["l"] - margin["r"] < MAP_WIDTH_MIN and panel.colorbar is None:
            bar, margin = False, margins(bar=False)  # no room for a bar beside a readable map: hovers say the values
    # The columns' labels again, for the map's own width now that its margins are known (x_most guessed them):
    # slanted labels closer than 1.5 font sizes overlap (a 15-token map in a slide's half column: 120 pixels).
    fewer = axis_ticks(panel.col_labels, cols, most=int((width - margin["l"] - margin["r"]) / (1.5 * label_font)),
                       base=base, label_chars=chars)  # fmt: skip
    if len(fewer["tickvals"]) < len(x_ticks["tickvals"]):
        x_ticks = fewer  # first: the margins are measured on the labels drawn (fewer may have a longer one)
        margin = margins(bar)
    cell_width = (width - margin["l"] - margin["r"]) / len(cols)
    return _Laid(panel, data, z, pooled, label_font, map_pixels, x_ticks, y_ticks, x_angle, title, subtitle,
                 title_size, numbers, bar, margin, 0.5 * min(cell_width, cell_height), rows_shown, width)  # fmt: skip


def _title_annotations(laid: _Laid, x: float, top: float, style: Style) -> list[dict]:
    """A panel's title and subtitle, left-aligned at paper x, their top edge `top` pixels below the figure's."""
    common = {"x": x, "xref": "paper", "xanchor": "left", "yref": "paper", "yanchor": "top", "showarrow": False}
    out = []
    if laid.title:
        out.append({**common, "text": f"<b>{escape(laid.title)}</b>", "y": 1.0, "yshift": -top,
                    "font": {"size": laid.title_size}})  # fmt: skip
    if laid.subtitle:
        out.append({**common, "text": escape(laid.subtitle), "y": 1.0, "yshift": -(top + 1.3 * laid.title_size),
                    "font": {"size": style.font_size}})  # fmt: skip
    return out


def _side_by_side(panels: list[Panel], style: Style) -> list[_Laid] | None:
    """Panels in a row, their maps equally wide. Panels with the same rows (Q, K and V: the tokens) name them
    once, left of the first map, which leaves the maps room for their numbers. None if a map would still be
    narrower than MAP_WIDTH_MIN (or PER_COLUMN_MIN per column): then they are stacked."""
    n = len(panels)
    first = panels[0]
    same_rows = n > 1 and all(
        np.shape(p.matrix)[0] == np.shape(first.matrix)[0]
        and p.y_title == first.y_title
        and (p.row_labels is None) == (first.row_labels is None)
        and (p.row_labels is None or list(p.row_labels) == list(first.row_labels))
        for p in panels
    )
    shown = [True] + [not same_rows] * (n - 1)

    def lay_equal(laid: list[_Laid], panels: list[Panel]) -> list[_Laid]:  # each gets its margins + an equal map
        beside = [p.margin["l"] + p.margin["r"] for p in laid]
        map_width = (style.width - sum(beside)) / n
        return [_lay(panel, beside[k] + map_width, style, shown[k]) for k, panel in enumerate(panels)]

    # First as if no map needed a colour bar (numbers in the cells instead); then, if some do, with their bars.
    barless = [dataclasses.replace(panel, colorbar=False) for panel in panels]
    laid = lay_equal([_lay(panel, style.width / n, style, shown[k]) for k, panel in enumerate(barless)], panels)
    if any(p.bar for p in laid):
        laid = lay_equal(laid, panels)
    narrow = any(p.map_width < max(MAP_WIDTH_MIN, PER_COLUMN_MIN * p.z.shape[1]) for p in laid)
    return None if narrow and n > 1 else laid


def fit_side_by_side(panels: list[Panel], style: Style, whole_titles: bool = False) -> bool:
    """Whether these panels can share a row at this style's width (else heatmaps stacks them); with
    `whole_titles`, also without a title or subtitle cut short for want of room (a slide's five RoPE maps: "q
    bef…"; GQA's "key/value he…")."""
    laid = _side_by_side(panels, style)
    if laid is None:
        return False
    return not whole_titles or not any(
        "…" in p.title + p.subtitle and "…" not in p.panel.title + p.panel.subtitle for p in laid
    )


def heatmaps(panels: list[Panel], style: Style = DEFAULT_STYLE, *, stacked: bool = False) -> Figure:
    """One figure of several maps: side by side, each a share of style.width, or stacked one above the other.

    A stage's matrices (W_Q, W_K and W_V; Q, K and V; ...) are one figure: Streamlit mounts and draws every
    chart it is sent, so one figure of three maps repaints in less time than three figures.
    Each panel has its own axes, colour scale and bar, numbers where they fit its cells, and title; its value
    trace is named after its title (tests and exports find a panel by that name). The figure's margins are
    zero: everything is placed here, in pixels, so Plotly draws the figure once without measuring it.
    """
    laid = [_lay(panel, style.width, style) for panel in panels] if stacked else _side_by_side(panels, style)
    if laid is None:  # side by side, a map would be too narrow to read
        return heatmaps(panels, style, stacked=True)
    if stacked:
        total = sum(p.height for p in laid)
        tops = [sum(p.height for p in laid[:k]) for k in range(len(laid))]  # each panel's top edge, pixels
        lefts = [0.0] * len(laid)
    else:
        total = max(p.margin["t"] for p in laid) + max(p.map_pixels for p in laid) + max(p.margin["b"] for p in laid)
        tops = [0.0] * len(laid)
        lefts = [sum(p.width for p in laid[:k]) for k in range(len(laid))]
    map_top = [tops[k] + (p.margin["t"] if stacked else max(q.margin["t"] for q in laid)) for k, p in enumerate(laid)]

    traces, axes, annotations = [], {}, []
    for k, p in enumerate(laid):
        suffix = "" if k == 0 else str(k + 1)
        x0 = (lefts[k] + p.margin["l"]) / style.width
        x1 = (lefts[k] + p.width - p.margin["r"]) / style.width
        y1 = 1 - map_top[k] / total
        y0 = 1 - (map_top[k] + p.map_pixels) / total
        y_name, x_name = escape(p.panel.y_title or "row"), escape(p.panel.x_title or "column")
        hover = _hover(p.data.shape, p.pooled, p.panel.hover_text, p.panel.row_labels, p.panel.col_labels,
                       y_name, x_name, style.index_base)  # fmt: skip
        colorbar = {"x": x1 + COLORBAR_GAP / style.width, "xpad": 0, "y": y1, "yanchor": "top", "len": y1 - y0}
        for trace in heatmap_traces(
            p.z,
            diverging=p.panel.diverging,
            zrange=p.panel.zrange or _colour_range(p.z, p.panel.diverging),
            hover=hover,
            numbers_font=max(10, style.font_size - 3) if p.numbers else None,
            colorbar=p.bar,
            cross_pixels=p.cross_pixels,
            style=style,
            colorbar_place=colorbar,
            name=p.panel.title,
            shown={"title": p.title, "subtitle": p.subtitle},
        ):
            traces.append({**trace, "xaxis": f"x{suffix}", "yaxis": f"y{suffix}"})
        rows, cols = p.z.shape
        axis = {"automargin": False, "showgrid": False, "zeroline": False, "tickfont": {"size": p.label_font}}
        axes[f"xaxis{suffix}"] = {
            **axis,
            **p.x_ticks,
            "domain": [x0, x1],
            "anchor": f"y{suffix}",
            "side": "top",
            "tickangle": p.x_angle,
            "range": [-0.5, cols - 0.5],
        }
        axes[f"yaxis{suffix}"] = {
            **axis,
            **p.y_ticks,
            "domain": [y0, y1],
            "anchor": f"x{suffix}",
            "range": [rows - 0.5, -0.5],  # row 1 at the top, as on paper
        }
        annotations += _title_annotations(p, lefts[k] / style.width, tops[k] + TITLE_PAD, style)
        annotations += axis_title_annotations(p, x0, x1, y1, (y0 + y1) / 2, style.width, style.font_size)
    layout = style.layout(
        **axes,
        height=round(total),
        margin={"l": 0, "r": 0, "t": 0, "b": 0, "autoexpand": False},
        showlegend=False,
        annotations=annotations,
    )
    # One constructor call: Plotly validates once, where update_layout/update_axes calls each re-walk the figure.
    return figure(traces, layout)


def heatmap(matrix, *, title: str, style: Style = DEFAULT_STYLE, **options) -> Figure:
    """A labelled heatmap of one 2-D array (rows top to bottom, like the matrix on paper): a one-panel
    heatmaps() figure; `options` are Panel's."""
    return heatmaps([Panel(matrix, title, **options)], style)
