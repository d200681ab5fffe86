"""The app's pages, one folder each, named as the page's address (real_model/: /real_model): the page's script of
the same name (real_model.py: its main() and what it calls), spec.py its facts (title, icon, the sidebar controls
it reads, its slides, its own choices in the address: ui.pages.PageSpec), and beside them the parts that page alone
uses.

PAGES lists the pages in the navigation's order; app.py builds st.navigation from it on every run, and the code
every page shares (the sidebar, the presentation bar, decks, the class) reads it.

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


def forget_other_pages(shown: str) -> None:
    """Give back what the pages other than the one shown keep only while they are shown (PageSpec.keeps)."""
    for spec in PAGES:
        if spec.title != shown:
            for key in spec.keeps:
                st.session_state.pop(key, None)
