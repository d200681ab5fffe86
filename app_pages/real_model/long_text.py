"""The Real model page's long texts: up to 4,096 tokens of SmolLM2 (MiniLM's own 512) in one pass,
every head's map drawn from the q and k the model worker keeps (attention_core/models/long_store.py), the sink,
the far reach and a needle in a haystack in view.

The pass runs once per server and text: a second reader of the same text waits for the first one's pass, with its
progress, or for nothing once it is done. What the server keeps is small (the tokens, and each view drawn)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
import time
from concurrent.futures import Future

import streamlit as st

from app_pages.real_model.loading import model_worker
from attention_core.limits import MAX_LONG_TEXT_CHARS
from attention_core.long_maps import LOCAL, POOLS, cell_size
from attention_core.models.long import LENGTHS, MAX_LONG_TOKENS, LongRequest, long_text
from attention_core.models.long_store import CALIBRATION, MOST_REGION
from attention_core.models.needle import ANSWER, NEEDLE, QUESTION
from figures.glossary import link
from figures.long import (
    GRID_NAMES,
    cache_sentence,
    distance_figure,
    grid_figure,
    grid_sentence,
    head_sentence,
    needle_sentence,
    overview_figure,
    region_figure,
)
from ui.links import check_choice
from ui.live_chart import show_figure
from ui.memo import remember
from ui.pages import timed_fragment
from ui.screen import slide_columns, slide_pixels
from ui.show import friendly_errors, style_for

SOURCES = {"guide": "this app's user guide", "yours": "your own text"}
DEPTHS = tuple(range(0, 101, 10))  # the needle's depth, in percent of the text
SWITCH_ROW = 40  # pixels of a 1400 × 900 slide: the row of the read switch, the pooling and the colour scale
KEPT_READS = 8  # reads (tokens and timings) the server keeps, the last started first


@st.cache_resource(show_spinner=False)
def _reads() -> tuple[dict, threading.Lock]:
    """Every server's long-text passes, by (model, device, digest): a Future of its LongRead, shared by readers
    (ModelWorker.later: no thread of ours waits for a pass, which a stopped server would wait for)."""
    return {}, threading.Lock()


def digest(request: LongRequest) -> str:
    """A request's name in the caches: its fields' hash (the text may be 100,000 characters)."""
    return hashlib.sha256(repr(request).encode()).hexdigest()[:16]


def read_text(key: str, device: str, request: LongRequest, layers: int):
    """The request's LongRead: its pass started if no reader has started it, with a progress bar until it is done."""
    reads, lock = _reads()
    name = (key, device, digest(request))
    with lock:
        future: Future | None = reads.get(name)
        if future is None or (future.done() and future.exception() is not None):
            future = model_worker().later("long", key, device, request, "read")
            reads[name] = future
            while len(reads) > KEPT_READS:
                reads.pop(next(iter(reads)))
    if not future.done():
        bar = st.progress(0.0, text=f"Reading {request.tokens:,} tokens…")
        while not future.done():
            done = model_worker().long_progress(key, device, request) or 0.0
            bar.progress(
                done, text=f"Reading {request.tokens:,} tokens: layer {round(done * layers)} of {layers} done…"
            )
            time.sleep(0.25)
        bar.empty()
    return future.result()


@st.cache_resource(max_entries=64, show_spinner=False)
def view(key: str, device: str, name: str, _request: LongRequest, what: str, *args):
    """One view of a read text (long_store.VIEWS), kept for every reader; `name`: the request's digest."""
    return model_worker().long(key, device, _request, what, *args)


@timed_fragment(None)
def long_text_section(key: str, device: str, info, settings) -> None:
    """Read normally, the section is a part of the page that a knob of its own reruns alone (st.fragment): a head,
    a pooling or a region drawn without drawing again the 30 layers' maps above it (bench/bench_long_step.py). A
    slide's knobs sit in places made outside it (beside the model's choice), which a fragment cannot write to: a
    slide reruns whole (show_long_text)."""
    with friendly_errors():  # a model the long reading refuses (a window, a soft cap): said, the page goes on
        show_long_text(key, device, info, settings)


