"""The app's pages, one folder each, named as the page's address (real_model/: /real_model): the page's script of
the same name (real_model.py: its main() and what it calls), spec.py its facts (title, icon, the sidebar controls
it reads, its slides, its own choices in the address: ui.pages.PageSpec), and beside them the parts that page alone
uses.

PAGES lists the pages in the navigation's order; app.py builds st.navigation from it on every run (its st.Page
objects once per session: navigation_pages), and the code every page shares (the sidebar, the presentation bar,
decks, the class) reads it.

Why app_pages/ and not pages/: Streamlit checks for a folder named pages/ beside the entry script and, when there is
one, starts a fresh server in its older multipage mode (a link that is the server's first request then runs its page
alone, without app.py's sidebar). Only a private flag turns that off; any other name leaves st.navigation in charge.
"""

from __future__ import annotations

from importlib import import_module

import streamlit as st

from attention_core.registry import put
from ui.pages import PageSpec

# By folder, in the navigation's order (imported by name: "class" is a Python keyword, and a fine address).
FOLDERS = (
    "walkthrough",
    "multihead",
    "decoding",
    "why_sqrt_dk",
    "compare",
    "training",
    "real_model",
    "glossary",
    "decks",
    "check",
    "class",
)
PAGES: list[PageSpec] = [import_module(f"app_pages.{folder}.spec").SPEC for folder in FOLDERS]
BY_TITLE: dict[str, PageSpec] = {spec.title: spec for spec in PAGES}


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


def forget_other_pages(shown: str) -> None:
    """Give back what the pages other than the one shown keep only while they are shown (PageSpec.keeps)."""
    for spec in PAGES:
        if spec.title != shown:
            for key in spec.keeps:
                st.session_state.pop(key, None)
