"""What a reader takes away: each stage's matrices as CSV and JSON, and a whole trace as .npz."""

from __future__ import annotations

import io
import json

import numpy as np
import streamlit as st
import streamlit.components.v2

from attention_core import (
    AttentionTrace,
)
from figures.stages import StageView
from ui.live_chart import PLOTLY_CONFIG


def title_text(figure) -> str:
    """What a figure shows, for a button label: its title, or its maps' titles (without their shapes)."""
    names = [trace.name.split("  ")[0] for trace in figure.data if trace.name and trace.type == "heatmap"]
    return (figure.layout.title.text or ", ".join(names)).split("<br>")[0].split("  ")[0]


def export_buttons(view: StageView, key: str) -> None:
    """HTML per figure and CSV per matrix, in a popover whose buttons are made only while it is open
    (on_change="rerun": opening it reruns the page once). Closed, it costs the server one element instead of
    a button per file: the Walkthrough's 25 buttons were a sixth of its every rerun (README "A whole class at
    once"). Files are built only on click; PNG comes from the camera icon on each chart."""
    with st.popover("⬇ export", key=f"export-{key}", on_change="rerun") as box:
        if not box.open:
            return
        for i, figure in enumerate(view.figures):
            st.download_button(
                f"{title_text(figure) or 'figure'} (HTML)",
                data=lambda figure=figure: figure.to_html(include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG),
                file_name=f"{key}-{i}.html",
                mime="text/html",
                key=f"dl-{key}-{i}-html",
                on_click="ignore",
            )
        for matrix in view.matrices:
            st.download_button(
                f"{matrix.name} (CSV)",
                data=matrix.to_csv,
                file_name=f"{key}-{matrix.name}.csv",
                mime="text/csv",
                key=f"dl-{key}-{matrix.name}-csv",
                on_click="ignore",
            )


def trace_npz(trace: AttentionTrace) -> bytes:
    """Every stage of the trace in one .npz (exact float values; tokens and the variant as JSON)."""
    arrays = {
        name: getattr(trace, name).detach().cpu().numpy()
        for name in trace.__dataclass_fields__
        if hasattr(getattr(trace, name), "detach")
    }
    # The variant's weights (w_q, ..., MLA's w_dkv, ...) and intermediates (c_kv, k_r, ...) by their own names.
    arrays |= {name: tensor.detach().cpu().numpy() for name, tensor in {**trace.params, **trace.parts}.items()}
    arrays["kv_head_of"] = np.array(trace.kv_head_of)
    arrays["tokens_json"] = np.frombuffer(json.dumps(list(trace.tokens)).encode(), dtype=np.uint8)
    arrays["variant_json"] = np.frombuffer(json.dumps(trace.variant).encode(), dtype=np.uint8)
    arrays["scale"] = np.array(trace.scale)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
