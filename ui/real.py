"""Streamlit plumbing for real models: load once per process, trace once per (model, text).

Imported only by the Real model page, so that the other pages start without importing transformers.
"""

from __future__ import annotations

import streamlit as st

from attention_core.models import LoadedModel, ModelTrace, available_models, load_model, trace_text
from ui.show import heavy_slot


@st.cache_resource(max_entries=2, show_spinner=False)
def cached_model(key: str, device: str, _progress=None) -> LoadedModel:
    """Shared by every session. Capture keeps no state on the model, so sharing it is safe."""
    return load_model(key, device, progress=_progress or (lambda message: None))


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_model_trace(key: str, device: str, text: str) -> ModelTrace:
    """Shared by every session (a class opening one link runs the model once); bounded: one SmolLM2 trace at
    the 128-token cap holds about 70 MB of maps. At most HEAVY_AT_ONCE model runs at a time."""
    with heavy_slot():
        return trace_text(cached_model(key, device), text).to("cpu")


def model_for(key: str, device: str) -> LoadedModel:
    """The loaded model, with a status box that says what is happening while it loads."""
    title = available_models()[key].title
    with st.status(f"Loading {title}…", expanded=False) as status:
        loaded = cached_model(key, device, _progress=lambda message: status.update(label=message))
        status.update(
            label=f"{title}: loaded in {loaded.load_seconds:.1f} s, running on {loaded.device}", state="complete"
        )
    return loaded


def model_trace_for(key: str, device: str, text: str) -> ModelTrace:
    """The trace of the text; the session keeps its last one, so that choosing another layer or head reruns
    no model even when other readers' sentences have pushed it out of the shared cache."""
    kept = st.session_state.setdefault("model_trace", {})
    if (key, device, text) not in kept:
        with st.spinner("Running the model and capturing every layer (readers' runs take turns)…"):
            trace = cached_model_trace(key, device, text)
        kept.clear()
        kept[key, device, text] = trace
    return kept[key, device, text]
