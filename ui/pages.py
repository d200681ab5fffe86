"""What a page is, for the code every page shares: PageSpec, a page's facts (where its script is, its title and
icon, which sidebar controls it reads, its slides and its own choices in the address), and the sidebar's controls
in groups by what they set.

Each page's facts are in its folder (app_pages/<name>/spec.py); app_pages/__init__.py lists the pages in order.
app.py builds st.navigation from that list; the sidebar greys out the controls a page does not read (the Real
model's architecture fixes d_k and heads); presentation mode links every page.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath

import streamlit as st

from figures.settings import CONTROLS
from figures.stages import STAGES, stage_choices

# The sidebar's settings by what they set (each setting's `group`, figures/settings.py), for a page's `reads`.


def _group(name: str) -> frozenset[str]:
    return frozenset(control.key for control in CONTROLS if control.group == name)


SENTENCE = _group("sentence") | {"example"}  # and the lecture example's box, which sets the sentence
SIZES = _group("sizes")
SETTINGS = _group("settings")
TYPED = _group("typed")
DISPLAY = _group("display")
EVERYTHING = SENTENCE | SIZES | SETTINGS | TYPED | DISPLAY


@dataclasses.dataclass(frozen=True)
class PageSpec:
    path: str
    title: str
    icon: str
    reads: frozenset[str]  # the sidebar controls this page uses; the others are shown as inactive
    default: bool = False
    keeps: tuple[str, ...] = ()  # what a session keeps (session-state keys) only while it shows this page
    # Presentation mode (ui/slides.py): the page's slides, (key, title) in order, and where the address keeps the
    # one shown. The Walkthrough's and Multi-head's slides include the registry's stages (figures/stages/).
    slides: tuple[tuple[str, str], ...] = ()
    slide_key: str = ""
    own: frozenset[str] = frozenset()  # the page's own choices in its address (a stage, a head, a layer, ...)
    # Linked from the presentation bar: the pages a lecture shows. The bar holds them in one row at 1400 pixels;
    # one more wraps it and every slide scrolls (tests/test_browser.py's deck walk).
    presented: bool = True
    stages: bool = False  # its slides include the registry's stages (figures/stages/), after its own
    questions: bool = False  # a class's questions ask of its numbers: the sidebar's sentence, as they compute it
    # The whole-app checks that open it, by name: "smoke" (scripts/smoke_pages.py, inside the image), "digests"
    # (scripts/figure_digests.py: its figures' JSON at a set of links) and "load" (bench/load.py --per-page).
    cases: frozenset[str] = frozenset()

    @property
    def url_path(self) -> str:
        """The page's name in its address: its script's name, which in app_pages/ is its folder's
        (app_pages/why_sqrt_dk/why_sqrt_dk.py: "why_sqrt_dk"). Streamlit names a page by its file too, where a
        page is opened by its file (AppTest before a first run), so the two agree."""
        return PurePosixPath(self.path).stem

    @property
    def address(self) -> str:
        """Where the page is: "/" for the first, else "/" and its url_path ("/why_sqrt_dk")."""
        return "/" if self.default else f"/{self.url_path}"

    @property
    def slide_keys(self) -> frozenset[str]:
        stages = {stage.key for stage in STAGES} if self.stages else set()
        return frozenset(key for key, _ in self.slides) | stages

    @property
    def link_keys(self) -> frozenset[str]:
        """The page's own choices in its address: its `own`, and the stages' where it shows them."""
        return self.own | (stage_choices() if self.stages else frozenset())

    def page(self) -> st.Page:
        where = {} if self.default else {"url_path": self.url_path}  # (the default page's address is "/")
        return st.Page(self.path, title=self.title, icon=self.icon, default=self.default, **where)
