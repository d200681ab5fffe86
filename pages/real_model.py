"""Real model: the attention a trained transformer computes, every layer and head, then one head stage by stage."""

import dataclasses

import streamlit as st

from attention_core import MAX_MODEL_TOKENS, causal_mask, rerun_head, resolve_device
from attention_core.models import WORD_START, available_models
from attention_core.models.generation import MAX_NEW_TOKENS
from figures.decoding import generated_row_figure, step_entropy_figure
from figures.overview import entropy_grid_figure, head_labels, thumbnails_figure
from figures.stages import stage_view, stages_for
from figures.style import markdown_literal
from ui.controls import check_choice, check_whole, current_settings
from ui.memo import remember
from ui.pages import BY_TITLE
from ui.real import GENERATION, generate, model_for, model_trace_for
from ui.show import SIDE_BY_SIDE_MAX, friendly_errors, show_figure, show_stage, slide_columns, style_for
from ui.slides import Slides

GRID_LABELS = 60  # pixels: how much shorter the entropy grid is on a slide than a map (see its slide)
SINK_SHARE = 0.5  # a head that puts at least this share of rows 2..n on token 1 gets the attention-sink note


def _fixed_by_architecture(info) -> None:
    st.markdown(
        "**What the architecture fixes** (the trained weights have these shapes; the sidebar's sizes, mask, "
        "scaling, seed and init do not apply here and are greyed out)"
    )
    st.dataframe(
        [
            {"": "kind", "value": info.kind},
            {"": "layers", "value": str(info.n_layers)},
            {"": "query heads per layer", "value": str(info.n_heads)},
            {"": "key/value heads per layer", "value": str(info.n_kv_heads)},
            {"": "d_k (per head)", "value": str(info.d_k)},
            {"": "d_model", "value": str(info.d_model)},
            {"": "scale", "value": f"1/√{info.d_k}"},
            {"": "positions", "value": info.positions},
            {"": "tokens shown at most", "value": f"{info.token_cap} (model maximum {info.max_positions})"},
        ],
        hide_index=True,
    )


def _head_sharing_note(model_trace, head: int) -> str:
    kv = model_trace.kv_head_of[head]
    sharing = model_trace.heads_sharing(kv)
    if len(sharing) == 1:
        return f"Head {head + 1} has its own keys and values."
    others = ", ".join(str(h + 1) for h in sharing)
    return (
        f"[Grouped-query attention](glossary#gqa): query heads {others} all read key/value head {kv + 1}, so their "
        "K and V below are the same matrices; only Q differs."
    )


def sink_note(layer_trace, head: int, special: bool) -> str:
    """The attention-sink note for a head that parks most of its attention on the first token ("" if it does not)."""
    share = layer_trace.first_key_share(head)
    if share is None or share < SINK_SHARE or layer_trace.n_tokens < 3:
        return ""
    first = markdown_literal(layer_trace.tokens[0])
    why = (
        f"“{first}” is a special token, a usual parking place."
        if special
        else f"This model starts with no special token, so the first word, “{first}”, takes that role."
    )
    return (
        f"This head puts **{share:.0%}** of its attention on the first token, on average over rows 2–"
        f"{layer_trace.n_tokens}: an [attention sink](glossary#attention-sink), where a head parks attention that has "
        f"nowhere better to go. {why} A large weight on it says little about meaning."
    )


def _what_if_causal(layer_trace, head: int, style) -> None:
    st.subheader("What if this head were causal?")
    on = st.toggle("what if causal", value=False, key="rm_whatif", bind="query-params")
    if not on:
        st.caption("Switch on to hide each token's future from this one head and see how its weights change.")
        return
    st.info(
        "A one-head what-if: this head's captured q, k and scale with a causal mask added. The model was trained "
        "without a mask and its other heads and layers are unchanged, so this is not what a causal model would do."
    )
    what_if = rerun_head(
        layer_trace, head, causal_mask(layer_trace.n_tokens), label=f"what if causal · head {head + 1}"
    )
    left, right = st.columns(2)
    with left:
        show_figure(stage_view(layer_trace, "weights", head, style).figures[0], "rm-actual")
    with right:
        show_figure(stage_view(what_if, "weights", 0, style).figures[0], "rm-whatif")


def _ask_to_generate() -> None:
    st.session_state["rm_go"] = True


