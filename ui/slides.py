"""Presentation mode on every page: a page is a sequence of slides, one idea per screen, stepped with ← and →.

A page lists its slides (key, title) and asks `slides.shows(key)` before drawing each part: read normally,
every part is drawn, one after the other; in presentation mode only the slide chosen in the bar. The bar
(← previous, a pill per slide or a list of them, next →) is the same on every page, and ui/keys.js makes the
arrow keys press its buttons wherever the focus is. The slide shown is in the address (the Walkthrough's `stage`,
the other pages' own key), so a link restores it; when a deck is open (ui/decks.py), → past the last slide opens
its next view.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import streamlit as st
import streamlit.components.v2

from ui.links import check_choice, keep_in_address

WANTED = "slide_wanted"  # a slide to open on the next run: a key, "first" or "last" (a deck's next view)
AT = "slide_at"  # (page title, slide key) of the slide shown: where "Leave presentation" returns to
VIEW_AT = "deck_view"  # the index of the view of the open deck that is presented (ui/decks.py)
SCROLL_TO = "scroll_to"  # the anchor to scroll to once, after leaving presentation mode
SHOWN = "slide_shown"  # {session key: value} of the slide and inner step the last run drew: what ← and → step from
PLAY_SECONDS = 1.2  # between steps while a page's ▶ play runs on (Decoding's tokens)
STEPS = "slide_steps"  # how many times ← or → has been pressed in this session: ui/keys.js waits for each to be run
# The bar's middle holds a pill per slide while they fit one row of it at 1400 x 900, the screen slides are made for
# (930 px there): a pill takes ~20 px and ~8.8 px a character of its label, in the bar's type (ui/screen.py
# SLIDE_BAR_CSS), measured on every page's bar. More slides than that (the Real model's eighteen, the Glossary's
# twenty-three) are a list to choose from: pills ran under "next →" and off the screen, and a second row of them
# pushed the slide past the screen's bottom. tests/test_browser.py checks that every pill is whole.
PILLS_ROOM = 930


def pills_fit(labels: list[str]) -> bool:
    """Whether a pill per label fits one row of the bar at 1400 x 900 (PILLS_ROOM)."""
    return 20 * len(labels) + 8.8 * sum(len(label) for label in labels) <= PILLS_ROOM


_keys = st.components.v2.component(
    "slide_keys", js=Path(__file__).with_name("keys.js").read_text(), isolate_styles=False
)


def anchor(key: str) -> str:
    """The id of a slide's place on the page read normally (prefixed: a stage key alone, "output", could be taken)."""
    return f"slide-{key}"


def keys(presentation: bool) -> None:
    """The arrow keys and Esc in presentation mode, and, once after leaving it, a scroll back to its slide. The
    count of steps run tells the keys when the press they sent has been answered."""
    scroll_to = st.session_state.pop(SCROLL_TO, None)
    if presentation or scroll_to:
        data = {"scroll_to": scroll_to, "steps": st.session_state.get(STEPS, 0)}
        _keys(data=data, key="slide_keys", height=0)


def leave() -> None:
    """Leave presentation mode, to the place of the slide that was shown."""
    st.session_state["present"] = False
    st.session_state.pop(VIEW_AT, None)  # a deck is presented until presentation mode ends
    at = st.session_state.get(AT)
    if at:
        st.session_state[SCROLL_TO] = anchor(at[1])


