"""The app's pages, one folder each, named as the page's address (real_model/: /real_model): the page's script of
the same name (real_model.py: its main() and what it calls), spec.py its facts (title, icon, the sidebar controls
it reads, its slides, its own choices in the address: ui.pages.PageSpec), and beside them the parts that page alone
uses.

Importing this package hands every page's spec, in the navigation's order, to the registry in ui/pages.py (PAGES):
app.py builds st.navigation from it on every run (its st.Page objects once per session: navigation_pages), and the
code every page shares (the sidebar, the presentation bar, decks, the class) reads it there, never a page itself.

Why app_pages/ and not pages/: Streamlit checks for a folder named pages/ beside the entry script and, when there is
one, starts a fresh server in its older multipage mode (a link that is the server's first request then runs its page
alone, without app.py's sidebar). Only a private flag turns that off; any other name leaves st.navigation in charge.
"""

from __future__ import annotations

from importlib import import_module

from ui.pages import (
    BY_TITLE,
    NAVIGATION,
    PAGES,
    forget_other_pages,
    navigation_page,
    navigation_pages,
    register_page,
    unregister_page,
)

__all__ = [
    "BY_TITLE",
    "FOLDERS",
    "NAVIGATION",
    "PAGES",
    "forget_other_pages",
    "navigation_page",
    "navigation_pages",
    "register_page",
    "unregister_page",
]

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
for folder in FOLDERS:  # handed to the registry the shared code reads (ui/pages.py): ui imports no page
    register_page(import_module(f"app_pages.{folder}.spec").SPEC)
