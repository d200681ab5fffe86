"""How every figure is drawn (Style), the colours, and the small helpers all builders share. Plotly only.

A figure is complete when its builder returns it: the builder gets a Style and reads everything
from it (type size, width on the page, numbers in cells, counting from 1, the page's text colour);
no caller patches a figure afterwards.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import html
import io
import re
import unicodedata

import numpy as np
import plotly.graph_objects as go

from figures.encoding import figure_json
from figures.palettes import DEFAULT_PALETTE, PALETTES

PAGE_PIXELS = 900  # about how wide a chart is drawn across the page (wide layout, 1400-px window, sidebar open)
FULL_PAGE_PIXELS = 1340  # the same without the sidebar (presentation mode)
MAP_PIXELS_MIN, MAP_PIXELS_MAX = 140, 620
# Masked cells: an opaque light grey with a dark ✕ on it, the same on a light or a dark page.
MASKED_GREY, MASKED_CROSS = "rgb(190, 190, 190)", "rgb(40, 40, 40)"
# The page's own text colours (Streamlit's light and dark themes): labels in them meet 4.5:1, on screen
# and in the PNG the camera button saves (which is drawn from the figure, not from the page's CSS).
TEXT_COLOURS = {"light": "#31333F", "dark": "#FAFAFA"}
TITLE_PAD = 8  # pixels between a chart's top edge and its title
MAX_DRAWN = 128  # a map with more rows or columns is block-averaged down to this for drawing (figures.fitting.pool)
LABEL_CHARS_MAX = 16  # a longer token is cut to this many characters on an axis ("…"); hovers keep it whole
# Plotly's default template is ~6 KB of JSON per figure, and Streamlit's theme replaces its styling in
# the browser anyway: without it a rerun of the walkthrough sends ~100 KB less.
NO_TEMPLATE = go.layout.Template()


class Figure:
    """A figure as the plain dicts its builder made (`traces`, `parts`): what the app draws is written to
    JSON from these directly (to_json), without Plotly's object layer. Building a go.Figure and writing it
    out through it was a third of a rerun with new numbers (README "A whole class at once"), paid by every
    session on every slider step. The Plotly object is made on first use (`.plotly`: the HTML export, the
    tests) and every other attribute is read from it, so `figure.data[0].z` and `figure.layout.height` work
    as on a go.Figure. Nothing changes a figure once built (module docstring)."""

    def __init__(self, data: list[dict], layout: dict):
        self.traces = data
        self.parts = layout

    @functools.cached_property
    def plotly(self) -> go.Figure:
        return go.Figure(data=self.traces, layout=self.parts, _validate=False)

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("traces", "parts"):  # not there yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.plotly, name)

    @property
    def height(self) -> int:
        return self.parts["height"]

    def to_json(self) -> str:
        """The JSON plotly.io.to_json would write for the same figure (tests/test_figures.py checks every
        figure the app builds): numpy arrays as plotly.js typed arrays, NaN as null."""
        return figure_json(self.traces, self.parts)


def figure(data: list[dict], layout: dict) -> Figure:
    """Every figure of the app is made here, from plain dicts, without Plotly's property-by-property
    validation (a third of a Walkthrough rerun on the server, paid by every session on every slider step).
    tests/test_figures.py validates every figure the app builds instead (Plotly raises on a misspelled or
    out-of-range property there)."""
    return Figure(data, layout)


@dataclasses.dataclass(frozen=True)
class Style:
    """font_size: the base type size (22 in presentation mode). show_numbers: write values in cells
    where they fit. width: about how many pixels wide the figure is drawn. side_by_side: a stage's
    figures share one row (each gets a share of `width`). index_base: 1 counts tokens and dimensions
    from 1 as the lectures do (α₂₂), 0 from 0 as Python does. max_map_pixels: the tallest a map may be
    (presentation mode keeps a stage on one screen). theme: "light" or "dark", the page's colours. band: on a
    slide, the most dimensions a map draws along an axis that counts them (d_model, d_k): the first `band`, the
    rest summarised (figures.stages.banded); 0 draws them all. palette: the reader's choice of colour scales
    (figures.palettes), each checked for colour-blind readers. most_drawn: the most rows or columns a map draws,
    more block-averaged (a deck's file draws fewer where a view would not fit in it: app_pages/decks/export.py)."""

    font_size: int = 16
    show_numbers: bool = True
    width: int = PAGE_PIXELS
    side_by_side: bool = False
    index_base: int = 1
    max_map_pixels: int = MAP_PIXELS_MAX
    theme: str = "light"
    band: int = 0
    palette: str = DEFAULT_PALETTE
    most_drawn: int = MAX_DRAWN

    def beside(self, count: int) -> Style:
        """The style of each of `count` figures that share one row (when side_by_side)."""
        return dataclasses.replace(self, width=self.width // count) if self.side_by_side and count > 1 else self

    def colorscale(self, diverging: bool) -> list:
        """The palette's scale for signed numbers (diverging) or for weights."""
        return PALETTES[self.palette].scale(diverging)  # checked by ui.sidebar.settings_from

    @property
    def text_colour(self) -> str:
        return TEXT_COLOURS.get(self.theme, TEXT_COLOURS["light"])

    def index(self, i: int) -> int:
        """Position i (0-based, as stored) as the reader counts it."""
        return i + self.index_base

    def base_layout(self) -> dict:
        """What every figure's layout starts with: no template, the type size and the page's text colour
        (also for hover boxes and legends, which a projector needs as large as the rest)."""
        return {
            "template": NO_TEMPLATE,
            "font": {"size": self.font_size, "color": self.text_colour},
            "hoverlabel": {"align": "left", "font": {"size": self.font_size}},
            "legend": {"font": {"size": self.font_size - 2, "color": self.text_colour}},
        }

    def layout(self, **parts) -> dict:
        """A complete layout: base_layout(), the figure's own parts, and the page's text colour set on every
        title, axis (ticks and title), legend and annotation. Streamlit's chart template colours each of these
        itself, in a grey of 3.7:1 on white; a colour set here wins, so labels read on screen and in the PNG
        the camera button saves (drawn from the layout, not from the page's CSS)."""
        layout = {**self.base_layout(), **parts}
        colour = {"color": self.text_colour}
        title = layout.get("title")
        if isinstance(title, dict):
            title["font"] = {**title.get("font", {}), **colour}
            if isinstance(title.get("subtitle"), dict):
                title["subtitle"]["font"] = {**title["subtitle"].get("font", {}), **colour}
        for name, axis in layout.items():  # Streamlit's template sizes ticks at 12 px too: a projector needs more
            if (name.startswith("xaxis") or name.startswith("yaxis")) and isinstance(axis, dict):
                axis.setdefault("automargin", True)  # a chart that places nothing itself lets Plotly make room
                axis["tickfont"] = {"size": self.font_size - 2, **axis.get("tickfont", {}), **colour}
                axis_title = axis.get("title", {})
                axis["title"] = {**axis_title, "font": {"size": self.font_size, **axis_title.get("font", {}), **colour}}
        for annotation in layout.get("annotations", []):
            annotation["font"] = {"size": self.font_size - 2, **annotation.get("font", {}), **colour}
        return layout

    def title(self, text: str, subtitle: str = "", size: int | None = None, subtitle_size: int | None = None) -> dict:
        """A title (and subtitle line) anchored at the top of the chart, TITLE_PAD pixels inside it."""
        return {
            "text": text,
            "font": {"size": size or self.font_size + 2},
            "subtitle": {"text": subtitle, "font": {"size": subtitle_size or self.font_size - 2}},
            "yref": "container",
            "y": 1.0,
            "yanchor": "top",
            "pad": {"t": TITLE_PAD},
        }

    def colorbar(self, **parts) -> dict:
        """A colour bar whose numbers and title take the page's text colour (see layout())."""
        return {
            **parts,
            "tickfont": {"color": self.text_colour},
            "title": {**parts.get("title", {}), "font": {"color": self.text_colour}},
        }


DEFAULT_STYLE = Style()


def title_height(title_size: float, subtitle_size: float = 0) -> float:
    """Pixels a title takes from the chart's top edge, with its subtitle line if subtitle_size is given.
    Measured in Chromium: Plotly leaves a blank line between title and subtitle (title 20 px and subtitle
    16 px: the subtitle's text ends 71 px down; 26 and 22: 92 px)."""
    return 1.3 * title_size + (2.6 * subtitle_size + 2 if subtitle_size else 0)


def escape(label: str) -> str:
    """Make a token safe to show as Plotly text: "<b>" is drawn as the four characters <b>."""
    return html.escape(str(label), quote=False)


# What formats text inside a line in Streamlit's markdown: emphasis, code, links, HTML-looking tags, LaTeX,
# strikethrough, tables. (Line-start marks like "#" or "1." cannot occur: the text is quoted mid-sentence.)
MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]<>$~|])")


