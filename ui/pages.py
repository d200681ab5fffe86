"""What a page is, for the code every page shares: PageSpec, a page's facts (where its script is, its title and
icon, which sidebar controls it reads, its slides and its own choices in the address), and the sidebar's controls
in groups by what they set.

Each page's facts are in its folder (app_pages/<name>/spec.py); app_pages/__init__.py hands them here, in order
(PAGES: the registry the shared code reads, so that ui/ imports no page). app.py builds st.navigation from it; the
sidebar greys out the controls a page does not read (the Real model's architecture fixes d_k and heads);
presentation mode links every page.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import PurePosixPath

import streamlit as st

from attention_core.registry import put
from figures.settings import CONTROLS
from figures.stages import STAGES, stage_choices
from ui import address

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


PAGES: list[PageSpec] = []  # in the navigation's order: app_pages/__init__.py registers each page's spec
BY_TITLE: dict[str, PageSpec] = {}


def register_page(spec: PageSpec) -> PageSpec:
    """Add a page at the end of the navigation (or replace the one with its title): app.py builds the navigation,
    the sidebar and the presentation bar from PAGES on every run, so a registered page is reached from each."""
    return put(PAGES, BY_TITLE, spec.title, spec)


def unregister_page(title: str) -> None:
    PAGES.remove(BY_TITLE.pop(title))


NAVIGATION = "navigation_pages"  # session state: (the PageSpecs, their st.Page objects), made once per session


def navigation_pages() -> list[st.Page]:
    """The st.Page of every page, for st.navigation: made once per session (again where a page was registered
    since). Each st.Page finds its script on disk (a path resolved, a file checked), and st.switch_page and
    st.page_link given a path resolve it again: made on every run, they were 14 % of the server's samples with 60
    followers at once (py-spy, bench/bench_class.py, which counts a thread in a system call or waiting for
    Python's lock as busy). Made once, a presented Walkthrough's run takes 15.9-16.0 ms of CPU instead of
    16.3-17.2 (AppTest). Not shared between sessions: st.navigation marks the page it returns as the one that may
    run, and Page.run unmarks it."""
    made = st.session_state.get(NAVIGATION)
    if made is None or made[0] != PAGES:
        made = (list(PAGES), [spec.page() for spec in PAGES])
        st.session_state[NAVIGATION] = made
    return made[1]


def navigation_page(path: str) -> st.Page | str:
    """The session's st.Page of the page whose script is at `path`, for st.switch_page and st.page_link (given a
    path, each resolves it on disk again, on every run); the path itself where no page has it (Streamlit names it)."""
    return next((page for spec, page in zip(PAGES, navigation_pages(), strict=True) if spec.path == path), path)


DRAWN = "page_drawn"  # session state: the page the last whole run drew: (the hash Streamlit runs it by, its script)


def drawn(title: str) -> None:
    """In app.py, once st.navigation has chosen the page titled `title`: the page this session's runs are of."""
    st.session_state[DRAWN] = (address.page_run(), BY_TITLE[title].path)


def timed_fragment(run_every: float | None):
    """st.fragment(run_every=...), for a part of a page that draws itself again on a clock (a class's poll, a
    training run's progress). The browser asks for each such run naming the page it shows. Asked just before the
    server switched pages (st.switch_page: a deck's next view, a follower's), the run comes after the switched one
    and Streamlit runs it as the old page's: the browser takes the page for changed, and keeps only this part
    (docs/design-notes.md, "Page switches beside a part that runs on a clock"). Such a run goes back to the page
    drawn."""

    def timed(body):
        @functools.wraps(body)
        def on_the_page_drawn(*args, **kwargs):
            here = st.session_state.get(DRAWN)
            if here is not None and address.page_run() != here[0]:
                st.switch_page(navigation_page(here[1]))
            return body(*args, **kwargs)

        return st.fragment(on_the_page_drawn, run_every=run_every)

    return timed


def forget_other_pages(shown: str) -> None:
    """Give back what the pages other than the one shown keep only while they are shown (PageSpec.keeps)."""
    for spec in PAGES:
        if spec.title != shown:
            for key in spec.keeps:
                st.session_state.pop(key, None)


def by_address() -> dict[str, PageSpec]:
    """Every page by its address ("/", "/why_sqrt_dk"), as PAGES has them now."""
    return {spec.address: spec for spec in PAGES}
