"""Compare: the same sentence under two settings, side by side, saying what is held fixed."""

import streamlit as st

from attention_core import MAX_DIM
from figures.stages import BY_KEY, GRID_STAGES, stage_view
from ui.controls import current_settings
from ui.show import friendly_errors, show_figure, style_for, trace_for


def _two_d_ks(config):
    """Both d_k chosen by the reader (bound to the URL); by default the sidebar's and eight times it."""
    left, right = st.columns(2)
    small = left.number_input("d_k, left", 1, MAX_DIM, value=config.d_k, key="cmp_dk_left", bind="query-params")
    large = right.number_input(
        "d_k, right", 1, MAX_DIM, value=min(MAX_DIM, config.d_k * 8), key="cmp_dk_right", bind="query-params"
    )
    held = (
        f"Held fixed: the sentence, X, W_V and W_O (same seed). W_Q and W_K of the smaller d_k are the first "
        f"{min(small, large)} columns of the larger one's, so the d_k = {max(small, large)} dot products add "
        f"{abs(large - small)} more terms to the same {min(small, large)}."
    )
    if config.init == "xavier":
        held += " With xavier init each side's bound √(6 / (d_model + d_k)) scales its columns by a different amount."
    return {"d_k": small}, {"d_k": large}, held


def _pair(name, config):
    """The two sides' config changes and what is held fixed between them."""
    if name == "causal vs not":
        return {"causal": False}, {"causal": True}, "Held fixed: everything but the mask (same X, same W)."
    if name == "scaled vs not":
        return {"scaled": True}, {"scaled": False}, "Held fixed: everything but the ÷√d_k (same X, same W)."
    if name == "two seeds":
        other = (config.seed + 1) % 2**32
        return {}, {"seed": other}, f"Only the seed differs ({config.seed} and {other}): X and every W are drawn anew."
    return _two_d_ks(config)


def _label(changes, config):
    merged = config.replace(**changes)
    return (
        f"{'causal' if merged.causal else 'no mask'}, {'scaled' if merged.scaled else 'not scaled'}, "
        f"seed {merged.seed}, d_k {merged.d_k}"
    )


with friendly_errors():
    settings = current_settings()
    style = style_for(settings, columns=2)
    st.title("Compare two settings")
    what = (
        st.segmented_control(
            "compare",
            ("causal vs not", "scaled vs not", "two seeds", "two d_k"),
            default="causal vs not",
            key="cmp_what",
            bind="query-params",
        )
        or "causal vs not"
    )
    stage = st.segmented_control(
        "stage",
        [s.key for s in GRID_STAGES],
        format_func=lambda k: BY_KEY[k].title,
        default="weights",
        key="cmp_stage",
        bind="query-params",
    )
    left_changes, right_changes, held = _pair(what, settings.config)
    st.caption(held)
    for column, changes, side in zip(st.columns(2), (left_changes, right_changes), ("left", "right"), strict=True):
        with column:
            trace = trace_for(settings, **changes)
            st.markdown(f"**{_label(changes, settings.config)}**")
            view = stage_view(trace, stage or "weights", 0, style)
            show_figure(view.figures[0], f"cmp-{side}")
            summary = trace.head_summary()[0]
            st.metric("mean normalized entropy (head 1)", f"{summary['mean_normalized_entropy']:.3f}")
            st.metric("mean max weight (head 1)", f"{summary['mean_max_weight']:.3f}")
