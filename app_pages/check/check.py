"""Check your attention: run your own implementation on this page's inputs, upload what it made, and see which
stages match, the first that differs, and the mistake that explains it (attention_core/checking.py)."""

from __future__ import annotations

import io
import json

import numpy as np
import streamlit as st
from safetensors.torch import save

from attention_core.checking import (
    MAX_UPLOAD_BYTES,
    MISTAKES,
    Verdict,
    check,
    inputs_arrays,
    inputs_settings,
    load_snippet,
    read_outputs,
)
from attention_core.variants import VARIANTS
from figures.style import markdown_literal
from ui.links import check_whole
from ui.show import friendly_errors
from ui.sidebar import current_settings
from ui.traces import show_typed_refusals, trace_for

NAMES = {
    "q_c": "q^C (MLA's content query)",
    "q_r": "q^R (MLA's rotary query)",
    "c_kv": "c_KV (MLA's latent)",
    "k_c": "k^C (MLA's content key)",
    "k_r": "k^R (MLA's shared rotary key)",
    "absorbed": "absorbed scores (q^C·W_UKᵀ)·c_KVᵀ",
    "q": "Q",
    "k": "K",
    "v": "V",
    "scores": "scores QKᵀ",
    "scaled_scores": "scaled scores",
    "bent_scores": "bent scores (the score_mod)",
    "masked_scores": "masked scores",
    "weights": "attention weights",
    "context": "context",
    "output": "output",
}


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        trace = trace_for(settings)
        st.title("Check your attention")
        st.markdown(
            "Run your own implementation on these inputs, then upload what it made: any of its stages, named as "
            "the lectures, TransformerLens or transformers name them. The page lines them up with its own, in "
            "order, and where one differs it says which mistake gives exactly your numbers."
        )
        show_typed_refusals(settings)
        inputs(trace)
        check_whole("chk_step", "decoding step", 0, trace.n_tokens)
        st.number_input(
            "decoding step: 0 = the whole sentence at once; t = token t's row against the cache of tokens 1 … t",
            0,
            trace.n_tokens,
            0,
            key="chk_step",
            bind="query-params",
        )
        uploaded = st.file_uploader(
            "Your outputs (.npz, .safetensors, or a torch file of tensors: read with weights_only=True)",
            type=["npz", "safetensors", "pt", "pth"],
            key="chk_file",
            max_upload_size=MAX_UPLOAD_BYTES // 2**20,
            help=f"At most {MAX_UPLOAD_BYTES // 2**20} MB. A pickle is never loaded.",
        )
        if uploaded is None:
            st.caption(f"The catalogue of mistakes it recognises: {', '.join(m.name for m in MISTAKES)}.")
            return
        step = decoding_step(trace)
        try:
            verdict = check(trace, read_outputs(uploaded.name, uploaded.getvalue()), step)
        except ValueError as error:
            st.error(f"⚠️ Nothing was checked: {markdown_literal(str(error))}")
            return
        show_verdict(trace, verdict)


def inputs(trace) -> None:
    """The inputs as .npz and .safetensors, and how to load them."""
    arrays = inputs_arrays(trace)
    settings = json.dumps(inputs_settings(trace))
    buffer = io.BytesIO()
    np.savez(buffer, settings=np.array(settings), **{name: value.numpy() for name, value in arrays.items()})
    variant = VARIANTS[trace.variant]
    weights = [name for name in arrays if name in trace.params]
    st.markdown(
        f"**Inputs**: X [{trace.n_tokens} × {trace.x.shape[1]}] and {variant.label}'s weights "
        f"({', '.join(weights)}), with the sidebar's settings: {mask_words(trace)}, scale {trace.scale:.4g}, "
        f"{trace.heads} head{'s' if trace.heads > 1 else ''}{', RoPE' if trace.rope_base else ''}"
        f"{bend_words(trace)}."
    )
    left, right = st.columns(2)
    left.download_button("⬇ inputs (.npz)", buffer.getvalue(), "attention_inputs.npz", on_click="ignore",
                         key="chk_npz")  # fmt: skip
    right.download_button("⬇ inputs (.safetensors)", save(arrays, metadata={"settings": settings}),
                          "attention_inputs.safetensors", on_click="ignore", key="chk_safetensors")  # fmt: skip
    # No highlighting: its colours are under 4.5:1 on the code's grey.
    st.code(load_snippet(list(arrays)), language=None, wrap_lines=True)  # a scrolling block is not reachable by keys


def mask_words(trace) -> str:
    """The mask a student must apply, and where a composed one is among the inputs."""
    if trace.composed:
        return f"the composed mask {markdown_literal(trace.composed)} (the array mask: 1 where a query sees a key)"
    return "causal mask" if trace.mask is not None else "no mask"


def bend_words(trace) -> str:
    """The bend a student must apply after the scaling, and its numbers among the inputs ("" without one)."""
    if not trace.bend:
        return ""
    numbers = {
        "alibi": " (the array alibi_slopes: score − m_h·|i − j|)",
        "relative": " (the array relative_bias: score + r[h, clip(i − j) + reach])",
    }
    return f", scores bent by {trace.bend}{numbers.get(trace.bend, '')} before the mask"


def decoding_step(trace) -> int | None:
    """The step chosen, counted from 0 (None: the whole sentence). A step needs the causal mask."""
    step = st.session_state.get("chk_step", 0) or 0
    if step and trace.mask is None:
        st.info("A decoding step needs the causal mask (a decoder sees only the tokens so far): switch it on in "
                "the sidebar. The whole sentence is checked.")  # fmt: skip
        return None
    return step - 1 if step else None


def show_verdict(trace, verdict: Verdict) -> None:
    """Each stage handed in, in order; the first that differs, its rows side by side, and the mistake."""
    if not verdict.checked:
        st.warning(f"No array in the file has a stage's name. Use one of: {', '.join(verdict.expected)}.")
    st.dataframe(
        [
            {"stage": NAMES[c.stage], "read as": c.layout, "largest difference": f"{c.difference:.2e}",
             "first cell that differs": "" if c.first is None else str(list(c.first)),
             "": "✓ matches" if c.ok else "✗ differs"}
            for c in verdict.checked
        ],
        hide_index=True,
    )  # fmt: skip
    if verdict.ignored:
        st.caption(f"Not a stage the check knows, left out: {', '.join(map(markdown_literal, verdict.ignored))}.")
    if verdict.checked and verdict.all_right:
        st.success(f"Every stage you handed in matches ({len(verdict.checked)} of {len(verdict.expected)}).")
        return
    if verdict.first_wrong is None:
        return
    wrong = next(c for c in verdict.checked if c.stage == verdict.first_wrong)
    st.error(f"The first stage that differs: **{NAMES[wrong.stage]}**, first at {list(wrong.first)} (counted "
             f"from 0); the largest difference is {wrong.difference:.3g}.")  # fmt: skip
    if wrong.fact:
        st.markdown(wrong.fact)
    if wrong.nan is not None:
        st.markdown(f"Yours holds NaN, first at {list(wrong.nan)}: a softmax over a row whose every key is hidden.")
    for mistake in verdict.mistakes:
        st.markdown(f"**The likely mistake: {mistake.name}.** {mistake.explanation}")
    if not verdict.mistakes:
        st.markdown("No mistake of the catalogue gives exactly these numbers.")
    row = wrong.first[:-1]
    st.markdown(f"The row of that first cell, {list(row)}, expected and yours:")
    st.dataframe({"expected": verdict.expected_row(wrong.stage, row), "yours": verdict.received_row(wrong.stage, row)})


main()
