"""The app's pages, in one place: where each lives, its title and icon, and which sidebar controls it reads.

app.py builds st.navigation from PAGES; the sidebar greys out the controls a page does not read
(the Real model's architecture fixes d_k and heads); presentation mode links every page.
Each page's address is its file name (/why_sqrt_dk): Streamlit's older multipage mode, which a
fresh server starts in (see ui.sidebar.run_through_app_py), names pages the same way, so a
shared link finds its page.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from attention_core.registry import put
from figures.glossary import TERMS
from figures.glossary import anchor as term_anchor
from figures.stages import STAGES, stage_choices

# The sidebar's controls (ui.controls.CONTROLS) by what they set.
SENTENCE = frozenset({"text", "example"})
SIZES = frozenset({"d_model", "d_k", "d_v", "heads", "variant", "kv_heads", "d_c", "d_cq", "d_rope"})
SETTINGS = frozenset({"causal", "window", "sinks", "top_k", "scaled", "positional", "seed", "init"})
TYPED = frozenset({"x", "w_q", "w_k", "w_v", "w_o"})
DISPLAY = frozenset({"numbers", "count_from_1", "palette", "device", "present"})
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
    # Presentation mode (ui/slides.py): the page's slides, (key, title) in order, and where the address keeps the
    # one shown. The Walkthrough's and Multi-head's slides include the registry's stages (figures/stages/).
    slides: tuple[tuple[str, str], ...] = ()
    slide_key: str = ""
    own: frozenset[str] = frozenset()  # the page's own choices in its address (a stage, a head, a layer, ...)
    # Linked from the presentation bar: the pages a lecture shows. The bar holds them in one row at 1400 pixels;
    # one more wraps it and every slide scrolls (tests/test_browser.py's deck walk).
    presented: bool = True

    @property
    def address(self) -> str:
        """Where the page is: "/" for the first, else its file name ("/why_sqrt_dk")."""
        return "/" if self.default else "/" + self.path.removeprefix("pages/").removesuffix(".py")

    @property
    def shows_stages(self) -> bool:
        """Whether the page's slides include the registry's stages (the Walkthrough's, Multi-head's, Real model's)."""
        return self.slide_key in STAGE_SLIDES

    @property
    def slide_keys(self) -> frozenset[str]:
        stages = {stage.key for stage in STAGES} if self.shows_stages else set()
        return frozenset(key for key, _ in self.slides) | stages

    @property
    def link_keys(self) -> frozenset[str]:
        """The page's own choices in its address: its `own`, and the stages' where it shows them."""
        return self.own | (stage_choices() if self.shows_stages else frozenset())

    def page(self) -> st.Page:
        return st.Page(self.path, title=self.title, icon=self.icon, default=self.default)


STAGE_SLIDES = frozenset({"stage", "mh_slide", "rm_slide"})  # the pages whose slides include the registry's stages

PAGES: list[PageSpec] = [
    PageSpec(
        "pages/walkthrough.py",
        "Walkthrough",
        ":material/arrow_forward:",
        EVERYTHING,
        default=True,
        slide_key="stage",
        own=frozenset({"head"}),
    ),
    PageSpec(
        "pages/multihead.py",
        "Multi-head",
        ":material/view_module:",
        EVERYTHING,
        slides=(("heads", "Every head"), ("peaked", "How peaked each head is")),
        slide_key="mh_slide",
        own=frozenset({"mh_stage", "mh_shared"}),
    ),
    # Decoding is causal whatever the sidebar's mask says: each step's query sees the tokens so far (under a
    # sliding window, the last w and the sinks: its cache stops growing). Top-k chooses among the keys by the
    # scores of the whole pass; a step here reads every key its cache holds.
    PageSpec(
        "pages/decoding.py",
        "Decoding",
        ":material/keyboard_double_arrow_right:",
        EVERYTHING - {"causal", "top_k"},
        slides=(("step", "One step"), ("cost", "What a step costs")),
        slide_key="dec_slide",
        own=frozenset({"dec_source", "dec_step", "dec_head"}),
    ),
    # The fair √d_k experiment draws its own W_Q, W_K (unit variance): only the sentence, d_model, d_k
    # (the row shown) and the seed come from the sidebar.
    PageSpec(
        "pages/why_sqrt_dk.py",
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
    ),
    PageSpec(
        "pages/compare.py",
        "Compare",
        ":material/compare:",
        EVERYTHING,
        slides=(("compare", "Two settings side by side"),),
        slide_key="cmp_slide",
        own=frozenset(
            {"cmp_what", "cmp_stage", "cmp_dk_left", "cmp_dk_right", "cmp_variant_left", "cmp_variant_right"}
        ),
    ),
    # Training reads the layer's sizes, scaling and seed from the sidebar, and its own causal and steps.
    PageSpec(
        "pages/training.py",
        "Training",
        ":material/school:",
        SENTENCE | DISPLAY | {"d_model", "d_k", "heads", "scaled", "seed", "train_causal", "train_steps"},
        slides=(
            ("train", "Train and watch"),
            ("predict", "Predict, loss, update"),
            ("layer", "On a sentence"),
            ("projections", "W_Q, W_K, W_V"),
            ("sqrt", "√d_k in training"),
        ),
        slide_key="t_slide",
        own=frozenset({"t_step", "t_run", "t_query", "t_lecture"}),
    ),
    # A model trace is up to ~70 MB (SmolLM2 at the token cap): a class that has moved on does not keep 30 of them.
    PageSpec(
        "pages/real_model.py",
        "Real model",
        ":material/psychology:",
        SENTENCE | DISPLAY,
        keeps=(MODEL_TRACE,),
        slides=(
            ("tokens", "Its tokens and shapes"),
            ("grid", "What every head does"),
            ("thumbs", "Every layer and head"),
            ("sinks", "Attention sinks"),
            ("rollout", "Across layers: rollout"),
            ("generate", "Writing, token by token"),
            ("masks", "Masks after MLA, measured"),
        ),
        slide_key="rm_slide",
        own=frozenset(
            {
                "rm_model",
                "rm_layer",
                "rm_head",
                "rm_query",
                "rm_whatif",
                "kv_bytes",
                "kv_context",
                "rm_new",
                "rm_role",
                "rm_hide_first",
                "rm_words",
                "rm_upto",
                "rm_sweep_mask",
                "rm_sweep_budget",
            }
        ),
    ),
    PageSpec(
        "pages/glossary.py",
        "Glossary",
        ":material/menu_book:",
        DISPLAY,
        slides=tuple((term_anchor(term), term) for term in TERMS),
        slide_key="g_slide",
    ),
    PageSpec("pages/decks.py", "Decks", ":material/slideshow:", DISPLAY, own=frozenset({"deck"})),
    # Check your attention: the sidebar's settings make the inputs a student's implementation runs on.
    PageSpec("pages/check.py", "Check", ":material/fact_check:", EVERYTHING, own=frozenset({"chk_step"})),
    # The class in the room: a join link (?join=CODE) and the lecturer's private one (?lead=CODE&key=...).
    PageSpec(
        "pages/class.py", "Class", ":material/groups:", DISPLAY, own=frozenset({"join", "lead", "key"}), presented=False
    ),  # fmt: skip
]
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
