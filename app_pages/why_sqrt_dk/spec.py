"""The Why √d_k page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import DISPLAY, SENTENCE, PageSpec

# The fair √d_k experiment draws its own W_Q, W_K (unit variance): only the sentence, d_model, d_k
# (the row shown) and the seed come from the sidebar.
SPEC = PageSpec(
    "app_pages/why_sqrt_dk/why_sqrt_dk.py",
    "Why √d_k",
    ":material/functions:",
    SENTENCE | DISPLAY | {"d_model", "d_k", "positional", "seed"},
    slides=(
        ("idea", "Why?"),
        ("dice", "Random vectors"),
        ("sentence", "Your sentence"),
        ("row", "One row at your d_k"),
        ("init", "Why not the sidebar's weights"),
    ),
    slide_key="sq_slide",
    own=frozenset({"sq_keys", "sq_samples", "sq_query"}),
    cases=frozenset({"digests", "load", "smoke"}),
)
