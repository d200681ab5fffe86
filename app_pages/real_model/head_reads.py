"""One head's weights read other ways, each beside the weights (a slide each in presentation mode): without the
first token, by words, by the norms of what each key adds, and as if the model were causal."""

from __future__ import annotations

import streamlit as st

from app_pages.real_model.views import sink_note
from attention_core import causal_mask, rerun_head
from attention_core.reading import merge_words, merged_tokens, weighted_norms, word_groups
from figures.reading import (
    norms_figure,
    without_first_figure,
    words_figure,
)
from figures.stages import stage_view
from ui.live_chart import show_figure
from ui.memo import remember
from ui.screen import slide_columns
from ui.show import SIDE_BY_SIDE_MAX, style_for


def _head_weights(layer_trace, head: int, style):
    """The head's weights map as its stage view draws it, kept with the trace (a slide redraws it per press)."""
    return remember(
        layer_trace, ("head weights", head, style), lambda: stage_view(layer_trace, "weights", head, style).figures[0]
    )


def _what_if_causal(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head re-run with a causal mask (an encoder's): beside its weights read normally; on its slide, the
    head's weights until the switch is on, then the what-if in their place."""
    layer_trace = model_trace.layers[layer]
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("What if this head were causal?")
        on = st.toggle("what if causal", value=False, key="rm_whatif", bind="query-params")
        if on:
            st.info(
                "A one-head what-if: this head's captured q, k and scale with a causal mask added. The model was "
                "trained without a mask and its other heads and layers are unchanged, so this is not what a causal "
                "model would do."
            )
        else:
            st.caption("Switch on to hide each token's future from this one head and see how its weights change.")
    if not on:
        if presentation:
            with pictures:
                show_figure(_head_weights(layer_trace, head, style), "rm-whatif")
        return
    what_if = rerun_head(
        layer_trace, head, causal_mask(layer_trace.n_tokens), label=f"what if causal · head {head + 1}"
    )
    changed = stage_view(what_if, "weights", 0, style).figures[0]
    with pictures:
        if presentation:
            show_figure(changed, "rm-whatif")
            return
        left, right = st.columns(2)
        with left:
            show_figure(_head_weights(layer_trace, head, style), "rm-actual")
        with right:
            show_figure(changed, "rm-whatif")


def _without_first(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head's weights with the first token hidden and each row re-normalized, for display only."""
    trace = model_trace.layers[layer]
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("Without the first token")
        note = sink_note(trace, head, model_trace.special[0])
        st.markdown(
            f"{note + ' ' if note and presentation else ''}The first token's column is greyed and each row "
            "re-normalized over the other keys: what this head does with the attention it does not park there. "
            "For display only: the head's captured weights, their numbers and exports keep the first token."
        )
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()
    with pictures:
        figure = without_first_figure(
            trace.weights[head].cpu().numpy(), trace.tokens, allowed, f"layer {layer + 1} · head {head + 1}", style
        )
        show_figure(figure, "rm-without-first")


def _by_words(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head's weights by words (reading.merge_words), where a word was split into pieces."""
    words, pictures = places
    groups = word_groups(list(model_trace.words))
    split = len(groups) < len(model_trace.tokens)
    with words:
        if presentation:
            st.header("By words, not pieces")
        if not split:
            st.caption("Words, not pieces: no word of this sentence is split, so the head's map is already by words.")
        elif presentation:
            st.markdown(
                "A word's row is the mean of its pieces' rows, its column the sum of their columns, so each "
                "row still sums to 1. Hover a word to see its pieces."
            )
    if not split:
        if presentation:  # the slide shows the head's map, which is already by words
            with pictures:
                show_figure(_head_weights(model_trace.layers[layer], head, style), "rm-words")
        return
    trace = model_trace.layers[layer]
    merged = merge_words(trace.weights[head : head + 1].cpu(), groups)[0].numpy()
    pieces = [" + ".join(model_trace.tokens[i] for i in group) for group in groups]
    with pictures:
        show_figure(
            words_figure(
                merged, merged_tokens(model_trace.tokens, groups), pieces, f"layer {layer + 1} · head {head + 1}", style
            ),
            "rm-words",
        )


def _norm_based(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """Norm-based attention (Kobayashi et al. 2020) for the head shown: ‖α_ij·v_j·W_O^h‖ beside α_ij."""
    trace = model_trace.layers[layer]
    norms = weighted_norms(trace.weights[head : head + 1], model_trace.value_norms[layer][head : head + 1])[0]
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("What each weight moves")
    with pictures:
        show_figure(
            norms_figure(norms.numpy(), trace.tokens, allowed, f"layer {layer + 1} · head {head + 1}", style),
            "rm-norms",
        )
    with words:
        st.caption(
            "Kobayashi et al. (2020): the head's output for token i is Σ_j α_ij · v_j·W_O, a sum of vectors, "
            "one per key. A large weight on a token whose vector v_j·W_O is short moves little: this map is "
            "the length of each term, to read beside the weights. Summed over j the terms give the "
            "head's output (checked against the model's own W_O)."
        )


def beside_weights(model_trace) -> dict[str, str]:
    """The head's weights read four more ways, each a slide after the weights' own (key: title): without the first
    token, what each weight moves (where the model's W_O is known), by words, and, for an encoder, what if causal.
    Read normally each is drawn under the weights where its switch is on."""
    beside = {"without_first": "Without the first token"}
    if model_trace.value_norms:
        beside["norms"] = "What each weight moves"
    if model_trace.words:
        beside["words"] = "By words, not pieces"
    if not model_trace.info.causal:
        beside["whatif"] = "What if causal"
    return beside


def read_beside(
    model_trace, reads: dict[str, str], layer: int, head: int, hide_first: bool, words: bool, slides, settings
) -> None:
    """The parts of beside_weights: on a slide each fills its own (words left, figure right); read normally, the
    ones whose switch is on (hiding the first token, words), what each weight moves, and for an encoder, what if
    causal, one under the other."""
    presentation = settings.present
    trace = model_trace.layers[layer]
    if presentation:
        style = style_for(settings, side_by_side=True, slide=True)
    else:
        style = style_for(settings, side_by_side=trace.n_tokens <= SIDE_BY_SIDE_MAX)
    parts = {
        "without_first": (_without_first, hide_first),
        "norms": (_norm_based, True),
        "words": (_by_words, words),
        "whatif": (_what_if_causal, True),
    }  # (draw, read normally when)
    for key in reads:
        draw, wanted = parts[key]
        if slides.shows(key) and (presentation or wanted):
            places = slide_columns() if presentation else (st.container(), st.container())
            draw(model_trace, layer, head, style, places, presentation)
