"""Real model: the attention a trained transformer computes, every layer and head, then one head stage by stage."""

from __future__ import annotations

import dataclasses

import streamlit as st

from app_pages.real_model.effects import show_effects
from app_pages.real_model.head_reads import beside_weights, read_beside
from app_pages.real_model.loading import model_for, model_trace_for
from app_pages.real_model.long_text import long_text_section, show_long_text
from app_pages.real_model.mask_sweep import show_mask_sweep
from app_pages.real_model.spec import SPEC
from app_pages.real_model.views import (
    fixed_by_architecture,
    head_sharing_note,
    show_generation,
    show_roles,
    show_rollout,
    sink_note,
)
from attention_core import MAX_MODEL_TOKENS, resolve_device
from attention_core.models import WORD_START, available_models
from attention_core.reading import word_groups
from attention_core.statistics import STATISTICS
from figures.glossary import link
from figures.overview import head_labels, layer_labels, thumbnails_figure
from figures.reading import (
    SINK_WHY,
    SINK_WHY_SHORT,
    sink_summary,
    special_shares,
    statistic_grid_figure,
)
from figures.stages import stages_for
from ui.links import check_choice, keep_in_address, take_keyed_choice
from ui.live_chart import show_figure
from ui.memo import remember
from ui.screen import slide_columns, slide_pixels
from ui.show import SIDE_BY_SIDE_MAX, friendly_errors, show_stage, style_for
from ui.sidebar import current_settings
from ui.slides import Slides

CHOSEN_MODEL = "rm_model_chosen"  # session state: the model this page last showed (by key)
GRID_LABELS = 60  # pixels: how much shorter the entropy grid is on a slide than a map (see its slide)
ROLE_ROWS = 150  # pixels: on a slide the grids leave room for the role picker above them and the top heads below


@dataclasses.dataclass(frozen=True)
class Page:
    """What every part of the page reads: the settings, the model chosen and its trace, the row of choices a
    slide has at its top, and the two display switches."""

    settings: object
    style: object
    key: str  # the model's
    device: str
    model_trace: object
    row: tuple  # on a slide: the model, then two places beside it; read normally: (st, None, None)
    hide_first: bool = False
    words: bool = False


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        style = style_for(settings)
        if not settings.present:
            st.title("A real trained transformer")
            st.markdown(
                "Random weights show the mechanism; trained weights show what it learns. The sentence from the "
                "sidebar goes through a real model, and every layer's attention is captured from its own forward "
                "pass."
            )
        page = choose_model(settings, style)
        model_trace = page.model_trace
        spec = SPEC
        heads_stages = stages_for(model_trace.layers[0])  # every layer has the same stages
        head_reads = beside_weights(model_trace)  # the weights read more ways: slides after theirs
        titles = dict(spec.slides)
        for stage in heads_stages:
            titles[stage.key] = stage.label
            if stage.key == "weights":
                titles.update(head_reads)
        slides = Slides(spec.title, spec.slide_key, titles, settings.present)
        slides.steer()
        if model_trace.truncated:
            st.warning(
                f"The sentence has {model_trace.total_tokens} tokens for this model; only the first "
                f"{len(model_trace.tokens)} are shown (at most {MAX_MODEL_TOKENS}, so that 30 layers of maps stay "
                "fast)."
            )
        if slides.shows("tokens"):
            tokens_slide(page)
        page = switches(page, slides)
        if slides.shows("grid"):
            grid_slide(page)
        if slides.shows("thumbs"):
            thumbs_slide(page)
        if slides.shows("sinks"):
            sinks_slide(page)
        if slides.shows("rollout"):
            if not settings.present:
                st.header("Across layers: attention rollout")
                st.caption(
                    f"Abnar & Zuidema (2020), {link('attention rollout')}: each layer as ½·(its heads' mean "
                    "weights) + ½·I (the residual connection), multiplied through the layers."
                )
            show_rollout(model_trace, page.words, page.hide_first, style)
        if slides.shows("effect"):
            show_effects(page.key, page.device, model_trace, settings)
        if slides.shows("generate"):
            show_generation(page.key, page.device, settings.text, model_trace.info, model_trace, style)
        if slides.shows("masks"):
            show_mask_sweep(page.key, page.device, model_trace.info, settings)
        if slides.shows("long") and not settings.present:  # a part of the page its own knobs rerun alone
            long_text_section(page.key, page.device, model_trace.info, settings)
        elif slides.shows("long"):
            with friendly_errors():  # a model the long reading refuses (a window, a soft cap): said, the slide goes on
                show_long_text(page.key, page.device, model_trace.info, settings, page.row[1:])
        head_slides = {stage.key for stage in heads_stages} | set(head_reads)
        if not settings.present or slides.shown in head_slides:
            one_head(page, slides, head_reads)


