"""A stage on screen: its style, its figures side by side or stacked, its words and its exports; errors shown as
sentences, never as tracebacks."""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import streamlit as st
import streamlit.components.v2

from attention_core import (
    AttentionTrace,
)
from figures.stages import BY_KEY, heading, stage_view
from figures.style import FULL_PAGE_PIXELS, PAGE_PIXELS, Style, markdown_literal
from ui.controls import Settings
from ui.exports import export_buttons
from ui.links import check_choice, keep_in_address
from ui.live_chart import show_figure
from ui.memo import remember
from ui.screen import PRESENTATION_MAP_PIXELS, SLIDE_BAND, SLIDE_COLUMNS, SLIDE_FIGURE_PIXELS, slide_pixels
from ui.slides import anchor

log = logging.getLogger("attention_explorer")


SIDE_BY_SIDE_MAX = 10  # tokens; beyond this, maps get too narrow to read when placed side by side
# Session state: the most rows or columns a map draws, where a deck's file asks for fewer than the page draws (a
# view whose figures would not fit in the file: app_pages/decks/export.py); None: as the page draws them.
DRAWN_AT_MOST = "drawn_at_most"


def style_for(settings: Settings, *, side_by_side: bool = False, columns: int = 1, slide: bool = False) -> Style:
    """How figures are drawn: type size, numbers and counting from the sidebar; the page's width (wider
    without the sidebar, in presentation mode); `side_by_side` when a stage's figures share a row;
    `columns` when the page itself is split (Compare: 2); `slide` when the figures take the right-hand
    column of a slide (show_stage); the page's theme for its text colour."""
    width = slide_pixels(FULL_PAGE_PIXELS) if settings.present else PAGE_PIXELS
    if slide:
        width = width * SLIDE_COLUMNS[1] // sum(SLIDE_COLUMNS)
    style = Style(
        font_size=slide_pixels(settings.font_size) if settings.present else settings.font_size,
        show_numbers=settings.numbers,
        width=width // columns,
        side_by_side=side_by_side,
        index_base=settings.index_base,
        theme=st.context.theme.type or "light",
        palette=settings.palette,
    )
    if st.session_state.get(DRAWN_AT_MOST):
        style = dataclasses.replace(style, most_drawn=st.session_state[DRAWN_AT_MOST])
    if not settings.present:
        return style
    return dataclasses.replace(style, max_map_pixels=slide_pixels(PRESENTATION_MAP_PIXELS), band=SLIDE_BAND)


@contextlib.contextmanager
def friendly_errors():
    """Show bad input (the ValueError the core raises, naming the field, the value and what is allowed)
    as a plain message. Anything else is a bug: it goes to Streamlit, which logs it and shows no details
    (client.showErrorDetails = "none")."""
    try:
        yield
    except ValueError as error:
        log.info("refused a request: %s", error)  # the reason; sentences appear only as their length
        st.error(f"⚠️ {markdown_literal(error)}")  # it quotes the input: shown as typed, never as markdown


def show_figures(figures, key: str, side_by_side: bool, name: str | None = None, shares: tuple[int, ...] = ()) -> None:
    """The figures, keyed `key`-0, `key`-1, ... (a chart with the same key next time is updated in place);
    `name`: what their PNG files are called (by default the key); `shares`: side by side, their widths in
    proportion (by default equal)."""
    places = st.columns(shares or len(figures)) if side_by_side and len(figures) > 1 else None
    for i, figure in enumerate(figures):
        with places[i] if places else contextlib.nullcontext():
            show_figure(figure, f"{key}-{i}", filename=f"{name or key}-{i}")


