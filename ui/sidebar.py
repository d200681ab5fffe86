"""The sidebar: a widget for every Control a page reads (the others shown greyed, "not used on this page"), and the
settings it makes, validated again on the server."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import streamlit as st

from attention_core import (
    AttentionConfig,
    check_text,
    describe_device,
    resolve_device,
)
from attention_core.matrices import TYPED_NAMES
from attention_core.variants import VARIANTS, look_of, sizes_only_some_use
from figures.settings import (
    CONTROLS,
    DEFAULTS,
    OTHERS,
    POSITIONAL,
    SLIDERS,
    TEXT,
    TOGGLES,
    TRAINING,
    TYPED,
    TYPED_FORMAT,
    VARIANT_CONTROLS,
    Control,
    config_fields,
)
from ui.controls import EXAMPLE_LABELS, ON_CHANGE, OWN, Settings, current_example, use_example
from ui.links import NUMBERS_FROM, keep_in_address
from ui.own_weights import own_label, own_value
from ui.pages import EVERYTHING


def _widget(control: Control, active: bool, note: str = " Not used on this page.") -> None:
    common = {
        "key": control.key,
        "bind": "query-params",
        "disabled": not active,
        "help": control.helps + ("" if active else note),
        "on_change": ON_CHANGE.get(control.key),
    }
    if control.kind == "slider":
        st.slider(control.label, control.low, control.high, value=control.default, step=control.step, **common)
    elif control.kind == "number":
        st.number_input(control.label, control.low, control.high, value=control.default, step=1, **common)
    elif control.kind == "toggle":
        st.toggle(control.label, value=control.default, **common)
    elif control.kind == "select":  # the options as they are (a format_func's label would be what the URL holds)
        st.selectbox(control.label, control.choices, index=control.choices.index(control.default), **common)
    elif control.kind == "line":
        st.text_input(control.label, value=control.default, max_chars=control.high, placeholder="none", **common)
    elif control.key == "text":
        st.text_area(control.label, value=control.default, max_chars=control.high, height=90, **common)
    else:
        st.text_area(control.label, value="", max_chars=control.high, height=68, placeholder="drawn", **common)


def sidebar(reads: frozenset[str] = EVERYTHING) -> None:
    """Draw the controls; those the current page does not read are shown inactive (greyed out)."""
    with st.sidebar:
        # The lecture-example box comes first on the page but is filled last: on a session's first run the
        # other controls take their values from the URL only as they are drawn, and the box shows which
        # example (if any) those values are.
        example_slot = st.empty()
        for control in (TEXT, *SLIDERS):
            _widget(control, control.key in reads)
        variant = DEFAULTS["variant"]
        for control in VARIANT_CONTROLS:  # the variant first: on a first run it reads the URL only as it is drawn
            variant = st.session_state.get("variant", variant)
            own = VARIANTS[variant].uses if variant in VARIANTS else ()
            if control.key not in sizes_only_some_use() or control.key in own:  # a variant's sizes appear with it
                _widget(control, control.key in reads)
        if "variant" in reads and variant in VARIANTS:
            chosen, caption = VARIANTS[variant], look_of(variant).caption
            st.caption(f"**{chosen.title}** ({chosen.label})" + (f": {caption}." if caption else "."))
        for control in (*TOGGLES, POSITIONAL, *OTHERS):
            _widget(control, control.key in reads)
        try:
            st.caption(f"Computing on: **{describe_device(resolve_device(st.session_state.get('device', 'auto')))}**")
        except ValueError as error:
            st.caption(f"⚠️ {error}")
        st.caption("**Training page**")
        for control in TRAINING:
            _widget(control, control.key in reads)
        # A field's value once drawn; on a link's first run, the address (read by the field only as it is drawn).
        typed = any(st.session_state.get(c.key, st.query_params.get(c.key)) for c in TYPED)
        box = st.expander("Typed numbers (X, W_Q, W_K, W_V, W_O)", key="typed_box", on_change="rerun")
        with box:
            # Its fields are drawn only while it is open or holds numbers (a field not drawn forgets its value):
            # closed and empty, they were five text areas that every rerun of every page sent and drew unseen.
            if box.open or typed:
                st.caption(f"{TYPED_FORMAT} The Walkthrough has tables to type into. Empty: drawn from the seed.")
                for control in TYPED:
                    _widget(control, control.key in reads)
                    # A field drawn for the first time with numbers set by a button (the Training page's "Use the
                    # weights") is not written into the address by Streamlit: held there here.
                    keep_in_address(control.key, st.session_state.get(control.key, ""), "")
            if typed:
                st.button(
                    "Forget typed numbers",
                    on_click=st.session_state.update,
                    kwargs=dict.fromkeys(TYPED_NAMES, ""),
                    key="forget_typed_sidebar",
                )
        st.caption("The address bar holds every setting: copy it to share this exact view.")
    example = current_example(st.session_state)
    st.session_state["example"] = example.label if example else OWN
    example_slot.selectbox(
        "Lecture example",
        (OWN, *EXAMPLE_LABELS),
        key="example",
        on_change=use_example,
        disabled="example" not in reads,
        help="Sets the lecture's sentence and sizes (and its hand numbers, where it works them by hand).",
    )


def current_settings() -> Settings:
    """The sidebar's values, validated (see settings_from), with where the typed numbers came from."""
    settings = settings_from(st.session_state)
    own = own_value()
    label = own_label(own) if own and not settings.typed else typed_as(settings.typed)
    return dataclasses.replace(settings, typed_as=label, own=own)


