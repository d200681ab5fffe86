"""Links: every value of an address is checked before Streamlit sees it, and what Streamlit would drop without a
word (`heads=abc`, `d_model=5000`, a stage's choice it does not have) is named on the page, with what is allowed.
Old links keep working: a value's old title is taken for its key (LEGACY, take_keyed_choice)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import streamlit as st

from attention_core.controls import refusal
from attention_core.variants import IDENTITY, MHA
from figures.settings import CONTROLS, DEFAULTS
from figures.stages import STAGES
from figures.style import markdown_literal
from ui import address
from ui.controls import log


@dataclasses.dataclass(frozen=True)
class LinkValue:
    """A value a page writes into its address that no sidebar control holds, checked as the controls' are."""

    key: str
    label: str
    pattern: str  # a regular expression the whole value must match
    allowed: str  # the same, in words

    def refusal(self, raw: str) -> str:
        if re.fullmatch(self.pattern, raw):
            return ""
        return refusal(self.label, raw, self.allowed)


# The Training page's finished run: Run.fingerprint() and the CPU kernels that computed it (app_pages/training/).
TRAINING_RUN = LinkValue(
    "t_run",
    "the training run",
    r"[0-9a-f]{8}-[A-Z0-9_]{1,16}",
    "8 hex digits, a dash and the CPU kernels' name, as the Training page writes it (e.g. 3fa9c1d2-AVX512)",
)
# Where the typed numbers came from when the Training page put them there (ui.numbers.use_weights): its seed, its
# step, and a digest of the numbers, so that the label goes back to "typed" once one of them is edited.
NUMBERS_FROM = LinkValue(
    "numbers_from",
    "where the typed numbers come from",
    r"trained-(\d{1,9})-(\d{1,6})-([0-9a-f]{8})",
    "trained-, a seed, a step and 8 hex digits, as the Training page writes it when it gives "
    "its weights to the Walkthrough (e.g. trained-1-2000-3fa9c1d2)",
)
# A checkpoint of one's own weights that this server holds (ui.own_weights): its digest and the layer shown.
OWN_WEIGHTS = LinkValue(
    "own_weights",
    "your own weights",
    r"[0-9a-f]{12}/[A-Za-z0-9_.]{0,200}",
    "12 hex digits, a slash and a layer's name, as the page writes it when a checkpoint is opened "
    "(e.g. 3fa9c1d2e4b5/transformer.h.0.attn)",
)
LINK_VALUES = (TRAINING_RUN, NUMBERS_FROM, OWN_WEIGHTS)


def stage_options() -> tuple:
    """Every stage's choices (e.g. the KV cache's context length), as the registry has them now."""
    return tuple(option for stage in STAGES for option in stage.options)


def refused_values(params: Mapping[str, str]) -> dict[str, str]:
    """The link values that a control or page cannot take, by key, each with its message (see Control.refusal,
    LinkValue, Option)."""
    by_key = {value.key: value for value in (*CONTROLS, *LINK_VALUES, *stage_options())}
    return {key: problem for key, raw in params.items() if key in by_key and (problem := by_key[key].refusal(raw))}


def url_refusals(params: Mapping[str, str]) -> list[str]:
    """One message per link value that a control or page cannot take."""
    return list(refused_values(params).values())


# Links made before a control changed kind: their values are carried over to what replaced them.
LEGACY = {
    ("positional", "true"): ("positional", "sinusoidal"),  # positional encoding was a toggle
    ("positional", "false"): ("positional", "none"),
    ("projections", "true"): ("variant", MHA.key),  # "projections off" is the variant Q = K = V = X now
    ("projections", "false"): ("variant", IDENTITY.key),
}