def show_long_text(key: str, device: str, info, settings, beside_model=(None, None)) -> None:
    """The section (read normally) or the slide: the text chosen, its pass, and every view of it. On a slide the
    layer and head go in the two places beside the model's choice (`beside_model`), the rest in one row."""
    presentation = settings.present
    cap = min(MAX_LONG_TOKENS, info.max_positions)
    if not presentation:
        st.header("A long text: the sink, the reach and the needle")
        st.markdown(
            f"Up to {cap:,} tokens of {info.title} in one pass, which keeps each layer's queries and keys (after "
            f"RoPE) and never an n×n map; a head's weights are recomputed from them when one is drawn. Its map is "
            f"pooled to at most 256 × 256 cells by the **maximum** (a one-token {link('sinks', 'attention sink')} "
            "or needle stays visible; the mean on request)."
        )
    request, expected = choose_text(cap, presentation)
    if request is None:
        return
    seconds, kept = view(key, device, digest(request), request, "estimate", request.tokens)
    estimate = (
        f"Reading {request.tokens:,} tokens takes about {seconds:.0f} s on this server (a {CALIBRATION}-token "
        f"pass timed here, scaled by the multiply-adds), and its queries and keys take {kept / 1e6:,.0f} MB."
    )
    if not presentation:  # a slide has no room for it: it is the switch's help there
        st.caption(estimate)
    switches = st.columns(3, vertical_alignment="center") if presentation else (st, st, st)
    if not switches[0].toggle("read it", key="rm_long", bind="query-params", help=estimate if presentation else None):
        return
    read = read_text(key, device, request, info.n_layers)
    if read.total_tokens > read.n_tokens and not request.needle and not presentation:
        st.info(
            f"The text has {read.total_tokens:,} tokens for {info.title}; the first {read.n_tokens:,} are read "
            f"(at most {request.tokens:,} as chosen, and {cap:,} on this model)."
        )
    if not presentation:
        st.caption(f"Read in {read.seconds:.1f} s: {read.n_tokens:,} tokens, {read.kept_bytes / 1e6:,.0f} MB kept.")
        st.markdown(cache_sentence(info, read.n_tokens))
    name = digest(request)
    places = (*beside_model, *switches[1:]) if presentation else st.columns(4, vertical_alignment="bottom")
    layer, head, pool, log = choose_head(info, presentation, places)
    where = f"layer {layer + 1}, head {head + 1} · {read.n_tokens:,} tokens"  # the model is named above it
    style = style_for(settings, side_by_side=presentation, slide=presentation)
    if presentation:  # the row of switches under the slide's bar takes the map's room
        style = dataclasses.replace(style, max_map_pixels=style.max_map_pixels - slide_pixels(SWITCH_ROW))
    cells = view(key, device, name, request, "overview", layer, head, pool)
    summary = view(key, device, name, request, "summary", layer, head)
    words_place, figure_place = slide_columns() if presentation else (st.container(), st.container())
    with figure_place:
        drawn = (read.n_tokens, pool, where, log, read.causal, style)  # the figure made once per view and style
        figure = remember(cells, drawn, lambda: overview_figure(cells, *drawn))
        select = None if presentation else (cell_size(read.n_tokens), read.n_tokens)  # a region below to draw
        show_figure(figure, "rm-long", select=select, on_region=take_region)
    with words_place:
        st.markdown(head_sentence(summary, read.tokens, style.index_base))
        if request.needle:
            shares = view(key, device, name, request, "needle")
            st.markdown(needle_sentence(read, shares, info.title, expected, style.index_base))
    if presentation:
        return
    drawn = (read.n_tokens, where, style)
    show_figure(remember(summary, drawn, lambda: distance_figure(summary, *drawn)), "rm-long-distance")
    show_region(key, device, name, request, read, layer, head, where, style)
    show_grid(key, device, name, request, read, info, style)


