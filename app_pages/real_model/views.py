"""The views of a real model beside its stages: what its architecture fixes, the heads' roles, rollout, the
weights read other ways (without the first token, by words, by norms, as if causal) and generation."""

from __future__ import annotations

import streamlit as st

from app_pages.real_model.loading import GENERATION, generate, probe_trace
from attention_core.lectures import weight_text
from attention_core.models import WORD_START
from attention_core.models.capture import PROBE_HALF
from attention_core.models.generation import MAX_NEW_TOKENS
from attention_core.reading import merge_words, merged_tokens, rollout, word_groups
from attention_core.statistics import ROLES, STATISTICS, top_heads
from figures.decoding import generated_row_figure, step_entropy_figure
from figures.glossary import link
from figures.overview import entropy_grid_figure, head_labels, layer_labels
from figures.reading import (
    SINK_SHARE,
    drawn_on,
    rollout_figure,
    statistic_grid_figure,
)
from figures.style import markdown_literal
from ui import slides as slide_state
from ui.links import check_choice, check_whole
from ui.live_chart import show_figure
from ui.memo import remember

TOP_HEADS = 5  # heads listed under the role grid, highest first


def fixed_by_architecture(info) -> None:
    st.markdown(
        "**What the architecture fixes** (the trained weights have these shapes; the sidebar's sizes, mask, "
        "scaling, seed and init do not apply here and are greyed out)"
    )
    st.dataframe(
        [
            {"": "kind", "value": info.kind},
            {"": "layers", "value": str(info.n_layers)},
            {"": "query heads per layer", "value": str(info.heads)},
            {"": "key/value heads per layer", "value": str(info.n_kv_heads)},
            {"": "d_k (per head)", "value": str(info.d_k)},
            {"": "d_model", "value": str(info.d_model)},
            {"": "scale", "value": f"1/√{info.d_k}"},
            {"": "positions", "value": info.positions},
            {"": "tokens shown at most", "value": f"{info.token_cap} (model maximum {info.max_positions})"},
        ],
        hide_index=True,
    )


def head_sharing_note(model_trace, head: int) -> str:
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
    share = float(layer_trace.statistic("first")[head])  # NaN for one token
    if not share >= SINK_SHARE or layer_trace.n_tokens < 3:
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


def _open_head(layer: int, head: int, presentation: bool) -> None:
    """A head chosen from the role grid's list: its weights, in the stage views below (or on their slide)."""
    st.session_state["rm_layer"], st.session_state["rm_head"] = layer, head
    if presentation:
        st.session_state[slide_state.WANTED] = "weights"
    else:
        st.session_state[slide_state.SCROLL_TO] = slide_state.anchor("weights")


def show_roles(key: str, device: str, model_trace, hide_first: bool, style, presentation: bool) -> None:
    """Which heads do what: a role's score for every layer and head (attention_core.statistics), beside the
    entropy grid, its definition, and its top heads, each a button that opens it in the stage views."""
    check_choice("rm_role", "role", [role.key for role in ROLES])
    shown = "collapsed" if presentation else "visible"
    chosen = (
        st.segmented_control(
            "head role",
            [role.key for role in ROLES],
            format_func=lambda k: STATISTICS[k].name,
            default="previous",
            key="rm_role",
            bind="query-params",
            label_visibility=shown,
        )
        or "previous"
    )
    role = STATISTICS[chosen]
    source = probe_trace(key, device) if role.probe else model_trace
    leave_out = hide_first and role.key != "first"
    grid = source.grid(role.key, leave_first_out=leave_out)
    on = "the probe: random tokens, twice" if role.probe else "this sentence"
    without = ", first token left out" if leave_out else ""
    half = style.beside(2)
    entropy_place, role_place = st.columns(2)
    with entropy_place:
        show_figure(
            remember(model_trace, ("entropy", half), lambda: entropy_grid_figure(model_trace, half)), "rm-entropy"
        )
    with role_place:
        figure = statistic_grid_figure(
            grid.numpy(), role, layer_labels(model_trace), head_labels(model_trace), f"on {on}{without}", half
        )
        show_figure(figure, "rm-role")
    lens = f" TransformerLens calls it {role.lens} (where it scores differently, see the README)." if role.lens else ""
    probe = (
        f" The probe: {len(source.tokens)} tokens, {PROBE_HALF} random whole words then the same again, "
        "with the model's special tokens."
        if role.probe
        else ""
    )
    left_out = (
        " Here the first token is left out: its weight is taken from each row and the rest re-normalized."
        if leave_out
        else ""
    )
    st.caption(
        f"**{link(role.name.capitalize(), 'head roles')}**, 0 to 1: {role.definition} A head's score is the "
        "mean over the rows "
        f"that have such a key.{probe}{left_out}{lens}"
    )
    best = top_heads(grid, TOP_HEADS)
    if not best:
        st.caption(f"No row of {on} has such a key: no head has a score.")
        return
    row = st.container(horizontal=True, gap="small")
    row.markdown("**Highest:**")
    for layer, head, value in best:  # (without the key/value head, which the stage views name: five fit a row)
        row.button(
            f"layer {layer + 1} · head {head + 1}: {weight_text(value)}",
            key=f"rm_top_{layer}_{head}",
            on_click=_open_head,
            args=(layer, head, presentation),
            help="Open this head's weights",
        )


