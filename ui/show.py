"""Shared Streamlit plumbing: cached computation, friendly errors, presentation mode, stages with their exports."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import threading

import numpy as np
import streamlit as st
import streamlit.components.v2

from attention_core import (
    AttentionTrace,
    check_request,
    cpu_threads,
    estimate_trace_bytes,
    scaling_experiment,
    sentence_scaling,
    tokenize,
    trace_sentence,
)
from attention_core.matrices import fit_typed
from attention_core.tokens import embed
from figures.stages import BY_KEY, StageView, heading, stage_view
from figures.style import FULL_PAGE_PIXELS, PAGE_PIXELS, Style, markdown_literal
from ui import decks, slides
from ui.chart import PLOTLY_CONFIG, show_figure
from ui.controls import Settings, check_choice, keep_in_address
from ui.memo import remember
from ui.pages import PAGES

log = logging.getLogger("attention_explorer")

PRESENTATION_MAP_PIXELS = 400  # the tallest map in presentation mode: a stage fits a 1400 x 900 screen ...
DESIGNED_FOR = (1400, 900)  # ... the screen the slides' sizes are set for: on a larger one they are scaled up
SCALE_MOST = 1.5  # (1920 x 1080: 1.2, the smaller of 1920/1400 and 1080/900)
SCREEN_SCALE = "screen_scale"  # session state: that scale, from the size the browser's window says it has
SLIDE_COLUMNS = (2, 3)  # presentation mode: the words of a stage on the left, its figures on the right
SLIDE_FIGURE_PIXELS = 700  # ... unless its figures would be taller than this there: then full width, below
SLIDE_BAND = 6  # on a slide a map draws at most 6 dimensions a side (GPT-2's W_Q: 6 x 6 of 768 x 64, README)
# Presentation mode: no sidebar, and everything a projector needs larger. Constant CSS; no user text reaches it.
PRESENTATION_CSS = """
<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] { display: none; }
.block-container { padding-top: 3.6rem; padding-bottom: 1rem; max-width: 100%; }
.stMarkdown p, .stMarkdown li, [data-testid="stCaptionContainer"] p { font-size: 1.35rem !important; }
[data-testid="stPageLink"] p { font-size: 1.1rem !important; }
[data-testid="stPageLink"] a { padding-left: 0.3rem; padding-right: 0.3rem; }
.stButton button p, div[data-testid="stButtonGroup"] button p,
.stSelectbox div[data-baseweb="select"] div, .stCode code { font-size: 1.25rem !important; }
.katex { font-size: 1.6em !important; }
[data-testid="stWidgetLabel"] p, [data-testid="stSliderThumbValue"] { font-size: 1.15rem !important; }
h1 { font-size: 2.2rem !important; } h2, h3 { font-size: 1.9rem !important; }
.live-chart-table { display: none; }
</style>
"""
# Text everybody can read (WCAG AA's 4.5:1, checked on every page by axe-core: tests/test_accessibility.py).
# - Streamlit's chart theme writes axis labels in a faded grey: 3.7:1 on white, faint from the back row. Here
#   every label of every sub-plot (x2tick, y3title, ...) takes the page's own text colour, in either theme.
#   (Exported PNGs get it from the figure: figures.style.)
# - Captions: Streamlit's grey is 3.88:1 on white. The page's text colour at 80% is over 6:1 in both themes.
# - The sidebar greys out the controls a page does not read: their labels were 2.26:1 (light), 3.34:1 (dark).
#   At 75% of the text colour they still look inactive and read at over 5:1.
# - A chosen pill's words were in the accent red on a tint of itself: 4.47:1 (light), 3.61:1 (dark). They take
#   the text colour; the tint and the red border still say which one is chosen. So does a slider's value
#   (3.91:1 in red on the dark page).
READABLE_CSS = """
<style>
.js-plotly-plot :is(g[class$="tick"] > text, text[class$="title"], .gtitle-subtitle, .annotation-text,
                    .legendtext, .legendtitletext, .cbaxis text) {
  fill: currentColor !important;
}
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.8; }
[data-testid="stWidgetLabel"][disabled] { color: inherit !important; opacity: 0.75; }
[data-testid="stWidgetLabel"][disabled] [data-testid="stMarkdownContainer"] { color: inherit !important; }
[data-testid="stButtonGroup"] button:is([aria-checked="true"], [data-selected="true"]),
[data-testid="stSliderThumbValue"] { color: inherit !important; }
</style>
"""


# Whether the reader's browser asks for reduced motion (prefers-reduced-motion): told by the browser once the page
# holding it is drawn, and again if it changes. ▶ play then steps once per click instead of running on.
_motion = st.components.v2.component(
    "reduced_motion",
    js="""export default function ({setStateValue}) {
  const query = window.matchMedia("(prefers-reduced-motion: reduce)");
  setStateValue("reduce", query.matches);
  query.onchange = () => setStateValue("reduce", query.matches);
}""",
)


# The browser window's size, told once the presentation bar is drawn and again after a resize (a projector
# plugged in): a slide then draws its maps for the screen it is on.
_screen = st.components.v2.component(
    "screen_size",
    js="""let told = "";