def choose_text(cap: int, presentation: bool) -> tuple[LongRequest | None, str]:
    """The text, its length and the needle, as the reader sets them (kept in the address, but your own text)."""
    lengths = [n for n in LENGTHS if n <= cap] or [cap]
    if presentation:  # a slide has no room for them: the address's choices (or the defaults)
        return linked_text(lengths)
    check_choice("rm_long_source", "long text", list(SOURCES.values()))  # the address holds what is shown
    check_choice("rm_long_tokens", "tokens", [str(n) for n in lengths])
    left, middle, right = st.columns(3)
    source = left.selectbox(
        "long text", list(SOURCES), format_func=SOURCES.get, key="rm_long_source", bind="query-params"
    )
    tokens = middle.selectbox(
        "tokens, at most",
        lengths,
        index=len(lengths) - 1,
        key="rm_long_tokens",
        bind="query-params",
    )
    needle = right.toggle(
        "a needle in it",
        key="rm_needle",
        bind="query-params",
        help="a sentence placed in the text, and a question about it at the end",
    )
    text = long_text()
    if source == "yours":
        text = st.text_area(
            "your long text (not kept in the address: paste it again from a link)",
            max_chars=MAX_LONG_TEXT_CHARS,
            key="rm_long_own",
        )
        if not text.strip():
            st.info(f"Paste a text of up to {MAX_LONG_TEXT_CHARS:,} characters to read it.")
            return None, ""
    fields = {"text": text, "tokens": int(tokens)}
    expected = ""
    if needle:
        check_choice("rm_needle_depth", "needle's depth", [str(d) for d in DEPTHS])
        depth = st.select_slider(
            "the needle's depth (% of the text)", DEPTHS, value=50, key="rm_needle_depth", bind="query-params"
        )
        one, two, three = st.columns([3, 3, 1])
        written = one.text_input("the needle", NEEDLE, max_chars=300, key="rm_needle_text", bind="query-params")
        question = two.text_input("the question", QUESTION, max_chars=300, key="rm_question", bind="query-params")
        expected = three.text_input("its answer", ANSWER, max_chars=60, key="rm_answer", bind="query-params")
        fields.update(needle=written or NEEDLE, question=question or QUESTION, depth=depth / 100)
    try:
        return LongRequest(**fields), expected
    except ValueError as error:
        st.error(str(error))
        return None, ""


def linked(key: str, default):
    """A choice not drawn on a slide: the session's (drawn before, read normally), else the address's, else the
    default."""
    value = st.session_state.get(key)
    return value if value is not None else st.query_params.get(key, default)


def linked_text(lengths: list[int]) -> tuple[LongRequest | None, str]:
    """The text a slide reads: the address's length, source and needle (what the reading page keeps there), a value
    that is none of the reading page's choices named as there (and gone from the address: the default is read)."""
    check_choice("rm_long_source", "long text", list(SOURCES.values()))
    check_choice("rm_long_tokens", "tokens", [str(n) for n in lengths])
    check_choice("rm_needle_depth", "needle's depth", [str(d) for d in DEPTHS])
    tokens = str(linked("rm_long_tokens", lengths[-1]))
    tokens = int(tokens) if tokens in {str(n) for n in lengths} else lengths[-1]
    own = st.session_state.get("rm_long_own", "")
    yours = linked("rm_long_source", "guide") in ("yours", SOURCES["yours"]) and own.strip()
    fields = {"text": own if yours else long_text(), "tokens": tokens}
    if str(linked("rm_needle", False)).lower() == "true":
        depth = str(linked("rm_needle_depth", 50))
        fields.update(
            needle=str(linked("rm_needle_text", NEEDLE)) or NEEDLE,
            question=str(linked("rm_question", QUESTION)) or QUESTION,
            depth=int(depth) / 100 if depth in {str(d) for d in DEPTHS} else 0.5,
        )
    try:
        return LongRequest(**fields), str(linked("rm_answer", ANSWER))
    except ValueError as error:
        st.error(str(error))
        return None, ""


def choose_head(info, presentation: bool, places) -> tuple[int, int, str, bool]:
    """The layer and head drawn, the pooling and the colour scale (kept in the address), in four places."""
    check_choice("rm_long_layer", "layer", [f"layer {i + 1}" for i in range(info.n_layers)])  # as the address says
    check_choice("rm_long_head", "head", [f"head {h + 1}" for h in range(info.heads)])
    check_choice("rm_long_pool", "pooling", [f"{p}-pooled" for p in POOLS])
    one, two, three, four = places
    layer = one.selectbox(
        "layer",
        range(info.n_layers),
        format_func=lambda i: f"layer {i + 1}",
        key="rm_long_layer",
        bind="query-params",
        label_visibility="collapsed" if presentation else "visible",
    )
    head = two.selectbox(
        "head",
        range(info.heads),
        format_func=lambda h: f"head {h + 1}",
        key="rm_long_head",
        bind="query-params",
        label_visibility="collapsed" if presentation else "visible",
    )
    pool = three.radio(
        "pooled by",
        POOLS,
        horizontal=True,
        key="rm_long_pool",
        bind="query-params",
        format_func=lambda p: f"{p}-pooled",
        label_visibility="collapsed" if presentation else "visible",
    )
    log = four.toggle("log colour scale", key="rm_long_log", bind="query-params")
    return min(layer or 0, info.n_layers - 1), min(head or 0, info.heads - 1), pool or "max", bool(log)


