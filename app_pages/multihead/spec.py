"""The Multi-head page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import EVERYTHING, PageSpec

SPEC = PageSpec(
    "app_pages/multihead/multihead.py",
    "Multi-head",
    ":material/view_module:",
    EVERYTHING,
    slides=(("heads", "Every head"), ("peaked", "How peaked each head is")),
    slide_key="mh_slide",
    stages=True,
    questions=True,
    own=frozenset({"mh_stage", "mh_shared"}),
    cases=frozenset({"digests", "load", "smoke"}),
)