export default function ({setStateValue}) {
  const tell = () => {
    const size = [window.innerWidth, window.innerHeight];
    if (String(size) !== told) { told = String(size); setStateValue("size", size); }
  };
  tell();
  let timer;
  const resized = () => { clearTimeout(timer); timer = setTimeout(tell, 300); };
  window.addEventListener("resize", resized);
  return () => { clearTimeout(timer); window.removeEventListener("resize", resized); };
}""",
)


def screen_scale(size) -> float:
    """How much larger than DESIGNED_FOR a window of `size` ([width, height], as the browser told it) is: 1 for
    a smaller one or one not told (or told wrong), at most SCALE_MOST."""
    try:
        width, height = (float(side) for side in size)
    except (TypeError, ValueError):
        return 1.0
    if not (math.isfinite(width) and math.isfinite(height)):
        return 1.0
    return min(SCALE_MOST, max(1.0, min(width / DESIGNED_FOR[0], height / DESIGNED_FOR[1])))


def measure_screen() -> None:
    """Presentation mode: keep the scale of the browser's window in the session, for style_for. A page switch
    forgets what the component was told, and the browser tells its size again only when it changes: a run
    without a size keeps the scale the session has (a deck's view on another page was drawn at 1400 x 900 in a
    1920 x 1080 window)."""
    told = _screen(key="screen_size", on_size_change=lambda: None, height=0).get("size")
    if told is not None or SCREEN_SCALE not in st.session_state:
        st.session_state[SCREEN_SCALE] = screen_scale(told)


def slide_pixels(pixels: int) -> int:
    """A size set for a 1400 x 900 slide, on the screen presenting it (measure_screen)."""
    return round(pixels * st.session_state.get(SCREEN_SCALE, 1.0))


def reduced_motion() -> bool:
    """True when the browser asks for reduced motion (False until it has said)."""
    return bool(_motion(key="reduced_motion", on_reduce_change=lambda: None, height=0).get("reduce"))


def compute_trace(text: str, config, typed: tuple) -> AttentionTrace:
    """The trace of a sentence under a config, with the typed matrices ((name, numbers) pairs) in place of
    drawn ones; kept on the CPU, where the figures read it."""
    given = dict(typed)
    x = given.pop("x", None)
    return trace_sentence(text, config, x=x, weights=given).to("cpu")


# The spinner shows only while a trace is computed (a cache miss): a spinner around every lookup would cost
# each rerun a timer thread and two messages.
@st.cache_resource(max_entries=32, show_spinner="Computing attention…")
def cached_trace(text: str, config, typed: tuple) -> AttentionTrace:
    """One trace per (text, settings, typed numbers), shared by all sessions: the same inputs give the same
    numbers, and the trace is frozen. cache_resource hands out the object itself (no pickling copy of
    several n x n tensors on every rerun). Only small traces come here (see trace_for)."""
    return compute_trace(text, config, typed)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_scaling(d_ks: tuple[int, ...], n_keys: int, samples: int, seed: int):
    return scaling_experiment(d_ks, n_keys=n_keys, samples=samples, seed=seed, device="cpu")


@st.cache_resource(max_entries=16, show_spinner=False)
def cached_sentence_scaling(tokens: tuple[str, ...], d_model: int, positional: bool, seed: int, row_d_k: int):
    x = embed(list(tokens), d_model, seed=seed, positional=positional)
    return sentence_scaling(x, tokens, row_d_k=row_d_k, seed=seed)


def typed_numbers(settings: Settings, **changes) -> tuple[dict, list[str]]:
    """The typed matrices that fit the settings (see attention_core.matrices.fit_typed), and a message for
    each one that does not."""
    config = settings.config.replace(**changes) if changes else settings.config
    return fit_typed(dict(settings.typed), config, len(tokenize(settings.text)))


# Large traces (a 4096-token trace holds ~335 MB of maps per head) are not kept in the shared cache, whose
# entries would add up to gigabytes: each session keeps its own last HEAVY_PER_SESSION of them (given back
# when it moves on or ends), and at most HEAVY_AT_ONCE are computed at a time, so that one reader's large
# request leaves the cores to everybody else's small ones.
HEAVY_TRACE_BYTES = 64 * 2**20
HEAVY_PER_SESSION = 2  # Compare shows two traces
# Half the threads torch computes with: the cores, or OMP_NUM_THREADS where a replica is given fewer (deploy/).
HEAVY_AT_ONCE = max(1, cpu_threads() // 2)
HEAVY_SLOTS = threading.BoundedSemaphore(HEAVY_AT_ONCE)


@contextlib.contextmanager
def heavy_slot(waiting: str | None = None):
    """One of the HEAVY_AT_ONCE slots for heavy work (a large trace, a training run; real models run in a
    process of their own, ui.real): a room asking at once is served in turn, not all together, which
    on a few cores would make every one of them slow.
    `waiting`: a spinner's words while no slot is free (none inside a cached function)."""
    if not HEAVY_SLOTS.acquire(blocking=False):
        with st.spinner(waiting) if waiting else contextlib.nullcontext():
            HEAVY_SLOTS.acquire()
    try:
        yield
    finally:
        HEAVY_SLOTS.release()


