"""The Glossary page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from figures.glossary import TERMS
from figures.glossary import anchor as term_anchor
from ui.pages import DISPLAY, PageSpec

SPEC = PageSpec(
    "app_pages/glossary/glossary.py",
    "Glossary",
    ":material/menu_book:",
    DISPLAY,
    slides=tuple((term_anchor(term), term) for term in TERMS),
    slide_key="g_slide",
    cases=frozenset({"load"}),
)