def markdown_literal(text: str) -> str:
    """A token to quote in a sentence that st.markdown shows: its punctuation backslash-escaped, so that
    "_it_" stays _it_ (not italic) and "$" starts no formula (Streamlit renders $…$ as LaTeX)."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", str(text))


def shorten(label: str, limit: int = LABEL_CHARS_MAX) -> str:
    """A label of at most `limit` characters: "antidisestablishm…" keeps the margins sane."""
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


@functools.lru_cache(maxsize=8192)
def label_width(text: str, font_size: float) -> float:
    """About how many pixels a label is wide, erring on the wide side: wide characters (CJK, emoji)
    1.2 em, zero-width and combining characters nothing, lower-case letters, digits and punctuation
    0.6 em, the rest (capitals, other scripts) 0.75 em. Kept: a page measures the same tokens and
    numbers many times over."""
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


def subscript(number: int) -> str:
    """12 -> "₁₂", for α₂₂ and q₂·k₃ in hovers."""
    return str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def as_numpy(tensor) -> np.ndarray:
    return tensor.detach().cpu().double().numpy()


@dataclasses.dataclass(frozen=True)
class Title:
    """A map's title in its parts: its name ("scores"), the formula that makes it ("Q·Kᵀ") and its shape
    ("[4x8]·[8x4] = [4x4]", or what its cells hold). Drawn whole where it fits its chart; where it does not, the
    shape and then the formula move to the subtitle line (figures.fitting.fit_title)."""

    name: str
    formula: str = ""
    shape: str = ""

    @property
    def text(self) -> str:
        """The whole title as one line: "scores = Q·Kᵀ  [4x8]·[8x4] = [4x4]"."""
        formula = f" = {self.formula}" if self.formula else ""
        shape = f"  {self.shape}" if self.shape else ""
        return f"{self.name}{formula}{shape}"


def shape_text(*dims: int) -> str:
    return "[" + "x".join(str(d) for d in dims) + "]"


@dataclasses.dataclass
class Matrix:
    """A matrix to export exactly (CSV), with its labels."""

    name: str
    values: np.ndarray
    row_labels: list[str]
    col_labels: list[str]

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([self.name, *self.col_labels])
        for label, row in zip(self.row_labels, self.values, strict=True):
            writer.writerow([label, *(f"{v:.9g}" for v in row)])
        return buffer.getvalue()
