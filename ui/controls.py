"""The sidebar: every knob, bound to the URL so that a link restores the exact view.

Widget limits (max_chars, min/max) are enforced by the browser only, and a URL or session
state can carry anything, so `current_settings` validates every value again on the server.
"""

from __future__ import annotations

import dataclasses

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from attention_core import MAX_SEED, MAX_TEXT_CHARS, AttentionConfig, describe_device, resolve_device
from attention_core.config import DEVICE_CHOICES, INIT_CHOICES

EXAMPLES = (
    "The next day is bright",
    "Alice will eat pizza",
    "The dog chased the ball but it couldn't catch it",
    "Vatsal studies a lot, Madd does not. Yet he gets high scores.",
    "the pizza came out of the oven and it tasted good",
)
DEFAULTS = {
    "text": EXAMPLES[0],
    "d_model": 8,
    "d_k": 4,
    "d_v": 4,
    "heads": 2,
    "causal": False,
    "scaled": True,
    "positional": True,
    "seed": 0,
    "init": "xavier",
    "device": "auto",
    "numbers": True,
    "present": False,
}
SLIDER_MAX = {"d_model": 512, "d_k": 256, "d_v": 256, "heads": 16}
TEXT_BOX_CHARS = MAX_TEXT_CHARS
OWN_TEXT = "(your own sentence)"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the pages need, validated."""

    text: str
    config: AttentionConfig
    positional: bool
    show_numbers: bool
    presentation: bool

    @property
    def font_size(self) -> int:
        return 22 if self.presentation else 16


def _use_example():
    choice = st.session_state.get("example")
    if choice in EXAMPLES:
        st.session_state["text"] = choice


def sidebar() -> None:
    """Draw the controls. Values live in st.session_state (and the URL) under their keys."""
    with st.sidebar:
        st.selectbox(
            "Lecture example",
            (OWN_TEXT, *EXAMPLES),
            key="example",
            on_change=_use_example,
            help="Pick a sentence from the lectures, or type your own below.",
        )
        st.text_area(
            "Sentence",
            value=DEFAULTS["text"],
            key="text",
            max_chars=TEXT_BOX_CHARS,
            height=90,
            bind="query-params",
            help='Words and punctuation become tokens; "couldn\'t" stays one token.',
        )
        for key, label, low, help_text in (
            ("d_model", "d_model (embedding width)", 1, "Width of each row of X."),
            ("d_k", "d_k (query/key width per head)", 1, "Each head projects d_model → d_k."),
            ("d_v", "d_v (value width per head)", 1, "Width of each head's value and context vectors."),
            ("heads", "heads", 1, "W_O maps heads · d_v back to d_model."),
        ):
            st.slider(label, low, SLIDER_MAX[key], value=DEFAULTS[key], key=key, bind="query-params", help=help_text)
        for key, label, help_text in (  # one per line: two side by side cut their labels short ("numbers i…")
            ("causal", "causal mask", "Each token sees only itself and the tokens before it (as in GPT)."),
            ("scaled", "scale by √d_k", "Divide the scores by √d_k before the softmax; off shows why it matters."),
            ("positional", "positional encoding", "Add sinusoidal positions to X, so word order changes the numbers."),
            ("numbers", "numbers in cells", "Write each value in its cell (maps up to 16 x 16)."),
        ):
            st.toggle(label, value=DEFAULTS[key], key=key, bind="query-params", help=help_text)
        st.number_input("seed", 0, MAX_SEED, value=DEFAULTS["seed"], step=1, key="seed", bind="query-params")
        st.selectbox(
            "weight init",
            INIT_CHOICES,
            index=INIT_CHOICES.index(DEFAULTS["init"]),
            key="init",
            bind="query-params",
            help="normal: N(0,1) like the lectures' torch.randn (peaky rows). "
            "xavier: scaled like a real layer before training.",
        )
        st.selectbox("device", DEVICE_CHOICES, key="device", bind="query-params")
        try:
            st.caption(f"Computing on: **{describe_device(resolve_device(st.session_state['device']))}**")
        except ValueError as error:
            st.caption(f"⚠️ {error}")
        st.toggle(
            "presentation mode",
            value=DEFAULTS["present"],
            key="present",
            bind="query-params",
            help="Large type, no sidebar, one stage per screen; ← and → step through the stages.",
        )
        st.caption("The address bar holds every setting: copy it to share this exact view.")


def current_settings() -> Settings:
    """The sidebar's values, validated (see settings_from)."""
    run_through_app_py()
    return settings_from(st.session_state)


def run_through_app_py() -> None:
    """Make sure this run goes through app.py's st.navigation (the sidebar, the URL's settings).

    A folder named pages/ beside app.py puts a fresh Streamlit server in its older multipage mode
    until app.py first calls st.navigation. In that mode a link that is the server's first request
    runs a page file alone (".../multihead?heads=3" shows 2 heads and no sidebar), or runs app.py as
    a page of its own whose widgets are forgotten on the next click. Leaving that mode and rerunning
    gives the link its exact view. Called first thing by app.py and by every page (current_settings).
    (Streamlit 1.67 has no public switch for this; the flag is its own: streamlit/streamlit#10276.)
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def settings_from(values) -> Settings:
    """Validate raw control values (missing ones take their defaults). Raises ValueError with a
    message that names the field, the value and what is allowed."""
    state = {key: values.get(key, default) for key, default in DEFAULTS.items()}
    text = state["text"]
    if not isinstance(text, str):
        raise ValueError(f"Sentence must be text; got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"Sentence has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are allowed")
    for key in ("positional", "numbers", "present"):
        if not isinstance(state[key], bool):
            raise ValueError(f"{key} must be on or off; got {state[key]!r}")
    config = AttentionConfig(
        d_model=state["d_model"],
        d_k=state["d_k"],
        d_v=state["d_v"],
        n_heads=state["heads"],
        causal=state["causal"],
        scaled=state["scaled"],
        seed=state["seed"],
        init=state["init"],
        device=state["device"],
    )
    return Settings(text, config, state["positional"], state["numbers"], state["present"])
