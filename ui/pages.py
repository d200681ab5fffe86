"""The app's pages, in one place: where each lives, its title and icon, and which sidebar controls it reads.

app.py builds st.navigation from PAGES; the sidebar greys out the controls a page does not read
(the Real model's architecture fixes d_k and heads); presentation mode links every page.
Each page's address is its file name (/why_sqrt_dk): Streamlit's older multipage mode, which a
fresh server starts in (see ui.controls.run_through_app_py), names pages the same way, so a
shared link finds its page.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

# The sidebar's controls (ui.controls.CONTROLS) by what they set.
SENTENCE = frozenset({"text", "example"})
SIZES = frozenset({"d_model", "d_k", "d_v", "heads", "variant", "kv_heads", "d_c", "d_cq", "d_rope"})
SETTINGS = frozenset({"causal", "scaled", "positional", "seed", "init"})
TYPED = frozenset({"x", "w_q", "w_k", "w_v", "w_o"})
DISPLAY = frozenset({"numbers", "count_from_1", "device", "present"})
EVERYTHING = SENTENCE | SIZES | SETTINGS | TYPED | DISPLAY
MODEL_TRACE = "model_trace"  # the session's last real-model trace (ui.real)


@dataclasses.dataclass(frozen=True)
class PageSpec:
    path: str
    title: str
    icon: str
    reads: frozenset[str]  # the sidebar controls this page uses; the others are shown as inactive
    default: bool = False
    keeps: tuple[str, ...] = ()  # what a session keeps (session-state keys) only while it shows this page

    def page(self) -> st.Page:
        return st.Page(self.path, title=self.title, icon=self.icon, default=self.default)


PAGES = (
    PageSpec("pages/walkthrough.py", "Walkthrough", ":material/arrow_forward:", EVERYTHING, default=True),
    PageSpec("pages/multihead.py", "Multi-head", ":material/view_module:", EVERYTHING),
    # The fair √d_k experiment draws its own W_Q, W_K (unit variance): only the sentence, d_model, d_k
    # (the row shown) and the seed come from the sidebar.
    PageSpec(
        "pages/why_sqrt_dk.py",
        "Why √d_k",
        ":material/functions:",
        SENTENCE | DISPLAY | {"d_model", "d_k", "positional", "seed"},
    ),
    PageSpec("pages/compare.py", "Compare", ":material/compare:", EVERYTHING),
    # Training reads the layer's sizes, scaling and seed from the sidebar, and its own causal and steps.
    PageSpec(
        "pages/training.py",
        "Training",
        ":material/school:",
        SENTENCE | DISPLAY | {"d_model", "d_k", "heads", "scaled", "seed", "train_causal", "train_steps"},
    ),
    # A model trace is up to ~70 MB (SmolLM2 at the token cap): a class that has moved on does not keep 30 of them.
    PageSpec("pages/real_model.py", "Real model", ":material/psychology:", SENTENCE | DISPLAY, keeps=(MODEL_TRACE,)),
    PageSpec("pages/glossary.py", "Glossary", ":material/menu_book:", DISPLAY),
)
BY_TITLE = {spec.title: spec for spec in PAGES}


def forget_other_pages(shown: str) -> None:
    """Give back what the pages other than the one shown keep only while they are shown (PageSpec.keeps)."""
    for spec in PAGES:
        if spec.title != shown:
            for key in spec.keeps:
                st.session_state.pop(key, None)