def choose_model(settings, style) -> Page:
    """The model, by its key in the address (its title on screen), loaded once and kept; its trace."""
    sources = available_models()
    keys = tuple(sources)
    linked = take_keyed_choice("rm_model", "model", {key: source.title for key, source in sources.items()})
    # The model shown: a link's (on the session's first run), else the one this page showed last (a widget's own
    # state is forgotten on another page), else the first. It is the widget's index, never set into its state:
    # a widget drawn again at another place (a slide's row appears once the window's size is known) starts from
    # its index, and a state set from code would not reach it there (the next run read the first model back).
    chosen = linked or st.session_state.get(CHOSEN_MODEL)
    chosen = chosen if chosen in sources else keys[0]
    if linked is None and st.session_state.get("rm_model") in sources:
        chosen = st.session_state["rm_model"]  # the reader's own pick
    # On a slide one row holds the model, and on a stage's slide the layer and head (their choices name themselves).
    row = st.columns([2, 1, 1], vertical_alignment="bottom") if settings.present else (st, None, None)
    # Not bound to the address by Streamlit, which would write the title there: the key goes there instead.
    key = row[0].selectbox(
        "model",
        keys,
        index=keys.index(chosen),
        format_func=lambda k: sources[k].title,
        key="rm_model",
        label_visibility=shown(settings),
    )
    keep_in_address("rm_model", key, next(iter(sources)))
    st.session_state[CHOSEN_MODEL] = key  # a widget's own state is forgotten on another page; this is not
    device = str(resolve_device(settings.config.device))
    model_for(key, device, box=not settings.present)
    return Page(settings, style, key, device, model_trace_for(key, device, settings.text), tuple(row))


def shown(settings) -> str:
    """A choice's label: on a slide its choices name themselves."""
    return "collapsed" if settings.present else "visible"


def tokens_slide(page: Page) -> None:
    """The tokens exactly as the model's tokenizer makes them, and what its architecture fixes."""
    model_trace, style = page.model_trace, page.style
    # On a slide the tokens and the architecture side by side, so that both fit one screen.
    tokens_place, fixed_place = st.columns(2) if page.settings.present else (st.container(), st.container())
    with tokens_place:
        st.markdown(f"**{len(model_trace.tokens)} tokens, exactly as the model's tokenizer makes them**")
        st.code(
            "  ".join(f"{style.index(i)}:{t}" for i, t in enumerate(model_trace.tokens)), language=None, wrap_lines=True
        )
        st.caption(
            f"{WORD_START} marks a token that starts a new word (the tokenizer's leading space); special tokens "
            "([CLS], [SEP]) are shown; '##ing' continues the word before it; ↵ is a newline, ␣ a space, "
            "⟨f0 9f⟩ the bytes of part of a character."
        )
    with fixed_place:
        fixed_by_architecture(model_trace.info)


def switches(page: Page, slides: Slides) -> Page:
    """The display switches: on a slide of the whole model, in the row beside the model; read normally, under it."""
    presentation = page.settings.present
    places = page.row[1:] if presentation else st.columns(2)
    if not presentation or slides.shown in ("grid", "thumbs", "sinks", "rollout"):
        hide_first = places[0].toggle(
            "hide the first token",
            key="rm_hide_first",
            bind="query-params",
            help="Grey its column out and re-normalize the other weights, for display "
            "only (the role scores leave it out too); captured numbers and exports "
            "keep it",
        )
        words = places[1].toggle(
            "words, not pieces",
            key="rm_words",
            bind="query-params",
            help="Merge a word's pieces in the thumbnails, the rollout and (read normally) "
            "the head's weights: its row is the mean of theirs, its column the sum, so rows "
            "still sum to 1",
        )
    else:
        hide_first, words = st.session_state.get("rm_hide_first", False), st.session_state.get("rm_words", False)
    return dataclasses.replace(page, hide_first=hide_first, words=words)


def grid_slide(page: Page) -> None:
    """Every layer and head: how peaked, and what each does."""
    settings, style = page.settings, page.style
    if not settings.present:  # on a slide the bar names it
        st.header("Every layer and head: how peaked, and what each does")
    # On a slide the grids are a little shorter than a map: their slanted head labels take the room of a title.
    shorter = slide_pixels(GRID_LABELS + ROLE_ROWS) if settings.present else 0
    grid = dataclasses.replace(style, max_map_pixels=style.max_map_pixels - shorter, side_by_side=True)
    show_roles(page.key, page.device, page.model_trace, page.hide_first, grid, settings.present)


