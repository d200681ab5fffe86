"""The Decks page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import DISPLAY, PageSpec

SPEC = PageSpec("app_pages/decks/decks.py", "Decks", ":material/slideshow:", DISPLAY, own=frozenset({"deck"}))
