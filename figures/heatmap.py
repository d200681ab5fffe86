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

import numpy as np

from figures.fitting import (
    BESIDE_MAP_PIXELS,
    CELL_PIXELS,
    COLORBAR_GAP,
    MAP_WIDTH_MIN,
    MAX_DRAWN,
    PER_COLUMN_MIN,
    axis_ticks,
    axis_title_annotations,
    fit_title,
    fixed_margins,
    numbers_fit,
    pool,
    tick_widths,
)
from figures.map_traces import colour_range, heatmap_traces, hover_spec
from figures.style import (
    DEFAULT_STYLE,
    LABEL_CHARS_MAX,
    MAP_PIXELS_MIN,
    TITLE_PAD,
    Figure,
    Style,
    Title,
    escape,
    figure,
    label_width,
)


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
    title: Title | str  # a plain string is a title with a name only
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

    def __post_init__(self):
        if isinstance(self.title, str):
            if "  " in self.title:  # the parts of a title are fields, never found again in its spaces
                raise ValueError(f"write the title {self.title!r} as Title(name, formula, shape)")
            object.__setattr__(self, "title", Title(self.title))


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


def _ticks(panel: Panel, rows, cols, width: float, label_font: int, map_pixels: int, rows_shown: bool,
           style: Style) -> tuple[dict, dict, int]:  # fmt: skip
    """The labels of the columns and rows, as many as fit, and the columns' angle."""
    base, chars = style.index_base, panel.label_chars
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
    return x_ticks, y_ticks, x_angle


def _drawn_most(panel: Panel, style: Style) -> int:
    """The most rows or columns the panel draws: the style's, unless the panel names its own limit, having pooled
    its values its own way (a long text's overview: by the maximum), which a block mean over them would not be."""
    return style.most_drawn if panel.drawn_most == MAX_DRAWN else panel.drawn_most


def _lay(panel: Panel, width: float, style: Style, rows_shown: bool = True) -> _Laid:
    """Measure a panel drawn `width` pixels wide: pooling, ticks, title, numbers that fit, margins.
    rows_shown=False: no row labels or y title (the panel to its left has the same rows)."""
    data = np.asarray(panel.matrix, dtype=np.float64)
    ok = None if panel.allowed is None else np.asarray(panel.allowed, dtype=bool)
    z, rows, cols = pool(data, ok, limit=_drawn_most(panel, style))
    pooled = len(rows) < data.shape[0] or len(cols) < data.shape[1]
    font, base, chars = style.font_size, style.index_base, panel.label_chars

    label_font = font if max(len(rows), len(cols)) <= 40 else max(9, font - 6)
    cell = CELL_PIXELS * (1 + 0.6 * (font / 16 - 1))  # larger type (presentation mode): taller rows, not as much
    map_pixels = round(min(style.max_map_pixels, max(MAP_PIXELS_MIN, cell * len(rows))))
    x_ticks, y_ticks, x_angle = _ticks(panel, rows, cols, width, label_font, map_pixels, rows_shown, style)
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
    # Level labels need their own width, and a little air: five of them ran into each other ("Thenextday").
    each = (
        1.5 * label_font if x_angle else max(1.5 * label_font, max(tick_widths(x_ticks, label_font)) + label_font / 4)
    )
    fewer = axis_ticks(
        panel.col_labels, cols, most=int((width - margin["l"] - margin["r"]) / each), base=base, label_chars=chars
    )
    if len(fewer["tickvals"]) < len(x_ticks["tickvals"]):
        x_ticks = fewer  # first: the margins are measured on the labels drawn (fewer may have a longer one)
        margin = margins(bar)
    cell_width = (width - margin["l"] - margin["r"]) / len(cols)
    return _Laid(
        panel,
        data,
        z,
        pooled,
        label_font,
        map_pixels,
        x_ticks,
        y_ticks,
        x_angle,
        title,
        subtitle,
        title_size,
        numbers,
        bar,
        margin,
        0.5 * min(cell_width, cell_height),
        rows_shown,
        width,
    )


def _title_annotations(laid: _Laid, x: float, top: float, style: Style) -> list[dict]:
    """A panel's title and subtitle, left-aligned at paper x, their top edge `top` pixels below the figure's."""
    common = {"x": x, "xref": "paper", "xanchor": "left", "yref": "paper", "yanchor": "top", "showarrow": False}
    out = []
    if laid.title:
        out.append(
            {
                **common,
                "text": f"<b>{escape(laid.title)}</b>",
                "y": 1.0,
                "yshift": -top,
                "font": {"size": laid.title_size},
            }
        )
    if laid.subtitle:
        out.append(
            {
                **common,
                "text": escape(laid.subtitle),
                "y": 1.0,
                "yshift": -(top + 1.3 * laid.title_size),
                "font": {"size": style.font_size},
            }
        )
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
        "…" in p.title + p.subtitle and "…" not in p.panel.title.text + p.panel.subtitle for p in laid
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
        for trace in _panel_traces(p, x1, y0, y1, style):
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


def _panel_traces(p: _Laid, x1: float, y0: float, y1: float, style: Style) -> list[dict]:
    """A laid panel's traces, its colour bar right of its map (paper x1, from y1 down to y0)."""
    y_name, x_name = escape(p.panel.y_title or "row"), escape(p.panel.x_title or "column")
    hover = hover_spec(
        p.data.shape,
        p.pooled,
        p.panel.hover_text,
        p.panel.row_labels,
        p.panel.col_labels,
        y_name,
        x_name,
        style.index_base,
    )
    colorbar = {"x": x1 + COLORBAR_GAP / style.width, "xpad": 0, "y": y1, "yanchor": "top", "len": y1 - y0}
    return heatmap_traces(
        p.z,
        diverging=p.panel.diverging,
        zrange=p.panel.zrange or colour_range(p.z, p.panel.diverging),
        hover=hover,
        numbers_font=max(10, style.font_size - 3) if p.numbers else None,
        colorbar=p.bar,
        cross_pixels=p.cross_pixels,
        style=style,
        colorbar_place=colorbar,
        name=p.panel.title.text,
        shown={"title": p.title, "subtitle": p.subtitle},
    )


def heatmap(matrix, *, title: str, style: Style = DEFAULT_STYLE, **options) -> Figure:
    """A labelled heatmap of one 2-D array (rows top to bottom, like the matrix on paper): a one-panel
    heatmaps() figure; `options` are Panel's."""
    return heatmaps([Panel(matrix, title, **options)], style)