def thumbs_slide(page: Page) -> None:
    """Every head's map, small."""
    model_trace, style, hide_first = page.model_trace, page.style, page.hide_first
    groups = word_groups(list(model_trace.words)) if page.words and model_trace.words else None
    show_figure(
        remember(
            model_trace,
            ("thumbs", style, hide_first, bool(groups)),
            lambda: thumbnails_figure(model_trace, style, hide_first=hide_first, groups=groups),
        ),
        "rm-thumbs",
    )


def sinks_slide(page: Page) -> None:
    """Attention sinks: where the heads park their weight, and why."""
    settings, style, model_trace = page.settings, page.style, page.model_trace
    if not settings.present:
        st.header("Attention sinks")
    words_place, grid_place = slide_columns() if settings.present else (st.container(), st.container())
    with words_place:
        summary = sink_summary(model_trace)
        st.markdown(summary or "One token: there is no other token to park attention on.")
        st.markdown(SINK_WHY_SHORT if settings.present else SINK_WHY)
        if any(model_trace.special):
            st.markdown("**Weight on each special token, by layer** (every head, every row)")
            st.dataframe(
                special_shares(model_trace), hide_index=True, height=min(300, 36 + 35 * model_trace.info.n_layers)
            )
    with grid_place:  # the sink mass of every head: the role grid of the first token
        beside = style
        if settings.present:  # the slide's right-hand column, as short as the other grids on a slide
            beside = style_for(settings, side_by_side=True, slide=True)
            beside = dataclasses.replace(beside, max_map_pixels=beside.max_map_pixels - slide_pixels(GRID_LABELS))
        figure = statistic_grid_figure(
            model_trace.grid("first").numpy(),
            STATISTICS["first"],
            layer_labels(model_trace),
            head_labels(model_trace),
            "rows 2 onward, on this sentence",
            beside,
        )
        show_figure(figure, "rm-sinks")


def one_head(page: Page, slides: Slides, head_reads: dict[str, str]) -> None:
    """One head, stage by stage: the layer and head chosen, then each stage (a slide each in presentation)."""
    settings, model_trace = page.settings, page.model_trace
    info = model_trace.info
    if not settings.present:
        st.header("One head, stage by stage")
    left, right = page.row[1:] if settings.present else st.columns(2)  # the layer and head a stage shows
    check_choice("rm_layer", "layer", [f"layer {i + 1}" for i in range(info.n_layers)])
    check_choice("rm_head", "head", head_labels(model_trace))
    layer = left.selectbox(
        "layer",
        range(info.n_layers),
        format_func=lambda i: f"layer {i + 1}",
        key="rm_layer",
        bind="query-params",
        label_visibility=shown(settings),
    )
    labels = head_labels(model_trace)
    head = right.selectbox(
        "head",
        range(info.heads),
        format_func=lambda i: labels[i],
        key="rm_head",
        bind="query-params",
        label_visibility=shown(settings),
    )
    layer, head = min(layer or 0, info.n_layers - 1), min(head or 0, info.heads - 1)
    layer_trace = model_trace.layers[layer]
    if not settings.present:
        st.markdown(f"{layer_trace.label} · {head_sharing_note(model_trace, head)}")
    elif slides.shown == "qkv" and len(model_trace.heads_sharing(model_trace.kv_head_of[head])) > 1:
        # a slide: one line, on the slide of K and V, where the sharing shows
        sharing = ", ".join(str(h + 1) for h in model_trace.heads_sharing(model_trace.kv_head_of[head]))
        st.markdown(
            f"Heads {sharing} share key/value head {model_trace.kv_head_of[head] + 1} "
            "([grouped-query attention](glossary#gqa)): the same K and V."
        )
    beside = style_for(settings, side_by_side=layer_trace.n_tokens <= SIDE_BY_SIDE_MAX)
    special = model_trace.special[0]
    for stage in stages_for(layer_trace):
        if slides.shows(stage.key, marked=True):
            if settings.present:  # words left, figures right, as on the Walkthrough's slides
                slide = style_for(settings, side_by_side=True, slide=True)
                show_stage(
                    layer_trace, stage.key, head, slide, prefix="rm-", query_key="rm_query", places=slide_columns()
                )
            else:
                show_stage(layer_trace, stage.key, head, beside, prefix="rm-", query_key="rm_query", marks=True)
            note = sink_note(layer_trace, head, special) if stage.key == "weights" else ""
            if note:
                st.info(note, icon="⚓")
        if stage.key == "weights":  # the weights read more ways: each its own slide, read normally below them
            read_beside(model_trace, head_reads, layer, head, page.hide_first, page.words, slides, settings)
        if not settings.present:
            st.divider()


main()
