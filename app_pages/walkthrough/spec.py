"""The Walkthrough page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import EVERYTHING, PageSpec

SPEC = PageSpec(
    "app_pages/walkthrough/walkthrough.py",
    "Walkthrough",
    ":material/arrow_forward:",
    EVERYTHING,
    default=True,
    slide_key="stage",
    stages=True,
    questions=True,
    own=frozenset({"head"}),
    cases=frozenset({"digests", "load"}),
)