def _heavy_trace(key: tuple) -> AttentionTrace:
    """A large trace: this session's own copy, computed when a slot is free."""
    kept = st.session_state.setdefault("heavy_traces", {})
    if key in kept:
        return kept[key]
    check_request(len(tokenize(key[0])), key[1])  # a request over the memory budget is refused without waiting
    while len(kept) >= HEAVY_PER_SESSION:  # give the oldest back before making a new one
        kept.pop(next(iter(kept)))
    waiting = "Waiting for a free slot: other readers' large traces are being computed…"
    with heavy_slot(waiting), st.spinner("Computing a large trace…"):
        kept[key] = compute_trace(*key)
    return kept[key]


def trace_for(settings: Settings, **changes) -> AttentionTrace:
    """The trace for the current settings (with the typed numbers that fit), optionally with some config
    fields changed. Small traces come from the cache that every session shares (a class opening one link
    computes it once); large ones see _heavy_trace."""
    config = settings.config.replace(**changes) if changes else settings.config
    typed, _ = typed_numbers(settings, **changes) if settings.typed else ({}, [])
    key = (settings.text, config, tuple(sorted(typed.items())))
    if estimate_trace_bytes(len(tokenize(settings.text)), config) > HEAVY_TRACE_BYTES:
        trace = _heavy_trace(key)
    else:
        trace = cached_trace(*key)
    if typed and settings.typed_as != trace.typed_as:  # the shared trace is frozen: a copy says where they came from
        trace = dataclasses.replace(trace, typed_as=settings.typed_as)
    return trace


def show_typed_refusals(settings: Settings) -> None:
    """Say which typed matrices are not used, and why."""
    if settings.typed:
        for message in typed_numbers(settings)[1]:
            st.warning(markdown_literal(message), icon="✏️")  # it quotes what was typed: shown as typed


SIDE_BY_SIDE_MAX = 10  # tokens; beyond this, maps get too narrow to read when placed side by side


