"""Multi-head: every head as small multiples, their peakiness, the concat and W_O."""

import streamlit as st

from figures.stages import head_summary_figure, multihead_grid, stage_view
from ui.controls import current_settings
from ui.show import apply_presentation, friendly_errors, show_figure, show_view, style_for, trace_for

with friendly_errors():
    settings = current_settings()
    apply_presentation(settings)
    trace = trace_for(settings)
    style = style_for(settings)
    st.title(f"{trace.n_heads} heads in parallel")
    st.markdown(
        "Each head has its own W_Q, W_K, W_V, so each can look for a different relationship "
        "(one for grammar, one for what 'he' refers to…). Their context vectors are concatenated and "
        "W_O maps them back to d_model."
    )
    left, right = st.columns(2)
    stage = (
        left.segmented_control(
            "map", ("weights", "scaled_scores", "scores"), default="weights", key="mh_stage", bind="query-params"
        )
        or "weights"
    )
    shared = right.toggle("one colour scale for all heads", value=True, key="mh_shared", bind="query-params")
    show_figure(multihead_grid(trace, stage, shared, style), "multihead-grid")
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
    show_view(stage_view(trace, "output", 0, style), "mh-output")
