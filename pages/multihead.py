"""Multi-head: every head as small multiples, their peakiness, the concat and W_O."""

import streamlit as st

from figures.multihead import head_summary_figure, multihead_grid
from figures.stages import BY_KEY, GRID_STAGES, VARIANT_STAGES
from ui.controls import check_choice, current_settings
from ui.show import (
    friendly_errors,
    show_figure,
    show_stage,
    show_typed_refusals,
    style_for,
    trace_for,
)


def own_weights(trace) -> str:
    """What each head has of its own, in the trace's variant."""
    if trace.variant == "mla":
        return ("Each head has its own query weights and its own up-projections W_UK and W_UV from the one latent "
                "c_KV that every head shares")  # fmt: skip
    if trace.kv_heads < trace.n_heads:
        groups = "; ".join(
            f"heads {', '.join(str(h + 1) for h in trace.heads_sharing(g))} read key/value head {g + 1}"
            for g in range(trace.kv_heads)
        )
        return f"Each head has its own W_Q; W_K and W_V are shared ({groups})"
    return "Each head has its own W_Q, W_K, W_V"


with friendly_errors():
    settings = current_settings()
    trace = trace_for(settings)
    style = style_for(settings)
    h = trace.n_heads
    st.title(f"{h} head{'s' if h > 1 else ''} in parallel")
    show_typed_refusals(settings)
    here = (
        "the weights here are random, so how the heads differ is chance"
        if not trace.given
        else "some weights here are typed, the others random"
    )
    st.markdown(
        f"{own_weights(trace)}, so each can look for something else ([multi-head](glossary#multi-head)). "
        f"In a trained model one head might follow grammar and another what “he” refers to; {here}. Their context "
        "vectors are concatenated and W_O maps them back to d_model."
    )
    if h == 1:
        st.info("One head: raise **heads** in the sidebar to see several side by side.")
    choices = [stage.key for stage in GRID_STAGES]
    check_choice("mh_stage", "map", [BY_KEY[k].title for k in choices])
    check_choice("mh_shared", "one colour scale for all heads", ["true", "false"])
    stage = st.segmented_control(
        "map", choices, format_func=lambda k: BY_KEY[k].title, default="weights", key="mh_stage", bind="query-params"
    )
    shared = st.toggle("one colour scale for all heads", value=True, key="mh_shared", bind="query-params")
    show_figure(multihead_grid(trace, stage or "weights", shared, style), "multihead-grid")
    show_figure(head_summary_figure(trace, style), "head-summary")
    st.dataframe(
        [
            {
                "head": s["head"] + 1,
                "mean normalized entropy": round(s["mean_normalized_entropy"], 3),
                "mean max weight": round(s["mean_max_weight"], 3),
                "mean effective tokens": round(s["mean_effective_tokens"], 2),
            }
            for s in trace.head_summary()
        ],
        hide_index=True,
    )
    st.caption(f"Means over {trace.averaged_rows_text}.")
    show_stage(trace, "output", 0, style, prefix="mh-")
    for key in VARIANT_STAGES:  # what the variant adds: MLA's latent, RoPE, absorption; every variant's cache
        if BY_KEY[key].applies(trace):
            show_stage(trace, key, 0, style, prefix="mh-")