def style_for(settings: Settings, *, side_by_side: bool = False, columns: int = 1, slide: bool = False) -> Style:
    """How figures are drawn: type size, numbers and counting from the sidebar; the page's width (wider
    without the sidebar, in presentation mode); `side_by_side` when a stage's figures share a row;
    `columns` when the page itself is split (Compare: 2); `slide` when the figures take the right-hand
    column of a slide (show_stage); the page's theme for its text colour."""
    width = slide_pixels(FULL_PAGE_PIXELS) if settings.presentation else PAGE_PIXELS
    if slide:
        width = width * SLIDE_COLUMNS[1] // sum(SLIDE_COLUMNS)
    style = Style(
        font_size=slide_pixels(settings.font_size) if settings.presentation else settings.font_size,
        show_numbers=settings.show_numbers,
        width=width // columns,
        side_by_side=side_by_side,
        index_base=settings.index_base,
        theme=st.context.theme.type or "light",
        palette=settings.palette,
    )
    if not settings.presentation:
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


def presentation_bar(page: str) -> None:
    """Presentation mode: large type, no sidebar, and on every page a way to every other page and a way out.
    Drawn by app.py above every page, so that a page switch keeps it (and the sidebar stays hidden). With a
    deck open (ui.decks), the bar says which of its views this is, and the view's note."""
    if not st.session_state.get("present"):
        slides.keys(False)  # once after leaving: back to the slide that was shown
        return
    with st.sidebar:  # hidden: it takes no room on a slide
        measure_screen()
    # The page's type (in rem) grows with the screen, as the figures do (style_for): a 1920 x 1080 projector shows a
    # 1400 x 900 slide larger, not in its corner. (CSS zoom would do it in one line, but moves Plotly's hovers.)
    scale = st.session_state.get(SCREEN_SCALE, 1.0)
    st.html(PRESENTATION_CSS + (f"<style>html {{ font-size: {100 * scale:.0f}%; }}</style>" if scale > 1 else ""))
    # A row that wraps, each link as wide as its label: at any width none is cut, and the way out is last.
    row = st.container(horizontal=True, vertical_alignment="center", gap="xsmall")
    with st.sidebar:  # ← → and Esc, in the (hidden) sidebar: they take no room on a slide
        slides.keys(True)
    for spec in PAGES:  # their names only: with the icons the row would need two lines at 1400 pixels
        row.page_link(spec.path, label=spec.title)
    where, note = decks.where()
    if where:  # in the row, so that a slide keeps its height; the note in its tooltip (and on the Decks page)
        row.caption(where, help=note or None)
    row.space("stretch")  # the way out, at the right edge
    row.button(
        "+ view",
        key="deck_add_bar",
        on_click=decks.add_view,
        args=(page,),
        help="Add this view (page, settings, slide) to the deck: the Decks page.",
    )
    row.button("✕ Leave (Esc)", on_click=slides.leave, key="leave_presentation", help="Leave presentation mode")


def title_text(figure) -> str:
    """What a figure shows, for a button label: its title, or its maps' titles (without their shapes)."""
    names = [trace.name.split("  ")[0] for trace in figure.data if trace.name and trace.type == "heatmap"]
    return (figure.layout.title.text or ", ".join(names)).split("<br>")[0].split("  ")[0]