def _choices(stage, trace: AttentionTrace, style: Style, query_key: str, slide: bool) -> tuple[int | None, dict]:
    """A stage's own choices, drawn: for a per-query stage the token shown in detail (its index), and each of the
    stage's options (by key), kept in the address as shown."""
    query = None
    if stage.per_query:
        check_choice(query_key, "one token in detail", [f"{style.index(i)}: {t}" for i, t in enumerate(trace.tokens)])
        query = st.selectbox(
            "one token in detail",
            range(trace.n_tokens),
            format_func=lambda i: f"{style.index(i)}: {trace.tokens[i]}",
            key=query_key,
            bind="query-params",
            label_visibility="collapsed" if slide else "visible",  # a slide: the sum below names the token
        )
        query = min(query or 0, trace.n_tokens - 1)  # a shorter sentence may leave an old choice out of range
    chosen = {}
    for option in stage.options:  # the stage's own choices, in the address as shown (no format_func)
        value = st.segmented_control(
            option.label, option.choices, default=option.default, key=option.key, bind="query-params"
        )
        chosen[option.key] = option.default if value is None else value
        keep_in_address(option.key, chosen[option.key], option.default)
    return query, chosen


def show_stage(
    trace: AttentionTrace,
    key: str,
    head: int,
    style: Style,
    prefix: str = "",
    query_key: str = "query",
    places: tuple | None = None,
    marks: bool = False,
) -> None:
    """One stage of the registry: heading, formula, its sentences, its figure and exports; for a per-query
    stage, a picker for the token shown in detail (a context vector term by term) and the sum written out.
    `places`: (words, figures) columns, for presentation mode's slide layout (slide_columns()), so that a
    stage fits one screen; by default all in one column. On a slide the charts are keyed by their place, not
    by the stage: the next stage's figures go to the charts already on screen (drawn in place, ~4x faster
    than new charts). `marks`: read normally, the stage is its slide's part, and its container the slide's mark."""
    stage = BY_KEY[key]
    # Read normally, a stage is a container of its own, keyed: when a stage above it comes or goes (the causal
    # mask's, a variant's) or a head picker appears, its elements keep their place in the browser and are updated,
    # not made anew (all of a page's charts and formulas were, on a heads step: docs/design-notes.md). Where it is a
    # slide's part, its key is the slide's mark, the place presentation mode's "Leave" returns to (`marks`: the page
    # asked slides.shows(key, marked=True)).
    words, pictures = places or (st.container(key=anchor(key) if marks else f"stage-{prefix}{key}"),) * 2
    with words:
        st.header(heading(key, trace), anchor=key)  # h2: under the page's h1 (axe: heading-order)
        st.latex(stage.formula_for(trace))
        # The sentences depend on the numbers: where the reader chooses what is shown (drawn below them), a place
        # is kept for them and filled once the view is built; else they are written once it is (one message less).
        sentences = st.empty() if stage.per_query or stage.options else None
        query, chosen = _choices(stage, trace, style, query_key, slide=bool(places))
    options = tuple(sorted(chosen.items()))
    view = remember(
        trace, ("view", key, head, style, query, options), lambda: stage_view(trace, key, head, style, query, chosen)
    )
    if places and any(figure.height > slide_pixels(SLIDE_FIGURE_PIXELS) for figure in view.figures):
        # Too many maps for the slide's right-hand column (they were stacked): the page's whole width, below.
        wide = dataclasses.replace(style, width=slide_pixels(FULL_PAGE_PIXELS))
        view = remember(
            trace, ("view", key, head, wide, query, options), lambda: stage_view(trace, key, head, wide, query, chosen)
        )
        pictures = st.container()
    if sentences is None:
        with words:
            st.markdown(view.explanation)
    else:
        sentences.markdown(view.explanation)
    with pictures:
        chart_key = f"{prefix}slide" if places else f"{prefix}{key}"
        show_figures(view.figures, chart_key, style.side_by_side and not view.stacked, f"{prefix}{key}", view.shares)
    with words:
        if view.code:
            st.code(view.code, language=None, wrap_lines=True)
        if view.figures:
            export_buttons(view, f"{prefix}{key}")
