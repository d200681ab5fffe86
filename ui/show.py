"""Shared Streamlit plumbing: cached computation, friendly errors, figures with their exports."""

from __future__ import annotations

import contextlib
import io
import json
import logging

import numpy as np
import streamlit as st

from attention_core import AttentionConfig, AttentionTrace, scaling_experiment, trace_sentence
from figures.heatmap import PAGE_PIXELS
from figures.stages import StageView, Style, context_sum_figure, weighted_sum_text
from ui.controls import Settings

log = logging.getLogger("attention_explorer")

PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},  # the camera icon saves a PNG
}
# Hides the sidebar and enlarges text for a projector. Constant CSS; no user text reaches it.
PRESENTATION_CSS = """
<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] { display: none; }
.block-container { padding-top: 1.2rem; max-width: 100%; }
.stMarkdown p, .stCaption p { font-size: 1.35rem !important; }
</style>
"""

# Streamlit's chart theme writes axis labels in a faded grey: 3.7:1 on white, under the 4.5:1 that text
# needs (WCAG) and faint from the back row. Here they take the page's own text colour, in either theme.
CHART_TEXT_CSS = """
<style>
.js-plotly-plot :is(.xtick text, .ytick text, .cbaxis text, .xtitle, .ytitle, .gtitle-subtitle, .annotation-text) {
  fill: currentColor !important;
}
</style>
"""


@st.cache_resource(max_entries=32, show_spinner=False)
def cached_trace(text: str, config: AttentionConfig, positional: bool) -> AttentionTrace:
    """One trace per (text, settings), shared by all sessions: the same inputs give the same numbers,
    and the trace is frozen. cache_resource hands out the object itself (no pickling copy of
    several n x n tensors on every rerun)."""
    return trace_sentence(text, config, positional=positional).to("cpu")


@st.cache_data(max_entries=16, show_spinner=False)
def cached_scaling(d_ks: tuple[int, ...], n_keys: int, samples: int, seed: int):
    return scaling_experiment(d_ks, n_keys=n_keys, samples=samples, seed=seed, device="cpu")


def trace_for(settings: Settings, **changes) -> AttentionTrace:
    """The trace for the current settings, optionally with some config fields changed."""
    config = settings.config.replace(**changes) if changes else settings.config
    with st.spinner("Computing attention…"):
        return cached_trace(settings.text, config, settings.positional)


SIDE_BY_SIDE_MAX = 10  # tokens; beyond this, maps get too narrow to read when placed side by side


def style_for(settings: Settings, *, side_by_side: bool = False, columns: int = 1) -> Style:
    """How figures are drawn: type size and numbers from the sidebar; `side_by_side` when a stage's
    figures share a row; `columns` when the page itself is split (Compare: 2)."""
    return Style(
        font_size=settings.font_size,
        show_numbers=settings.show_numbers,
        width=PAGE_PIXELS // columns,
        side_by_side=side_by_side,
    )


@contextlib.contextmanager
def friendly_errors():
    """Show bad input as a plain message and anything unexpected without a traceback."""
    try:
        yield
    except ValueError as error:
        st.error(f"⚠️ {error}")
    except Exception as error:
        if type(error).__module__.startswith("streamlit"):  # st.rerun / st.stop / page switches
            raise
        log.exception("unexpected error while drawing a view")
        st.error("Something went wrong while drawing this view; the details are in the server log. Try other settings.")


def apply_presentation(settings: Settings) -> None:
    if settings.presentation:
        st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)


def show_figure(figure, key: str) -> None:
    st.plotly_chart(
        figure,
        key=key,
        config={**PLOTLY_CONFIG, "toImageButtonOptions": {**PLOTLY_CONFIG["toImageButtonOptions"], "filename": key}},
    )


def export_buttons(view: StageView, key: str) -> None:
    """HTML per figure and CSV per matrix, in a popover: closed, it costs the browser almost nothing
    (twenty visible download buttons added ~100 ms to every rerun). Files are built only on click;
    PNG comes from the camera icon on each chart."""
    with st.popover("⬇ export"):
        for i, figure in enumerate(view.figures):
            st.download_button(
                f"{title_text(figure) or 'figure'} (HTML)",
                data=lambda figure=figure: figure.to_html(include_plotlyjs=True, full_html=True),
                file_name=f"{key}-{i}.html",
                mime="text/html",
                key=f"dl-{key}-{i}-html",
                on_click="ignore",
            )
        for matrix in view.matrices:
            st.download_button(
                f"{matrix.name} (CSV)",
                data=matrix.to_csv,
                file_name=f"{key}-{matrix.name}.csv",
                mime="text/csv",
                key=f"dl-{key}-{matrix.name}-csv",
                on_click="ignore",
            )


def title_text(figure) -> str:
    """A figure's title as plain text (first line, no markup), for a button label."""
    title = figure.layout.title.text or ""
    return title.split("<br>")[0].split("  ")[0]


def trace_npz(trace: AttentionTrace) -> bytes:
    """Every stage of the trace in one .npz (exact float values; tokens as JSON)."""
    arrays = {
        name: getattr(trace, name).detach().cpu().numpy()
        for name in trace.__dataclass_fields__
        if hasattr(getattr(trace, name), "detach")
    }
    arrays["tokens_json"] = np.frombuffer(json.dumps(list(trace.tokens)).encode(), dtype=np.uint8)
    arrays["scale"] = np.array(trace.scale)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def show_view(view: StageView, key: str, side_by_side: bool = False) -> None:
    """A stage: heading, formula, one plain sentence, its figures (side by side if asked) and exports."""
    st.subheader(view.heading)
    st.latex(view.latex)
    st.markdown(view.explanation)
    places = st.columns(len(view.figures)) if side_by_side and len(view.figures) > 1 else None
    for i, figure in enumerate(view.figures):
        with places[i] if places else contextlib.nullcontext():
            show_figure(figure, f"{key}-{i}")
    if view.figures:
        export_buttons(view, key)


def context_view(trace: AttentionTrace, head: int, style: Style, key: str = "query") -> None:
    """One query token's context vector written out as the weighted sum of value rows."""
    st.subheader("Context of one token, term by term")
    query = st.selectbox(
        "query token",
        range(trace.n_tokens),
        format_func=lambda i: f"{i}: {trace.tokens[i]}",
        key=key,
        bind="query-params",
    )
    query = min(query or 0, trace.n_tokens - 1)  # a shorter sentence may leave an old choice out of range
    st.code(weighted_sum_text(trace, head, query), language=None, wrap_lines=True)
    show_figure(context_sum_figure(trace, head, query, style), f"{key}-context-sum")
