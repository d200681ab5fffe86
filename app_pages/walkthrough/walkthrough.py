"""Walkthrough: X → Q,K,V → QKᵀ → /√d_k → mask → softmax → ·V → concat·W_O, one stage at a time."""

import streamlit as st

from attention_core.composed import parse_mask
from attention_core.variants import VARIANTS, look_of
from figures.stages import BY_KEY, stages_for
from ui.exports import trace_npz
from ui.links import check_choice
from ui.numbers import lecture_panel, numbers_editor, pattern_note
from ui.own_weights import own_weights_box
from ui.screen import slide_columns
from ui.show import SIDE_BY_SIDE_MAX, friendly_errors, show_stage, style_for
from ui.sidebar import current_settings
from ui.slides import Slides
from ui.traces import show_typed_refusals, trace_for


def settings_line(trace, config) -> list[str]:
    """The settings this page shows, for its caption: sizes, variant, mask, scaling, positions, seed."""
    variant, sizes = VARIANTS[trace.variant], trace.sizes
    heads = f"{trace.heads} head{'s' if trace.heads > 1 else ''}"
    shape = look_of(trace.variant).heads_line(heads, sizes)
    return [
        f"{trace.n_tokens} token{'s' if trace.n_tokens > 1 else ''}",
        f"{variant.label}",
        f"d_model {config.d_model} · d_k {trace.d_k} · d_v {trace.d_v}",
        shape,
        f"mask: {parse_mask(trace.composed).words()}" if trace.composed else "causal" if config.causal else "no mask",
        *([f"bent: {config.bend}"] if config.bend else []),
        "scaled" if config.scaled else "NOT scaled",
        f"positions: {config.positional}",
        f"seed {config.seed}",
    ]


def _switch_mask() -> None:
    """The mask slide's switch is the sidebar's "causal mask" (hidden in presentation mode), as a second widget."""
    st.session_state["causal"] = st.session_state["causal_slide"]


HEAD_PILLS_MAX = 6  # more heads than this get a menu, not a row of pills (GPT-2's 12 do not fit a slide's column)


def _head_picker(place, count: int, label: str = "visible") -> int:
    """The head shown: pills, or a menu past HEAD_PILLS_MAX heads; `label`: "collapsed" on a slide, whose choices
    name themselves ("head 3")."""
    if count == 1:
        return 0
    check_choice("head", "head", [f"head {i + 1}" for i in range(count)])
    heads, name = list(range(count)), lambda i: f"head {i + 1}"
    common = dict(format_func=name, key="head", bind="query-params", label_visibility=label)
    if count <= HEAD_PILLS_MAX:
        head = place.segmented_control("head", heads, default=0, **common)
    else:
        head = place.selectbox("head", heads, **common)
    return 0 if head is None else min(head, count - 1)


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        trace = trace_for(settings)
        keys = [stage.key for stage in stages_for(trace)]
        if settings.present:
            presented(settings, trace, keys)
        else:
            read(settings, trace, keys)


def presented(settings, trace, keys: list[str]) -> None:
    """One row to steer by, then the stage as a slide: words left, figures right, on one screen."""
    style = style_for(settings, side_by_side=True, slide=True)
    show_typed_refusals(settings)
    slides = Slides("Walkthrough", "stage", {key: BY_KEY[key].label for key in keys}, presentation=True)
    key = slides.steer()
    places = slide_columns()
    head = _head_picker(places[0], trace.heads, label="collapsed")
    if key == "mask":  # the slide tells the room to switch the mask: the switch is on the slide
        st.session_state["causal_slide"] = settings.config.causal
        places[0].toggle("causal mask", key="causal_slide", on_change=_switch_mask)
    show_stage(trace, key, head, style, places=places)
    if key == "weights":  # the stage where a lecture's pattern shows, or does not
        with places[0]:  # its words under the stage's, the offer of trained weights under the map
            pattern_note(trace, head, presentation=True, offer_place=places[1])


def read(settings, trace, keys: list[str]) -> None:
    """Every stage, one under the other, with the lecture's panel and the typed numbers above them."""
    # A stage's figures share a row where the maps stay wide enough to read.
    style = style_for(settings, side_by_side=trace.n_tokens <= SIDE_BY_SIDE_MAX)
    st.title("Self-attention, step by step")
    st.caption(" · ".join(settings_line(trace, settings.config)))
    show_typed_refusals(settings)
    lecture_panel(trace)
    head = _head_picker(st.empty(), trace.heads)  # its place kept with one head: nothing below it moves
    pattern_note(trace, head)
    own_weights_box(settings)
    numbers_editor(trace, settings, head)
    slides = Slides("Walkthrough", "stage", {key: BY_KEY[key].label for key in keys}, presentation=False)
    for key in keys:
        slides.shows(key, marked=True)  # the stage's container is the place "Leave" returns to
        show_stage(trace, key, head, style, marks=True)
        st.divider()
    st.download_button(
        "⬇ whole trace (.npz)",
        data=lambda: trace_npz(trace),
        file_name="attention_trace.npz",
        mime="application/octet-stream",
        on_click="ignore",
        key="dl-npz",
    )


main()