def export_buttons(view: StageView, key: str) -> None:
    """HTML per figure and CSV per matrix, in a popover whose buttons are made only while it is open
    (on_change="rerun": opening it reruns the page once). Closed, it costs the server one element instead of
    a button per file: the Walkthrough's 25 buttons were a sixth of its every rerun (README "A whole class at
    once"). Files are built only on click; PNG comes from the camera icon on each chart."""
    with st.popover("⬇ export", key=f"export-{key}", on_change="rerun") as box:
        if not box.open:
            return
        for i, figure in enumerate(view.figures):
            st.download_button(
                f"{title_text(figure) or 'figure'} (HTML)",
                data=lambda figure=figure: figure.to_html(include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG),
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


def trace_npz(trace: AttentionTrace) -> bytes:
    """Every stage of the trace in one .npz (exact float values; tokens and the variant as JSON)."""
    arrays = {
        name: getattr(trace, name).detach().cpu().numpy()
        for name in trace.__dataclass_fields__
        if hasattr(getattr(trace, name), "detach")
    }
    # The variant's weights (w_q, ..., MLA's w_dkv, ...) and intermediates (c_kv, k_r, ...) by their own names.
    arrays |= {name: tensor.detach().cpu().numpy() for name, tensor in {**trace.params, **trace.parts}.items()}
    arrays["kv_head_of"] = np.array(trace.kv_head_of)
    arrays["tokens_json"] = np.frombuffer(json.dumps(list(trace.tokens)).encode(), dtype=np.uint8)
    arrays["variant_json"] = np.frombuffer(json.dumps(trace.variant).encode(), dtype=np.uint8)
    arrays["scale"] = np.array(trace.scale)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def slide_columns() -> tuple:
    """Presentation mode's slide: a column for the words of a stage, and a wider one for its figures."""
    return tuple(st.columns(SLIDE_COLUMNS, gap="large"))


def show_figures(figures, key: str, side_by_side: bool, name: str | None = None, shares: tuple[int, ...] = ()) -> None:
    """The figures, keyed `key`-0, `key`-1, ... (a chart with the same key next time is updated in place);
    `name`: what their PNG files are called (by default the key); `shares`: side by side, their widths in
    proportion (by default equal)."""
    places = st.columns(shares or len(figures)) if side_by_side and len(figures) > 1 else None
    for i, figure in enumerate(figures):
        with places[i] if places else contextlib.nullcontext():
            show_figure(figure, f"{key}-{i}", filename=f"{name or key}-{i}")


def show_stage(
    trace: AttentionTrace,
    key: str,
    head: int,
    style: Style,
    prefix: str = "",
    query_key: str = "query",
    places: tuple | None = None,
) -> None:
    """One stage of the registry: heading, formula, its sentences, its figure and exports; for a per-query
    stage, a picker for the token shown in detail (a context vector term by term) and the sum written out.
    `places`: (words, figures) columns, for presentation mode's slide layout (slide_columns()), so that a
    stage fits one screen; by default all in one column. On a slide the charts are keyed by their place, not
    by the stage: the next stage's figures go to the charts already on screen (drawn in place, ~4x faster
    than new charts)."""
    stage = BY_KEY[key]
    words, pictures = places or (st.container(),) * 2
    with words:
        st.header(heading(key, trace), anchor=key)  # h2: under the page's h1 (axe: heading-order)
        st.latex(stage.formula_for(trace))
        sentences = st.empty()  # filled once the view is built: its sentences depend on the numbers
        query = None
        if stage.per_query:
            check_choice(
                query_key, "one token in detail", [f"{style.index(i)}: {t}" for i, t in enumerate(trace.tokens)]
            )
            query = st.selectbox(
                "one token in detail",
                range(trace.n_tokens),
                format_func=lambda i: f"{style.index(i)}: {trace.tokens[i]}",
                key=query_key,
                bind="query-params",
                label_visibility="collapsed" if places else "visible",  # a slide: the sum below names the token
            )
            query = min(query or 0, trace.n_tokens - 1)  # a shorter sentence may leave an old choice out of range
        chosen = {}
        for option in stage.options:  # the stage's own choices, in the address as shown (no format_func)
            value = st.segmented_control(option.label, option.choices, default=option.default, key=option.key,
                                         bind="query-params")  # fmt: skip
            chosen[option.key] = option.default if value is None else value
            keep_in_address(option.key, chosen[option.key], option.default)
    options = tuple(sorted(chosen.items()))
    view = remember(trace, ("view", key, head, style, query, options),
                    lambda: stage_view(trace, key, head, style, query, chosen))  # fmt: skip
    if places and any(figure.height > slide_pixels(SLIDE_FIGURE_PIXELS) for figure in view.figures):
        # Too many maps for the slide's right-hand column (they were stacked): the page's whole width, below.
        wide = dataclasses.replace(style, width=slide_pixels(FULL_PAGE_PIXELS))
        view = remember(trace, ("view", key, head, wide, query, options),
                        lambda: stage_view(trace, key, head, wide, query, chosen))  # fmt: skip
        pictures = st.container()
    sentences.markdown(view.explanation)
    with pictures:
        chart_key = f"{prefix}slide" if places else f"{prefix}{key}"
        show_figures(view.figures, chart_key, style.side_by_side and not view.stacked, f"{prefix}{key}", view.shares)
    with words:
        if view.code:
            st.code(view.code, language=None, wrap_lines=True)
        if view.figures:
            export_buttons(view, f"{prefix}{key}")
