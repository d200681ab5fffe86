"""The pieces every stage builder draws with: panels of rows, square maps and matrices, fitted side by side or
in two rows, and the sentences saying where the numbers come from."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attention_core.variants import (
    VARIANTS,
)
from figures.heatmap import Panel, fit_side_by_side, heatmaps
from figures.style import (
    Figure,
    Matrix,
    Style,
    shape_text,
)


def tokens_of(trace) -> list[str]:
    return list(trace.tokens)


def dim_labels(count: int, style: Style, prefix: str = "d") -> list[str]:
    return [f"{prefix}{style.index(i)}" for i in range(count)]


def head_title(trace, head: int) -> str:
    """Which head a figure shows; a one-head trace names itself by its label (e.g. a what-if)."""
    return f"head {head + 1} of {trace.heads}" if trace.heads > 1 else trace.label


def allowed_cells(trace) -> np.ndarray | None:
    return None if trace.mask is None else trace.mask.cpu().numpy()


def banded(values: np.ndarray, style: Style, rows: bool, cols: bool) -> np.ndarray:
    """What a map draws of `values` on a slide: along an axis that counts dimensions (`rows`, `cols`) and has more
    than style.band of them, the first style.band (a band: band_note says so beside the maps, and the title keeps
    the whole shape). Token axes are never cut; exports keep every number."""
    band = style.band
    cut_rows, cut_cols = rows and band and values.shape[0] > band, cols and band and values.shape[1] > band
    return values[: band if cut_rows else None, : band if cut_cols else None]


def band_note(parts: list[tuple[Panel, Matrix]], style: Style) -> str:
    """The sentence that says which of these maps `banded` cut (a panel that draws less than its export), ""
    if none."""
    cut = [f"{m.name} {shape_text(*m.values.shape)}" for panel, m in parts if np.shape(panel.matrix) != m.values.shape]
    if not cut:
        return ""
    return f"On this slide: the first {style.band} dimensions of {', '.join(cut)}; the export has every number."


def rows_panel(
    trace, values, name: str, title: str, style: Style, subtitle: str = "", columns: str = "dimension"
) -> tuple[Panel, Matrix]:
    """A matrix with one row per token (X, Q, K, V, context, output); on a slide a band of its dimensions.
    `columns`: what its columns are (a variant's own part may say: the sink's share has one, "sink")."""
    shown = banded(values, style, rows=False, cols=True)
    panel = Panel(shown, title, subtitle, row_labels=tokens_of(trace), x_title=columns, y_title="token")
    return panel, Matrix(name, values, tokens_of(trace), dim_labels(values.shape[1], style))


def square_panel(trace, values, name, title, *, diverging, masked, subtitle="", hover=None, zrange=None):
    """A query x key map. `masked`: draw the mask's hidden cells grey with a ✕ (masked scores, weights);
    scores and scaled scores exist for every pair, the mask comes after them."""
    panel = Panel(
        values,
        title,
        subtitle,
        row_labels=tokens_of(trace),
        col_labels=tokens_of(trace),
        x_title="key (attended to)",
        y_title="query (attending)",
        diverging=diverging,
        allowed=allowed_cells(trace) if masked else None,
        hover_text=hover,
        zrange=zrange,
    )
    return panel, Matrix(name, values, tokens_of(trace), tokens_of(trace))


def matrix_panel(values, name, title, style, row_name, col_name, subtitle="") -> tuple[Panel, Matrix]:
    """A weight matrix (W_Q, W_K, W_V, W_O): numbered rows and columns; on a slide a band of each."""
    rows, cols = values.shape
    panel = Panel(banded(values, style, rows=True, cols=True), title, subtitle, x_title=col_name, y_title=row_name)
    return panel, Matrix(name, values, dim_labels(rows, style), dim_labels(cols, style))


MOST_IN_A_ROW = 5  # maps side by side in one figure; more go in two rows


class Drawn(list):
    """A stage's figures, as laid_out makes them: `rows`, whether they are the rows of one picture (drawn one under
    the other, never side by side); `band`, the sentence saying which maps draw a band of their numbers."""

    rows: bool = False
    band: str = ""


def laid_out(parts: list[tuple[Panel, Matrix]], style: Style) -> tuple[list[Figure], list[Matrix]]:
    """A stage's panels as ONE figure (side by side where the style says so, else stacked), and its exports. Too
    many for one row (MLA's weights), or on a slide too narrow to share one (GPT-2's concat, W_O and output) or to
    write their titles whole (RoPE's five maps): two rows of shorter maps, one screen."""
    panels, matrices = zip(*parts, strict=True)
    crowded = (
        style.side_by_side
        and style.band
        and len(panels) > 1
        and not fit_side_by_side(list(panels), style, whole_titles=True)
    )
    if style.side_by_side and (len(panels) > MOST_IN_A_ROW or crowded):
        half = math.ceil(len(panels) / 2)
        rows = [list(panels[:half]), list(panels[half:])]
        shorter = dataclasses.replace(style, max_map_pixels=style.max_map_pixels * 2 // 5)
        drawn = Drawn(heatmaps(row, shorter) for row in rows)
        drawn.rows = True
    else:
        drawn = Drawn([heatmaps(list(panels), style, stacked=not style.side_by_side)])
    drawn.band = band_note(parts, style)
    return drawn, list(matrices)


def origin(trace, names: tuple[str, ...]) -> str:
    """Where these matrices come from: typed, drawn (with which init and seed) or the model's own."""
    typed = [n for n in names if n in trace.given]
    drawn = [n for n in names if n not in trace.given]
    label = {"x": "X"} | {spec.name: spec.label for spec in VARIANTS[trace.variant].weights}
    parts = []
    if typed:
        parts.append(f"{', '.join(label[n] for n in typed)} {trace.typed_as}")
    if drawn and trace.drawn:
        parts.append(f"{', '.join(label[n] for n in drawn)} random ({trace.drawn})")
    return "; ".join(parts)


def made(given: set[str], needed: set[str], typed_as: str = "typed") -> str:
    """How a layer's weights came to be, in a word or three: "random", `typed_as` ("typed", "trained (...)") when
    every one it needs was given, else "some typed, the rest random". given: the names given; needed: those the
    layer uses."""
    given = given & needed
    if not given:
        return "random"
    return typed_as if given == needed else f"some {typed_as.split(' (')[0]}, the rest random"
