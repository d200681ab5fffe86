"""Real model: the attention a trained transformer computes, every layer and head, then one head stage by stage."""

import streamlit as st

from attention_core import causal_mask, rerun_head, resolve_device
from attention_core.models import MAX_MODEL_TOKENS, available_models
from figures.overview import entropy_grid_figure, head_labels, thumbnails_figure
from figures.stages import CAPTURED_STAGE_KEYS, stage_view
from ui.controls import current_settings
from ui.real import model_for, model_trace_for
from ui.show import (
    SIDE_BY_SIDE_MAX,
    apply_presentation,
    context_view,
    friendly_errors,
    show_figure,
    show_view,
    style_for,
)


def _fixed_by_architecture(info) -> None:
    st.markdown(
        "**What the architecture fixes** (the trained weights have these shapes; the sidebar's d_k and heads do "
        "not apply here)"
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
        f"Grouped-query attention: query heads {others} all read key/value head {kv + 1}, so their K and V "
        f"below are the same matrices; only Q differs."
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
    what_if = rerun_head(layer_trace, head, causal_mask(layer_trace.n_tokens))
    left, right = st.columns(2)
    with left:
        show_figure(stage_view(layer_trace, "weights", head, style).figures[0], "rm-actual")
    with right:
        view = stage_view(what_if, "weights", 0, style)
        view.figures[0].update_layout(title_text="what if causal: softmax(masked scores)")
        show_figure(view.figures[0], "rm-whatif")


with friendly_errors():
    settings = current_settings()
    apply_presentation(settings)
    style = style_for(settings)
    st.title("A real trained transformer")
    st.markdown(
        "Random weights show the mechanism; trained weights show what it learns. The sentence from the sidebar "
        "goes through a real model, and every layer's attention is captured from its own forward pass."
    )
    sources = available_models()
    key = st.selectbox(
        "model", tuple(sources), format_func=lambda k: sources[k].title, key="rm_model", bind="query-params"
    )
    device = str(resolve_device(settings.config.device))
    loaded = model_for(key, device)
    model_trace = model_trace_for(key, device, settings.text)
    info = model_trace.info

    if model_trace.truncated:
        st.warning(
            f"The sentence has {model_trace.total_tokens} tokens for this model; only the first "
            f"{len(model_trace.tokens)} are shown (at most {MAX_MODEL_TOKENS}, so that 30 layers of maps stay fast)."
        )
    st.markdown(f"**{len(model_trace.tokens)} tokens, exactly as the model's tokenizer makes them**")
    st.code("  ".join(f"{i}:{token}" for i, token in enumerate(model_trace.tokens)), language=None, wrap_lines=True)
    st.caption(
        "Special tokens ([CLS], [SEP]) are shown; '##ing' continues the word before it; "
        "↵ is a newline, ␣ a space, ⟨f0 9f⟩ the bytes of part of a character."
    )
    _fixed_by_architecture(info)

    st.header("Every layer and head")
    show_figure(entropy_grid_figure(model_trace, style), "rm-entropy")
    show_figure(thumbnails_figure(model_trace, style), "rm-thumbs")

    st.header("One head, stage by stage")
    left, right = st.columns(2)
    layer = left.selectbox(
        "layer", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_layer", bind="query-params"
    )
    labels = head_labels(model_trace)
    head = right.selectbox(
        "head", range(info.n_heads), format_func=lambda i: labels[i], key="rm_head", bind="query-params"
    )
    layer, head = min(layer or 0, info.n_layers - 1), min(head or 0, info.n_heads - 1)
    layer_trace = model_trace.layers[layer]
    st.caption(f"{layer_trace.label} · {_head_sharing_note(model_trace, head)}")
    beside = style_for(settings, side_by_side=layer_trace.n_tokens <= SIDE_BY_SIDE_MAX)
    for stage in CAPTURED_STAGE_KEYS:
        show_view(stage_view(layer_trace, stage, head, beside), f"rm-{stage}", beside.side_by_side)
        if stage == "context":
            context_view(layer_trace, head, style, key="rm_query")
        if stage == "weights" and not info.causal:
            _what_if_causal(layer_trace, head, style)
        st.divider()
