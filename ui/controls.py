"""The sidebar's controls at work: each setting is declared once (figures/settings.py: its widget, default, range,
help), bound to the URL so that a link restores the exact view; here, what a change does (ON_CHANGE), the settings
a page is handed (Settings), and the lecture examples.

The same declarations draw the widgets, check a link's values before Streamlit sees them (Streamlit drops
a bound value it cannot use without a word: `heads=abc`, `d_model=5000`; here the page says so), and
validate every value again on the server (widget limits are enforced by the browser only, and a URL
or session state can carry anything).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

import streamlit as st

from attention_core import AttentionConfig
from attention_core.lectures import EXAMPLES, LectureExample
from attention_core.matrices import TYPED_NAMES, format_blocks
from attention_core.variants import VARIANTS, look_of
from figures.settings import DEFAULTS

# The server's log of refused requests (bad input, link values): one line each on standard error, with the
# reason; a sentence appears only as its length. Streamlit configures only its own loggers.
log = logging.getLogger("attention_explorer")
if not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)


def _suit_variant() -> None:
    """On choosing a variant: the settings that suit it (Look.suits: GQA heads to share, MLA rotary
    positions, DeepSeek-V4 a query latent)."""
    state = st.session_state
    if state.get("variant") in VARIANTS:
        suits = look_of(state["variant"]).suits
        state.update(
            suits({key: state[key] for key in ("heads", "kv_heads", "positional", "d_k", "d_cq") if key in state})
        )


# What a widget does when the reader changes it (a callback after the change), by setting.
ON_CHANGE = {"variant": _suit_variant}
OWN = "(your own sentence or settings)"
EXAMPLE_LABELS = {example.label: example for example in EXAMPLES}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the pages need, validated: the sentence, the layer its settings make, and the settings that change
    how things are shown and the Training page's own, each under its declared name (figures/settings.py: the
    sidebar's "display" and "training" groups, made into these fields by ui/sidebar.py's settings_from)."""

    text: str
    config: AttentionConfig
    numbers: bool = DEFAULTS["numbers"]
    count_from_1: bool = DEFAULTS["count_from_1"]
    palette: str = DEFAULTS["palette"]  # figures.palettes
    present: bool = DEFAULTS["present"]
    train_causal: bool = DEFAULTS["train_causal"]
    train_steps: int = DEFAULTS["train_steps"]
    typed: tuple[tuple[str, str], ...] = ()  # (name, text) of every typed matrix, e.g. ("w_q", "0.3,-0.1;...")
    typed_as: str = "typed"  # how the typed numbers came to be (typed_as below): "typed", or "trained (...)"
    own: str = ""  # one's own checkpoint's layer, as the address names it (ui.own_weights: "<digest>/<layer>")

    @property
    def index_base(self) -> int:
        """1: tokens and dimensions counted from 1, as the lectures do; 0: as Python does."""
        return 1 if self.count_from_1 else 0

    @property
    def font_size(self) -> int:
        return 22 if self.present else 16


# ------------------------------------------------------------------------------------------------
# Lecture examples: picking one sets its sentence, sizes and typed numbers; the box shows the
# example that the current settings are.


def example_state(example: LectureExample) -> dict:
    """The sidebar values an example sets (typed matrices as their URL text; the others cleared)."""
    typed = {name: format_blocks([example.typed[name]]) if name in example.typed else "" for name in TYPED_NAMES}
    return {"text": example.text, **example.sizes, **typed}


def current_example(state: Mapping) -> LectureExample | None:
    """The lecture example whose sentence, sizes and typed numbers the settings equal, if any."""
    for example in EXAMPLES:
        if all(state.get(key, DEFAULTS.get(key)) == value for key, value in example_state(example).items()):
            return example
    return None


def use_example() -> None:
    example = EXAMPLE_LABELS.get(st.session_state.get("example"))
    if example is not None:
        st.session_state.update(example_state(example))
