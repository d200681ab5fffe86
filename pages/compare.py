"""Compare: the same sentence under two settings, side by side."""

import streamlit as st

from figures.stages import stage_view
from ui.controls import current_settings
from ui.show import apply_presentation, friendly_errors, show_figure, style_for, trace_for

CHOICES = {
    "causal vs not": lambda c: ({"causal": False}, {"causal": True}),
    "scaled vs not": lambda c: ({"scaled": True}, {"scaled": False}),
    "two seeds": lambda c: ({}, {"seed": (c.seed + 1) % 2**32}),
    "two d_k": lambda c: ({}, {"d_k": min(4096, c.d_k * 8)}),
}


def _label(changes, config):
    merged = config.replace(**changes)
    return (
        f"{'causal' if merged.causal else 'no mask'}, {'scaled' if merged.scaled else 'not scaled'}, "
        f"seed {merged.seed}, d_k {merged.d_k}"
    )


with friendly_errors():
    settings = current_settings()
    apply_presentation(settings)
    style = style_for(settings, columns=2)
    st.title("Compare two settings")
    what = (
        st.segmented_control("compare", tuple(CHOICES), default="causal vs not", key="cmp_what", bind="query-params")
        or "causal vs not"
    )
    stage = (
        st.segmented_control(
            "stage", ("weights", "scores", "scaled"), default="weights", key="cmp_stage", bind="query-params"
        )
        or "weights"
    )
    left_changes, right_changes = CHOICES[what](settings.config)
    for column, changes, side in zip(st.columns(2), (left_changes, right_changes), ("left", "right"), strict=True):
        with column:
            trace = trace_for(settings, **changes)
            st.markdown(f"**{_label(changes, settings.config)}**")
            view = stage_view(trace, stage, 0, style)
            show_figure(view.figures[0], f"cmp-{side}")
            summary = trace.head_summary()[0]
            st.metric("mean normalized entropy (head 1)", f"{summary['mean_normalized_entropy']:.3f}")
            st.metric("mean max weight (head 1)", f"{summary['mean_max_weight']:.3f}")