def _generation(key: str, device: str, text: str, info, model_trace, style) -> None:
    """A causal model writes after the sidebar's sentence, greedily, with its own KV cache; a scrubber over
    the prompt and every token written shows each one's attention row, the heads' peakiness, the next-token
    probabilities and the cache's size at that point."""
    st.header("Writing, one token at a time")
    if not info.causal:
        st.info(f"{info.title} is an encoder: it reads a sentence whole and writes no next token. Choose a causal "
                "decoder (SmolLM2) to watch one write.")  # fmt: skip
        return
    check_whole("rm_new", "new tokens", 1, MAX_NEW_TOKENS)
    count_place, go, stop = st.columns([2, 1, 1], vertical_alignment="bottom")
    count = count_place.number_input("new tokens", 1, MAX_NEW_TOKENS, value=8, key="rm_new", bind="query-params")
    kept = st.session_state.get(GENERATION, {}).get((key, device, text, count))
    go.button("▶ Generate", key="rm_generate", type="primary", width="stretch", on_click=_ask_to_generate)
    if st.session_state.pop("rm_go", False):
        stop.button("■ Stop", key="rm_stop", width="stretch")  # a click reruns the page: the loop ends, the tokens stay
        kept = generate(key, device, text, count)
    if kept is None:
        st.caption(f"Greedy: each new token is the most probable one, written after the sidebar's sentence with "
                   f"the model's own KV cache (transformers' DynamicCache), every layer's attention captured at "
                   f"each step. Up to {MAX_NEW_TOKENS} new tokens.")  # fmt: skip
        return
    written = kept.written
    ending = ("it wrote its end-of-text token" if kept.ended else f"all {count} asked for" if kept.done
              else f"stopped after {written} of {count}")  # fmt: skip
    text_written = "".join(p.token for p in kept.positions[kept.prompt :]).replace(WORD_START, " ")
    st.markdown(f"**Written** ({written} token{'s' if written != 1 else ''}, {ending}): "
                f"{markdown_literal(text_written)}")  # fmt: skip
    tokens = [p.token for p in kept.positions]
    at = st.select_slider("position", options=range(len(tokens)), value=len(tokens) - 1, key="rm_gstep",
                          format_func=lambda i: f"{style.index(i)}: {tokens[i]}" + (" (new)" if i >= kept.prompt
                                                                                      else ""))  # fmt: skip
    position = kept.positions[at]
    left, right = st.columns(2)
    layer = left.selectbox("layer ", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_glayer")
    labels = head_labels(model_trace)
    head = right.selectbox("head ", range(info.n_heads), format_func=lambda i: labels[i], key="rm_ghead")
    made = "written at this step, from the cache" if position.generated else "in the prompt, read in one pass"
    bytes_now = kept.cache_bytes_per_position * position.cached
    st.markdown(
        f"“{markdown_literal(position.token)}” ({made}). The cache now holds {position.cached} positions: "
        f"{info.n_layers} layers × {info.n_kv_heads} key/value heads × {position.cached} positions × "
        f"{info.d_k} × 2 (K and V) × 4 bytes = **{bytes_now:,} bytes**."
    )
    show_figure(generated_row_figure(tokens[: at + 1], position.rows[layer, head].numpy(),
                                     f"layer {layer + 1} · {labels[head]}", style), "rm-gen-row")  # fmt: skip
    grid, top = st.columns([3, 2])
    with grid:
        if position.rows.shape[-1] > 1:
            show_figure(step_entropy_figure(position.rows.numpy(), labels, style.beside(2)), "rm-gen-grid")
        else:
            st.caption("The first token has one key, itself: every head's weight on it is 1.")
    with top:
        st.markdown("**Next token, most probable first**")
        st.dataframe([{"token": token, "probability": round(p, 4)} for token, p in position.top], hide_index=True)


with friendly_errors():
    settings = current_settings()
    style = style_for(settings)
    if not settings.presentation:
        st.title("A real trained transformer")
        st.markdown(
            "Random weights show the mechanism; trained weights show what it learns. The sentence from the sidebar "
            "goes through a real model, and every layer's attention is captured from its own forward pass."
        )
    sources = available_models()
    check_choice("rm_model", "model", [source.title for source in sources.values()])
    # On a slide one row holds the model, and on a stage's slide the layer and head (their choices name themselves).
    row = st.columns([2, 1, 1], vertical_alignment="bottom") if settings.presentation else (st, None, None)
    shown = "collapsed" if settings.presentation else "visible"
    key = row[0].selectbox("model", tuple(sources), format_func=lambda k: sources[k].title, key="rm_model",
                           bind="query-params", label_visibility=shown)  # fmt: skip
    device = str(resolve_device(settings.config.device))
    model_for(key, device, box=not settings.presentation)
    model_trace = model_trace_for(key, device, settings.text)
    info = model_trace.info

    spec = BY_TITLE["Real model"]
    heads_stages = stages_for(model_trace.layers[0])  # every layer has the same stages
    slides = Slides(spec.title, spec.slide_key,
                    {**dict(spec.slides), **{stage.key: stage.label for stage in heads_stages}},
                    settings.presentation)  # fmt: skip
    slides.steer()
    if model_trace.truncated:
        st.warning(
            f"The sentence has {model_trace.total_tokens} tokens for this model; only the first "
            f"{len(model_trace.tokens)} are shown (at most {MAX_MODEL_TOKENS}, so that 30 layers of maps stay fast)."
        )
    if slides.shows("tokens"):
        # On a slide the tokens and the architecture side by side, so that both fit one screen.
        tokens_place, fixed_place = st.columns(2) if settings.presentation else (st.container(), st.container())
        with tokens_place:
            st.markdown(f"**{len(model_trace.tokens)} tokens, exactly as the model's tokenizer makes them**")
            st.code("  ".join(f"{style.index(i)}:{t}" for i, t in enumerate(model_trace.tokens)), language=None,
                    wrap_lines=True)  # fmt: skip
            st.caption(
                f"{WORD_START} marks a token that starts a new word (the tokenizer's leading space); special tokens "
                "([CLS], [SEP]) are shown; '##ing' continues the word before it; ↵ is a newline, ␣ a space, "
                "⟨f0 9f⟩ the bytes of part of a character."
            )
        with fixed_place:
            _fixed_by_architecture(info)

    if slides.shows("grid"):
        if not settings.presentation:  # on a slide the bar names it
            st.header("Every layer and head")
        # Built once per trace and style, shared by every session reading the same sentence (ui.memo). On a slide
        # the grid is a little shorter than a map: its slanted head labels take the room of a title above it.
        grid = dataclasses.replace(style, max_map_pixels=style.max_map_pixels - GRID_LABELS) if settings.presentation \
            else style  # fmt: skip
        show_figure(remember(model_trace, ("entropy", grid), lambda: entropy_grid_figure(model_trace, grid)),
                    "rm-entropy")  # fmt: skip
    if slides.shows("thumbs"):
        show_figure(
            remember(model_trace, ("thumbs", style), lambda: thumbnails_figure(model_trace, style)), "rm-thumbs"
        )

    if slides.shows("generate"):
        _generation(key, device, settings.text, info, model_trace, style)

    if not settings.presentation or slides.shown in {stage.key for stage in heads_stages}:
        if not settings.presentation:
            st.header("One head, stage by stage")
        left, right = row[1:] if settings.presentation else st.columns(2)  # the layer and head a stage shows
        check_choice("rm_layer", "layer", [f"layer {i + 1}" for i in range(info.n_layers)])
        check_choice("rm_head", "head", head_labels(model_trace))
        layer = left.selectbox("layer", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_layer",
                               bind="query-params", label_visibility=shown)  # fmt: skip
        labels = head_labels(model_trace)
        head = right.selectbox("head", range(info.n_heads), format_func=lambda i: labels[i], key="rm_head",
                               bind="query-params", label_visibility=shown)  # fmt: skip
        layer, head = min(layer or 0, info.n_layers - 1), min(head or 0, info.n_heads - 1)
        layer_trace = model_trace.layers[layer]
        if not settings.presentation:
            st.markdown(f"{layer_trace.label} · {_head_sharing_note(model_trace, head)}")
        elif slides.shown == "qkv" and len(model_trace.heads_sharing(model_trace.kv_head_of[head])) > 1:
            # a slide: one line, on the slide of K and V, where the sharing shows
            sharing = ", ".join(str(h + 1) for h in model_trace.heads_sharing(model_trace.kv_head_of[head]))
            st.markdown(f"Heads {sharing} share key/value head {model_trace.kv_head_of[head] + 1} "
                        "([grouped-query attention](glossary#gqa)): the same K and V.")  # fmt: skip
        beside = style_for(settings, side_by_side=layer_trace.n_tokens <= SIDE_BY_SIDE_MAX)
        special = model_trace.special[0]
        for stage in stages_for(layer_trace):
            if not slides.shows(stage.key):
                continue
            if settings.presentation:  # words left, figures right, as on the Walkthrough's slides
                slide = style_for(settings, side_by_side=True, slide=True)
                show_stage(layer_trace, stage.key, head, slide, prefix="rm-", query_key="rm_query",
                           places=slide_columns())  # fmt: skip
            else:
                show_stage(layer_trace, stage.key, head, beside, prefix="rm-", query_key="rm_query")
            if stage.key == "weights":
                note = sink_note(layer_trace, head, special)
                if note:
                    st.info(note, icon="⚓")
                if not info.causal and not settings.presentation:  # read normally: a slide has no room for it
                    _what_if_causal(layer_trace, head, style)
            if not settings.presentation:
                st.divider()