def parse_span(written: str, n: int, field: str) -> tuple[int, int]:
    """ "1000-1063" (positions as the page counts them, from 1) -> (999, 1063); refused by name otherwise."""
    parts = written.replace("–", "-").split("-")
    try:
        first, last = (int(part) for part in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        first = last = None
    if first is None or not (1 <= first <= last <= n and last - first < MOST_REGION):
        raise ValueError(
            f"{field} {written!r}: write two positions as first-last, at most {MOST_REGION} tokens within 1-{n:,}"
        )
    return first - 1, last


REGION = re.compile(r"(\d+)-(\d+);(\d+)-(\d+)")  # what a drag on the overview sends: "rows;keys", from 1
REGION_CUT = "rm_long_region_cut"  # session state: what a drag chose that was larger than a region may be


def take_region(region: str | None) -> None:
    """A region dragged on the overview (chart.js): the region's typed ranges, each cut to its first MOST_REGION
    tokens (said under it). What the browser sent is checked: anything else is not taken."""
    found = REGION.fullmatch(region or "")
    if not found:
        return
    rows, keys = (int(found[1]), int(found[2])), (int(found[3]), int(found[4]))
    cut = [(first, min(last, first + MOST_REGION - 1)) for first, last in (rows, keys)]
    st.session_state["rm_long_rows"], st.session_state["rm_long_keys"] = (f"{a}-{b}" for a, b in cut)
    chosen = f"rows {rows[0]}–{rows[1]} × keys {keys[0]}–{keys[1]}"
    larger = f"is more than {MOST_REGION} tokens a side: its first {MOST_REGION} of each are drawn"
    st.session_state[REGION_CUT] = None if cut == [rows, keys] else f"The region dragged, {chosen}, {larger}."


def show_region(key, device, name, request, read, layer, head, where, style) -> None:
    """A region at full resolution, a cell per token pair, its tokens on the axes."""
    st.subheader("A region, a weight a cell")
    n = read.n_tokens
    size = cell_size(n)
    last = min(n, 64)
    left, right = st.columns(2)
    rows = left.text_input("query rows", f"{n - last + 1}-{n}", key="rm_long_rows", bind="query-params")
    keys = right.text_input("key columns", f"1-{last}", key="rm_long_keys", bind="query-params")
    try:
        span_rows, span_keys = parse_span(rows, n, "query rows"), parse_span(keys, n, "key columns")
    except ValueError as error:
        st.error(str(error))
        return
    values = view(key, device, name, request, "region", layer, head, span_rows, span_keys)
    if size > 1:
        st.caption(
            f"The overview above pools {size}×{size} tokens a cell; here every cell is one weight. Drag a box on the "
            "overview to draw its region here."
        )
    if st.session_state.get(REGION_CUT):
        st.caption(st.session_state.pop(REGION_CUT))
    drawn = (span_rows, span_keys, where, read.causal, style)
    figure = remember(values, drawn, lambda: region_figure(values, read.tokens, *drawn))
    show_figure(figure, "rm-long-region")


def show_grid(key, device, name, request, read, info, style) -> None:
    """Every head's four numbers, a layer × head map each, measured on a click (a progress bar while it runs)."""
    st.subheader("Every head: sinks, local heads, far reach")
    heads = info.n_layers * info.heads
    if not st.toggle(
        f"measure every head ({heads} heads, each over every row)", key="rm_long_grid", bind="query-params"
    ):
        return
    maps = measure_grid(key, device, request, info.n_layers)
    st.markdown(grid_sentence(maps))
    check_choice("rm_long_number", "number", [title for title, _ in GRID_NAMES.values()])
    chosen = st.radio(
        "number",
        list(GRID_NAMES),
        format_func=lambda k: GRID_NAMES[k][0],
        horizontal=True,
        key="rm_long_number",
        bind="query-params",
    )
    note = f"{read.n_tokens:,} tokens; local: the last {LOCAL} tokens, the row's own included"
    show_figure(grid_figure(maps, chosen or "sink", note, style), "rm-long-grid")


def measure_grid(key, device, request, layers: int):
    """view(..., "grid") with a progress bar while the worker measures it (it answers once, at the end)."""
    future = model_worker().later("long", key, device, request, "grid")  # the worker keeps it
    bar = st.progress(0.0, text="Measuring every head…")
    while not future.done():
        done = model_worker().long_progress(key, device, request, "grid") or 0.0
        bar.progress(done, text=f"Measuring every head: layer {round(done * layers)} of {layers} done…")
        time.sleep(0.25)
    bar.empty()
    return future.result()
