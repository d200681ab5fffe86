"""The Compare page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import EVERYTHING, PageSpec

SPEC = PageSpec(
    "app_pages/compare/compare.py",
    "Compare",
    ":material/compare:",
    EVERYTHING,
    slides=(("compare", "Two settings side by side"),),
    slide_key="cmp_slide",
    own=frozenset({"cmp_what", "cmp_stage", "cmp_dk_left", "cmp_dk_right", "cmp_variant_left", "cmp_variant_right"}),
    cases=frozenset({"digests", "load", "smoke"}),
)