def check_link() -> None:
    """On a session's first run, before any bound widget reads the URL: carry older links' values over to the
    controls that replaced them (LEGACY), and note the values that are refused."""
    if "link_refusals" not in st.session_state:
        carried = False
        for (key, old), (new_key, new) in LEGACY.items():
            if st.query_params.get(key, "").lower() == old:
                del st.query_params[key]
                st.session_state[new_key] = new
                carried = True
        refused = refused_values(st.query_params.to_dict())
        defaults = {**DEFAULTS, **{option.key: option.default for option in stage_options()}}
        for key, refusal in refused.items():  # the reason, with at most 40 characters of the value
            log.info("refused a link value: %s", refusal)
            if key in defaults:  # what the message says is shown ("Showing 4 instead"), not Streamlit's own
                del st.query_params[key]  # reading of it (d_k=2.5 would be 2)
                st.session_state[key] = defaults[key]
        if carried or refused:
            _forget_initial_link_values()
        st.session_state["link_refusals"] = list(refused.values())
        st.session_state["link_choices"] = {k: v for k, v in st.query_params.to_dict().items() if k not in refused}


def _forget_initial_link_values() -> None:
    """A bound widget takes its first value from the address as the session began, not from st.query_params:
    make that snapshot the address as it is now, without the refused values."""
    address.forget_initial_values()


def check_choice(key: str, label: str, shown: Sequence[str]) -> None:
    """A page's own choice, bound to the URL (a stage, a layer, a head): before its widget is drawn, a value the
    session's first link gave it that is none of `shown` (the choices as the address writes them) is named
    here, as the sidebar's are, and left out, instead of Streamlit dropping it without a word."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)  # once: the first link only
    if raw is None or raw in shown:
        return
    listed = ", ".join(map(str, shown[:8])) + (f", … ({len(shown)} in all)" if len(shown) > 8 else "")
    _refuse_choice(key, refusal(label, raw, f"one of {listed}"))


def take_keyed_choice(key: str, label: str, titles: Mapping[str, str]) -> str | None:
    """A page's own choice of a record, kept in the address by its key (keep_in_address), not its title: the
    session's first link's value, a key or (from an older link) a title, as the record's key for the page to
    draw its widget with; any other is named, as the sidebar's are. None when there is no such link value."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)  # once: the first link only
    if raw is None:
        return None
    by_title = {title: record for record, title in titles.items()}
    chosen = raw if raw in titles else by_title.get(raw)
    if chosen is None:
        _refuse_choice(key, refusal(label, raw, f"one of {', '.join(titles)}"))
    return chosen


def check_whole(key: str, label: str, low: int, high: int, step: int = 1) -> None:
    """As check_choice, for a page's own number: a whole number from low to high (a multiple of step)."""
    raw = st.session_state.get("link_choices", {}).pop(key, None)
    try:
        if raw is None or (low <= int(raw) <= high and int(raw) % step == 0):
            return
    except ValueError:
        pass
    every = "a whole number" if step == 1 else f"a multiple of {step}"
    _refuse_choice(key, refusal(label, raw, f"{every} from {low:,} to {high:,}"))


def keep_in_address(key: str, value: str, default: str) -> None:
    """A page's own bound choice (a string shown as it is in the address) held in the address as the server
    knows it. A click's rerun can reach the server with the address from before the click (the page writes the
    new value into it a moment later), and a message later in that run writes that older address back: a choice
    drawn and gone from the link (docs/design-notes.md). Streamlit lets no code set a bound
    value through st.query_params (ui/address.py)."""
    address.hold(key, None if value == default else value)


def _refuse_choice(key: str, message: str) -> None:
    log.info("refused a link value: %s", message)
    st.session_state["link_refusals"] = [*st.session_state.get("link_refusals", []), message]
    st.warning(markdown_literal(message), icon="🔗")  # here now; above the page, with the others, from the next run
    if key in st.query_params:
        del st.query_params[key]
        _forget_initial_link_values()  # its widget takes its default, not Streamlit's reading of the value


def show_link_refusals() -> None:
    """The refused link values, until the reader dismisses them."""
    refusals = st.session_state.get("link_refusals") or []
    if refusals:
        st.warning("  \n".join(markdown_literal(line) for line in refusals), icon="🔗")  # the link's text as written
        st.button(
            "Dismiss", key="dismiss_link_refusals", on_click=st.session_state.update, kwargs={"link_refusals": []}
        )
