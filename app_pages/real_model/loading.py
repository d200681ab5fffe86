"""Streamlit plumbing for real models: loaded once, in the model worker process; traced once per (model, text).

Imported only by the Real model page, so that the other pages start without importing transformers.
"""

from __future__ import annotations

import threading
import uuid

import streamlit as st

from app_pages.real_model.spec import MODEL_TRACE
from attention_core.models import ModelTrace, available_models
from attention_core.models.generation import Generation, GenerationLost
from attention_core.models.worker import Loaded, ModelWorker, WorkerDied


@st.cache_resource(show_spinner=False, on_release=ModelWorker.close)
def model_worker() -> ModelWorker:
    """The one process that runs real models, shared by every session (attention_core/models/worker.py:
    in the server a model's run would wait on every other reader's page being built)."""
    return ModelWorker()


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_model_trace(key: str, device: str, text: str) -> ModelTrace:
    """Shared by every session (a class opening one link runs the model once); bounded: one SmolLM2 trace at
    the 128-token cap holds about 70 MB of maps. The worker runs one reader's run per core at once."""
    return model_worker().trace(key, device, text)


@st.cache_resource(max_entries=2, show_spinner="Running the model on the induction probe…")
def probe_trace(key: str, device: str) -> ModelTrace:
    """The model on its induction probe (the same for every reader: one run per model)."""
    return model_worker().probe(key, device)


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_load(key: str, device: str) -> Loaded:
    return model_worker().load(key, device)


def model_for(key: str, device: str, box: bool = True) -> Loaded:
    """The model, loaded in the worker, with a status box that says what is happening while it loads (and then
    how long it took); `box=False`: a spinner while it loads, nothing after (a slide has no room for it)."""
    title = available_models()[key].title
    if not box:
        with st.spinner(f"Loading {title}…"):
            return cached_load(key, device)
    with st.status(f"Loading {title}…", expanded=False) as status:
        loaded = cached_load(key, device)
        status.update(
            label=f"{title}: loaded in {loaded.load_seconds:.1f} s, running on {loaded.device}", state="complete"
        )
    return loaded


def model_trace_for(key: str, device: str, text: str) -> ModelTrace:
    """The trace of the text; the session keeps its last one while it is on this page (PageSpec.keeps), so that
    choosing another layer or head reruns no model even when other readers' sentences have pushed it out of
    the shared cache."""
    kept = st.session_state.setdefault(MODEL_TRACE, {})
    if (key, device, text) not in kept:
        with st.spinner("Running the model and capturing every layer (one run per core at once: yours may wait)…"):
            trace = cached_model_trace(key, device, text)
        kept.clear()
        kept[key, device, text] = trace
    return kept[key, device, text]


GENERATION = "generation"  # the session's last generation: (model key, device, prompt, count) -> Generation
GENERATING = threading.BoundedSemaphore(2)  # generations under way at once on the server; others wait, and are told


def generate(key: str, device: str, text: str, count: int) -> Generation:
    """Greedy generation in the model worker, one request per step, with a progress bar. Each step lands in the
    session as it comes, so a reader's ■ Stop (a rerun, which ends this script at its next Streamlit call) keeps
    the tokens written so far. A worker that dies mid-way is started again and the generation redone once, from
    the prompt (greedy: the same tokens); a second time, the error is raised."""
    kept = st.session_state.setdefault(GENERATION, {})
    kept.clear()
    worker = model_worker()
    progress = st.progress(0.0, text="Starting…")
    if not GENERATING.acquire(blocking=False):
        progress.progress(0.0, text="Waiting for a free slot (two generations run at once on this server)…")
        GENERATING.acquire()
    try:
        for attempt in (1, 2):
            gen_id = uuid.uuid4().hex
            try:
                generation = worker.generation_start(key, device, gen_id, text, count)
                try:
                    while not generation.done:
                        written = generation.written
                        progress.progress(written / count, text=f"Writing token {written + 1} of {count}…")
                        kept[key, device, text, count] = generation
                        generation = generation.plus(*worker.generation_step(key, device, gen_id))
                finally:
                    worker.generation_end(gen_id)
                break
            except (WorkerDied, GenerationLost):
                if attempt == 2:
                    raise
                st.info(
                    "The model worker stopped during the generation and was started again: generating again "
                    "from the prompt (greedy, so the same tokens)."
                )
    finally:
        GENERATING.release()
    progress.empty()
    kept[key, device, text, count] = generation
    return generation