def show_rollout(model_trace, words: bool, hide_first: bool, style) -> None:
    """Attention rollout (attention_core.reading): one map through the first L layers, and per token what it
    draws on; by words where the switch says so, without the first token for display where that one does."""
    layers = len(model_trace.layers)
    check_whole("rm_upto", "through layer", 1, layers)
    depth, token = st.columns(2, vertical_alignment="bottom")  # one row: on a slide the map takes the rest
    upto = depth.slider("through layer", 1, layers, value=layers, key="rm_upto", bind="query-params")
    rolled = rollout([layer.weights for layer in model_trace.layers], upto)
    tokens = model_trace.tokens
    if words and model_trace.words:
        groups = word_groups(list(model_trace.words))
        rolled, tokens = merge_words(rolled.unsqueeze(0), groups)[0], merged_tokens(tokens, groups)
    row = token.selectbox(
        "what does this token draw on",
        range(len(tokens)),
        format_func=lambda i: tokens[i],
        index=len(tokens) - 1,
        key=f"rm_token_at_{len(tokens)}",
    )  # a key per length: words on/off
    show_figure(rollout_figure(rolled.numpy(), tokens, upto, layers, style, hide_first), "rm-rollout")
    st.markdown(drawn_on(rolled.numpy(), tokens, min(row or 0, len(tokens) - 1), hide_first=hide_first))


def _ask_to_generate() -> None:
    st.session_state["rm_go"] = True


def show_generation(key: str, device: str, text: str, info, model_trace, style) -> None:
    """A causal model writes after the sidebar's sentence, greedily, with its own KV cache; a scrubber over
    the prompt and every token written shows each one's attention row, the heads' peakiness, the next-token
    probabilities and the cache's size at that point."""
    st.header("Writing, one token at a time")
    if not info.causal:
        st.info(
            f"{info.title} is an encoder: it reads a sentence whole and writes no next token. Choose a causal "
            "decoder (SmolLM2) to watch one write."
        )
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
        st.caption(
            f"Greedy: each new token is the most probable one, written after the sidebar's sentence with "
            f"the model's own KV cache (transformers' DynamicCache), every layer's attention captured at "
            f"each step. Up to {MAX_NEW_TOKENS} new tokens."
        )
        return
    written = kept.written
    ending = (
        "it wrote its end-of-text token"
        if kept.ended
        else f"all {count} asked for"
        if kept.done
        else f"stopped after {written} of {count}"
    )
    text_written = "".join(p.token for p in kept.positions[kept.prompt :]).replace(WORD_START, " ")
    st.markdown(
        f"**Written** ({written} token{'s' if written != 1 else ''}, {ending}): {markdown_literal(text_written)}"
    )
    tokens = [p.token for p in kept.positions]
    at = st.select_slider(
        "position",
        options=range(len(tokens)),
        value=len(tokens) - 1,
        key="rm_gstep",
        format_func=lambda i: f"{style.index(i)}: {tokens[i]}" + (" (new)" if i >= kept.prompt else ""),
    )
    position = kept.positions[at]
    left, right = st.columns(2)
    layer = left.selectbox("layer ", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_glayer")
    labels = head_labels(model_trace)
    head = right.selectbox("head ", range(info.heads), format_func=lambda i: labels[i], key="rm_ghead")
    made = "written at this step, from the cache" if position.generated else "in the prompt, read in one pass"
    bytes_now = kept.cache_bytes_per_position * position.cached
    st.markdown(
        f"“{markdown_literal(position.token)}” ({made}). The cache now holds {position.cached} positions: "
        f"{info.n_layers} layers × {info.n_kv_heads} key/value heads × {position.cached} positions × "
        f"{info.d_k} × 2 (K and V) × 4 bytes = **{bytes_now:,} bytes**."
    )
    show_figure(
        generated_row_figure(
            tokens[: at + 1], position.rows[layer, head].numpy(), f"layer {layer + 1} · {labels[head]}", style
        ),
        "rm-gen-row",
    )
    grid, top = st.columns([3, 2])
    with grid:
        if position.rows.shape[-1] > 1:
            show_figure(step_entropy_figure(position.rows.numpy(), labels, style.beside(2)), "rm-gen-grid")
        else:
            st.caption("The first token has one key, itself: every head's weight on it is 1.")
    with top:
        st.markdown("**Next token, most probable first**")
        st.dataframe([{"token": token, "probability": round(p, 4)} for token, p in position.top], hide_index=True)