@dataclasses.dataclass
class Slides:
    """A page's slides: `key` names the one shown in the address and session; `titles` maps each slide's key to
    its title, in order. `inner`: a slide with steps of its own (Decoding's tokens), by key: (the session key
    of its step, 1-based, and how many there are); ← and → step through them before leaving the slide."""

    page: str
    key: str
    titles: dict[str, str]
    presentation: bool
    inner: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    shown: str = ""
    middle: object = None  # presentation mode, a page of one slide: the bar's free middle, for the slide's choices

    def steer(self) -> str:
        """Presentation mode: the bar to step by (← previous, a pill per slide, next →); the key of the slide it
        shows. Read normally, nothing is drawn and every slide shows."""
        keys = list(self.titles)
        labels = [self.titles[k] for k in keys]
        if not self.presentation:
            return ""
        wanted = st.session_state.pop(WANTED, None)
        if wanted in self.titles or wanted in ("first", "last"):
            at = {"first": keys[0], "last": keys[-1]}.get(wanted, wanted)
            st.session_state[self.key] = self.titles[at]
        back, pills, forward = st.columns([1.2, 7.6, 1.2], vertical_alignment="bottom")
        inner = {self.titles[k]: within for k, within in self.inner.items()}  # by label, as the state holds slides
        back.button("← previous", on_click=step, args=(self.key, labels, -1, inner), width="stretch", key="slide_prev")
        forward.button("next →", on_click=step, args=(self.key, labels, 1, inner), width="stretch", key="slide_next")
        if len(labels) == 1:  # nothing to choose; the buttons stay, for a deck's next and previous views
            self.middle = pills
            st.session_state[AT] = (self.page, keys[0])
            self.shown = keys[0]
            self._drawn()
            return self.shown
        check_choice(self.key, "slide", labels)
        bound = {"key": self.key, "bind": "query-params", "label_visibility": "collapsed"}  # the same address
        if pills_fit(labels):
            label = pills.segmented_control("slide", labels, default=labels[0], **bound)
        else:
            label = pills.selectbox("slide", labels, **bound)
        # A slide set before its widget was first drawn (a deck's first view on this page) is not written into the
        # address by the widget itself: the link copied there opened the page's first slide.
        keep_in_address(self.key, label, labels[0])
        self.shown = keys[labels.index(label)] if label in labels else keys[0]
        st.session_state[AT] = (self.page, self.shown)
        self._drawn()
        return self.shown

    def _drawn(self) -> None:
        """Note what this run shows, for ← and → to step from (`step`): the slide, and each inner step that has
        been set (one that has not is its widget's default, read when the key is pressed)."""
        steps = {
            step_key: st.session_state[step_key] for step_key, _ in self.inner.values() if step_key in st.session_state
        }
        st.session_state[SHOWN] = {self.key: self.titles[self.shown], **steps}

    def shows(self, key: str, marked: bool = False) -> bool:
        """Whether to draw this slide's part of the page now; read normally, a mark to return to as well, unless the
        part is `marked` itself (a stage's container carries its mark: ui.show.show_stage)."""
        if not self.presentation:
            if not marked:
                st.html(f'<span id="{anchor(key)}"></span>')
            return True
        return key == self.shown


def no_deck(delta: int, past_the_end: bool) -> bool:
    """Without a deck presented no view takes a step: the slides go round."""
    return False


# Who takes a step at the slides' ends: ui.decks puts its step_view here when it is imported (a deck uses the
# slides; the slides only hand over, so they do not import the decks).
at_the_ends: Callable[[int, bool], bool] = no_deck


def step(key: str, labels: list[str], delta: int, inner: dict[str, tuple[str, int]] | None = None) -> None:
    """← / →: the next step within the slide where it has steps (`inner`), else the previous or next slide,
    round to the other end; while a deck is presented, its next or previous view where ui.decks.step_view
    takes the step. A slide with steps is entered at its first step going forward, at its last going back."""
    st.session_state[STEPS] = st.session_state.get(STEPS, 0) + 1
    # From what was drawn, not from the widgets' values: a press sent just after a rerun can carry the pills' and
    # sliders' values from before it (the page has not applied the new ones yet), and would step from there.
    shown = st.session_state.get(SHOWN, {})
    inner = inner or {}
    current = shown.get(key, st.session_state.get(key, labels[0]))
    if current in inner:
        step_key, count = inner[current]
        at = min(max(shown.get(step_key, st.session_state.get(step_key, 1)), 1), count)
        if 1 <= at + delta <= count:
            st.session_state[step_key] = at + delta
            return
    index = labels.index(current) if current in labels else 0
    if at_the_ends(delta, past_the_end=not 0 <= index + delta < len(labels)):
        return
    st.session_state[key] = labels[(index + delta) % len(labels)]
    if st.session_state[key] in inner:
        step_key, count = inner[st.session_state[key]]
        st.session_state[step_key] = 1 if delta > 0 else count
