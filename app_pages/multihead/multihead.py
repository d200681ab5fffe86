"""Multi-head: every head as small multiples, their peakiness, the concat and W_O."""

import math

import streamlit as st

from app_pages.multihead.spec import SPEC
from attention_core.limits import APP_MAX_HEADS
from attention_core.statistics import PEAKINESS
from attention_core.variants import look_of
from figures.multihead import GRID_COLUMNS, head_summary_figure, multihead_grid
from figures.stages import BY_KEY, brought_stages, grid_stages, made
from ui.links import check_choice
from ui.live_chart import show_figure
from ui.numbers import pattern_note
from ui.own_weights import own_weights_box
from ui.screen import slide_columns
from ui.show import friendly_errors, show_stage, style_for
from ui.sidebar import current_settings
from ui.slides import Slides
from ui.traces import show_typed_refusals, trace_for

HEADS_PAGE = "mh_heads_page"  # session state: which row of heads the slide shows (1-based), stepped by ← →


def _set_heads() -> None:
    """The slide's heads slider is the sidebar's "heads" (hidden in presentation mode), as a second widget."""
    st.session_state["heads"] = st.session_state["heads_slide"]


def own_weights(trace) -> str:
    """What each head has of its own, in the trace's variant."""
    if own := look_of(trace.variant).own_weights:
        return own
    if trace.kv_heads < trace.heads:
        groups = "; ".join(
            f"heads {', '.join(str(h + 1) for h in trace.heads_sharing(g))} read key/value head {g + 1}"
            for g in range(trace.kv_heads)
        )
        return f"Each head has its own W_Q; W_K and W_V are shared ({groups})"
    return "Each head has its own W_Q, W_K, W_V"


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        trace = trace_for(settings)
        style = style_for(settings)
        h = trace.heads
        # Presentation mode: a slide for the heads, one for how peaked they are, one per stage after them.
        stages = ["output", *(key for key in brought_stages() if BY_KEY[key].applies(trace))]
        spec = SPEC
        # On a slide one row of heads at a time: more are paged, and ← → step through the pages before the next slide.
        pages_of_heads = math.ceil(h / GRID_COLUMNS) if settings.present else 1
        inner = {"heads": (HEADS_PAGE, pages_of_heads)} if pages_of_heads > 1 else {}
        slides = Slides(
            spec.title,
            spec.slide_key,
            {**dict(spec.slides), **{key: BY_KEY[key].label for key in stages}},
            settings.present,
            inner=inner,
        )
        slides.steer()
        shown_heads = range(h)
        if pages_of_heads > 1:
            at = min(max(st.session_state.get(HEADS_PAGE, 1), 1), pages_of_heads)
            shown_heads = range((at - 1) * GRID_COLUMNS, min(h, at * GRID_COLUMNS))
        # Each part a container of its own, keyed: a note that comes or goes with one head leaves the parts below
        # it in their place in the browser, updated rather than made anew.
        if slides.shows("heads"):
            with st.container(key="mh-heads"):
                heads_slide(settings, trace, style, shown_heads)
        if slides.shows("peaked"):
            with st.container(key="mh-peaked"):
                peaked_slide(settings, trace, style)
        # concat·W_O, then what the variant adds: MLA's latent, RoPE, absorption; every variant's cache
        for key in stages:
            if slides.shows(key, marked=True):
                if settings.present:
                    slide = style_for(settings, side_by_side=True, slide=True)
                    show_stage(trace, key, 0, slide, prefix="mh-", places=slide_columns())
                else:
                    show_stage(trace, key, 0, style, prefix="mh-", marks=True)


def heads_slide(settings, trace, style, shown_heads: range) -> None:
    """Every head's map side by side (on a slide, a row of them at a time), and the choice of map and scale."""
    h = trace.heads
    if not settings.present:  # on a slide the bar names it
        st.title(f"{h} head{'s' if h > 1 else ''} in parallel")
        own_weights_box(settings)
    show_typed_refusals(settings)
    weights_are = made(set(trace.given), set(trace.params), trace.typed_as)
    here = (
        "the weights here are random, so how the heads differ is chance"
        if weights_are == "random"
        else f"the weights here are {weights_are}"
    )
    if settings.present:  # a slide: one line, so that the grid keeps its room (lecture 003's 15 tokens)
        st.markdown(f"{own_weights(trace)} ([multi-head](glossary#multi-head)); {here}.")
    else:
        st.markdown(
            f"{own_weights(trace)}, so each can look for something else "
            f"([multi-head](glossary#multi-head)). In a trained model one head might follow grammar and "
            f"another what “he” refers to; {here}. Their context vectors are concatenated and W_O maps "
            "them back to d_model."
        )
    pattern_note(trace, shown_heads, settings.present)
    if h == 1 and not settings.present:
        st.info("One head: raise **heads** in the sidebar to see several side by side.")
    choices = [stage.key for stage in grid_stages(trace)]
    check_choice("mh_stage", "map", [BY_KEY[k].label for k in choices])
    check_choice("mh_shared", "one colour scale for all heads", ["true", "false"])
    left, middle, right = st.columns([3, 1, 2], vertical_alignment="bottom")  # the toggle's words whole
    if settings.present:  # the slide is about the heads: their number is on it (the sidebar is hidden)
        st.session_state["heads_slide"] = h
        middle.slider("heads", 1, APP_MAX_HEADS, key="heads_slide", on_change=_set_heads)
    # The stages' short names, as the Walkthrough's pills write them: the titles ran past the column and the
    # control scrolled its first choice out of sight ("ttention scores QKᵀ"). The address holds them too.
    stage = left.segmented_control(
        "map",
        choices,
        format_func=lambda k: BY_KEY[k].label,
        default="weights",
        key="mh_stage",
        bind="query-params",
    )
    shared = right.toggle("one colour scale for all heads", value=True, key="mh_shared", bind="query-params")
    tallest = style.max_map_pixels if settings.present else None  # a slide: no taller than a map
    figure = multihead_grid(trace, stage or "weights", shared, style, tallest, shown_heads)
    show_figure(figure, "multihead-grid")


def peaked_slide(settings, trace, style) -> None:
    """How peaked each head is, on average over its rows."""
    if settings.present:
        st.header("How peaked each head is")
    show_figure(head_summary_figure(trace, style), "head-summary")
    st.dataframe(
        [
            {
                "head": s["head"] + 1,
                **{f"mean {stat.name}": round(s[f"mean_{stat.key}"], stat.digits) for stat in PEAKINESS},
            }
            for s in trace.head_summary()
        ],
        hide_index=True,
    )
    st.caption(f"Means over {trace.averaged_rows_text}.")


main()