def numbers_digest(typed: tuple[tuple[str, str], ...]) -> str:
    """Eight hex digits of the typed numbers' text (Settings.typed): equal only for the same numbers."""
    return hashlib.blake2b(repr(tuple(typed)).encode(), digest_size=4).hexdigest()


def numbers_from(seed: int, step: int, typed: tuple[tuple[str, str], ...]) -> str:
    """The NUMBERS_FROM value for numbers trained with `seed` up to `step`."""
    return f"trained-{seed}-{step}-{numbers_digest(typed)}"


def typed_as(typed: tuple[tuple[str, str], ...]) -> str:
    """How the typed numbers came to be: "trained (Training page, seed 1, step 2000)" while they are the numbers
    the Training page gave (the address, or this session, says so with their digest), else "typed". The address
    keeps it, so that a link says the same; it is dropped once the numbers are edited."""
    raw = st.query_params.get(NUMBERS_FROM.key) or st.session_state.get(NUMBERS_FROM.key, "")
    match = re.fullmatch(NUMBERS_FROM.pattern, raw)
    if typed and match and match[3] == numbers_digest(typed):
        st.session_state[NUMBERS_FROM.key] = raw
        if st.query_params.get(NUMBERS_FROM.key) != raw:  # written once, not sent again on every rerun
            st.query_params[NUMBERS_FROM.key] = raw
        return f"trained (Training page, seed {match[1]}, step {match[2]})"
    st.session_state.pop(NUMBERS_FROM.key, None)
    if NUMBERS_FROM.key in st.query_params:
        del st.query_params[NUMBERS_FROM.key]
    return "typed"


def settings_from(values) -> Settings:
    """Validate raw control values (missing ones take their defaults). Raises ValueError with a
    message that names the field, the value and what is allowed."""
    state = {key: values.get(key, default) for key, default in DEFAULTS.items()}
    for control in CONTROLS:  # each value by its kind; a computing setting's choice AttentionConfig checks below
        if control.kind == "toggle" and not isinstance(state[control.key], bool):
            raise ValueError(f"{control.key} must be on or off; got {state[control.key]!r}")
        if control.kind in ("text", "line"):
            check_text(state[control.key], control.label)
        if control.kind == "select" and not control.computes and state[control.key] not in control.choices:
            raise ValueError(f"{control.label} must be {control.allowed()}; got {state[control.key]!r}")
    config = AttentionConfig(**config_fields(state))
    typed = tuple((name, state[name]) for name in TYPED_NAMES if state[name])
    shown = {c.key: state[c.key] for c in CONTROLS if c.group in ("display", "training") and not c.computes}
    return Settings(state["text"], config, typed=typed, **shown)
