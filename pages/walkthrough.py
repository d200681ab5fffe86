"""Walkthrough: X → Q,K,V → QKᵀ → /√d_k → mask → softmax → ·V → concat·W_O, one stage at a time."""

import streamlit as st

from figures.stages import STAGE_KEYS, stage_view
from ui.controls import current_settings
from ui.show import (
    SIDE_BY_SIDE_MAX,
    apply_presentation,
    context_view,
    friendly_errors,
    show_view,
    style_for,
    trace_for,
    trace_npz,
)

STAGE_NAMES = {
    "x": "X",
    "projections": "W_Q W_K W_V",
    "qkv": "Q K V",
    "scores": "QKᵀ",
    "scaled": "/√d_k",
    "mask": "mask",
    "weights": "softmax",
    "context": "·V",
    "output": "concat·W_O",
}


def _step(delta: int) -> None:
    index = STAGE_KEYS.index(st.session_state.get("stage", STAGE_KEYS[0]))
    st.session_state["stage"] = STAGE_KEYS[(index + delta) % len(STAGE_KEYS)]


with friendly_errors():
    settings = current_settings()
    apply_presentation(settings)
    trace = trace_for(settings)
    # A stage's figures share a row in presentation mode, and where the maps stay wide enough to read.
    style = style_for(settings, side_by_side=settings.presentation or trace.n_tokens <= SIDE_BY_SIDE_MAX)
    st.title("Self-attention, step by step")
    st.caption(
        f"{trace.n_tokens} tokens · d_model {settings.config.d_model} · d_k {trace.d_k} · d_v {trace.d_v} · "
        f"{trace.n_heads} head(s) · {'causal' if settings.config.causal else 'no mask'} · "
        f"{'scaled' if settings.config.scaled else 'NOT scaled'} · seed {settings.config.seed}"
    )
    head = 0
    if trace.n_heads > 1:
        head = st.segmented_control(
            "head",
            list(range(trace.n_heads)),
            format_func=lambda i: f"head {i + 1}",
            default=0,
            key="head",
            bind="query-params",
        )
        head = 0 if head is None else min(head, trace.n_heads - 1)

    if settings.presentation:
        left, middle, right = st.columns([1, 6, 1])
        left.button("← previous", on_click=_step, args=(-1,), shortcut="Left", width="stretch")
        right.button("next →", on_click=_step, args=(1,), shortcut="Right", width="stretch")
        with middle:
            key = st.segmented_control(
                "stage",
                STAGE_KEYS,
                format_func=STAGE_NAMES.get,
                default=STAGE_KEYS[0],
                key="stage",
                bind="query-params",
            )
        key = key or STAGE_KEYS[0]
        show_view(stage_view(trace, key, head, style), key, side_by_side=style.side_by_side)
        if key == "context":
            context_view(trace, head, style)
        st.button("Exit presentation mode", on_click=st.session_state.update, kwargs={"present": False})
    else:
        for key in STAGE_KEYS:
            show_view(stage_view(trace, key, head, style), key, side_by_side=style.side_by_side)
            if key == "context":
                context_view(trace, head, style)
            st.divider()
        st.download_button(
            "⬇ whole trace (.npz)",
            data=lambda: trace_npz(trace),
            file_name="attention_trace.npz",
            mime="application/octet-stream",
            on_click="ignore",
            key="dl-npz",
        )
