"""The Decoding page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import EVERYTHING, PageSpec

# Decoding is causal whatever the sidebar's mask says: each step's query sees the tokens so far (under a
# sliding window, the last w and the sinks: its cache stops growing). Top-k chooses among the keys by the
# scores of the whole pass; a step here reads every key its cache holds.
SPEC = PageSpec(
    "app_pages/decoding/decoding.py",
    "Decoding",
    ":material/keyboard_double_arrow_right:",
    EVERYTHING - {"causal", "top_k"},
    slides=(("step", "One step"), ("cost", "What a step costs")),
    slide_key="dec_slide",
    own=frozenset({"dec_source", "dec_step", "dec_head"}),
    cases=frozenset({"digests", "load"}),
)
