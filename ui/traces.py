"""The traces a page shows, computed once and shared: cached by their inputs, the heavy ones one at a time per
slot and kept by the session that asked (a 4096-token trace holds ~335 MB of maps per head)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading

import streamlit as st
import streamlit.components.v2

from attention_core import (
    AttentionTrace,
    check_request,
    cpu_threads,
    estimate_trace_bytes,
    scaling_experiment,
    sentence_scaling,
    tokenize,
    trace_sentence,
)
from attention_core.matrices import fit_typed
from attention_core.tokens import embed
from figures.style import markdown_literal
from ui.controls import Settings
from ui.own_weights import own_given, own_label, own_refusal


def given_weights(text: str, config, typed: tuple, own: str = "") -> dict:
    """The matrices given in place of drawn ones: those of one's own checkpoint (`own`, ui.own_weights; only when
    they fit), and the typed ones ((name, numbers) pairs) over them."""
    return {**(own_given(own, config, text) if own else {}), **dict(typed)}


def compute_trace(text: str, config, typed: tuple, own: str = "") -> AttentionTrace:
    """The trace of a sentence under a config, with the given matrices (given_weights) in place of drawn ones;
    kept on the CPU, where the figures read it."""
    given = given_weights(text, config, typed, own)
    x = given.pop("x", None)
    return trace_sentence(text, config, x=x, weights=given).to("cpu")


# The spinner shows only while a trace is computed (a cache miss): a spinner around every lookup would cost
# each rerun a timer thread and two messages.
@st.cache_resource(max_entries=32, show_spinner="Computing attention…")
def cached_trace(text: str, config, typed: tuple, own: str = "") -> AttentionTrace:
    """One trace per (text, settings, typed numbers), shared by all sessions: the same inputs give the same
    numbers, and the trace is frozen. cache_resource hands out the object itself (no pickling copy of
    several n x n tensors on every rerun). Only small traces come here (see trace_for)."""
    return compute_trace(text, config, typed, own)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_scaling(d_ks: tuple[int, ...], n_keys: int, samples: int, seed: int):
    return scaling_experiment(d_ks, n_keys=n_keys, samples=samples, seed=seed, device="cpu")


@st.cache_resource(max_entries=16, show_spinner=False)
def cached_sentence_scaling(tokens: tuple[str, ...], d_model: int, positional: bool, seed: int, row_d_k: int):
    x = embed(list(tokens), d_model, seed=seed, positional=positional)
    return sentence_scaling(x, tokens, row_d_k=row_d_k, seed=seed)


def typed_numbers(settings: Settings, **changes) -> tuple[dict, list[str]]:
    """The typed matrices that fit the settings (see attention_core.matrices.fit_typed), and a message for
    each one that does not."""
    config = settings.config.replace(**changes) if changes else settings.config
    return fit_typed(dict(settings.typed), config, len(tokenize(settings.text)))


# Large traces (a 4096-token trace holds ~335 MB of maps per head) are not kept in the shared cache, whose
# entries would add up to gigabytes: each session keeps its own last HEAVY_PER_SESSION of them (given back
# when it moves on or ends), and at most HEAVY_AT_ONCE are computed at a time, so that one reader's large
# request leaves the cores to everybody else's small ones.
HEAVY_TRACE_BYTES = 64 * 2**20
HEAVY_PER_SESSION = 2  # Compare shows two traces
# Half the threads torch computes with: the cores, or OMP_NUM_THREADS where a replica is given fewer (deploy/).
HEAVY_AT_ONCE = max(1, cpu_threads() // 2)


class InTurn:
    """At most `slots` holders at a time, and those who wait served in the order they asked. (A semaphore lets a
    newcomer take a slot freed while another waits for it: a training run waiting behind a stream of large traces
    could wait for ever.) A slot freed goes straight to the first in line."""

    def __init__(self, slots: int):
        self._free, self._line, self._lock = slots, collections.deque(), threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        with self._lock:
            if self._free and not self._line:
                self._free -= 1
                return True
            if not blocking:
                return False
            turn = threading.Event()
            self._line.append(turn)
        turn.wait()  # set by release, which hands this caller the slot it frees
        return True

    @property
    def waiting(self) -> int:
        """How many wait in line now."""
        return len(self._line)

    def release(self) -> None:
        with self._lock:
            if self._line:
                self._line.popleft().set()
            else:
                self._free += 1

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


HEAVY_SLOTS = InTurn(HEAVY_AT_ONCE)


@contextlib.contextmanager
def heavy_slot(waiting: str | None = None):
    """One of the HEAVY_AT_ONCE slots for heavy work (a large trace, a training run; real models run in a
    process of their own: app_pages/real_model/loading.py): a room asking at once is served in turn, not all
    together, which on a few cores would make every one of them slow.
    `waiting`: a spinner's words while no slot is free (none inside a cached function)."""
    if not HEAVY_SLOTS.acquire(blocking=False):
        with st.spinner(waiting) if waiting else contextlib.nullcontext():
            HEAVY_SLOTS.acquire()
    try:
        yield
    finally:
        HEAVY_SLOTS.release()


def _heavy_trace(key: tuple) -> AttentionTrace:
    """A large trace: this session's own copy, computed when a slot is free."""
    kept = st.session_state.setdefault("heavy_traces", {})
    if key in kept:
        return kept[key]
    check_request(len(tokenize(key[0])), key[1])  # a request over the memory budget is refused without waiting
    while len(kept) >= HEAVY_PER_SESSION:  # give the oldest back before making a new one
        kept.pop(next(iter(kept)))
    waiting = "Waiting for a free slot: other readers' large traces are being computed…"
    with heavy_slot(waiting), st.spinner("Computing a large trace…"):
        kept[key] = compute_trace(*key)
    return kept[key]


def trace_for(settings: Settings, **changes) -> AttentionTrace:
    """The trace for the current settings (with the typed numbers that fit), optionally with some config
    fields changed. Small traces come from the cache that every session shares (a class opening one link
    computes it once); large ones see _heavy_trace."""
    config = settings.config.replace(**changes) if changes else settings.config
    typed, _ = typed_numbers(settings, **changes) if settings.typed else ({}, [])
    own = settings.own if settings.own and not own_refusal(settings.own, config, settings.text) else ""
    key = (settings.text, config, tuple(sorted(typed.items())), own)
    if estimate_trace_bytes(len(tokenize(settings.text)), config) > HEAVY_TRACE_BYTES:
        trace = _heavy_trace(key)
    else:
        trace = cached_trace(*key)
    typed_as = own_label(own) if own and not typed else settings.typed_as
    if (typed or own) and typed_as != trace.typed_as:  # the shared trace is frozen: a copy says where they came from
        trace = dataclasses.replace(trace, typed_as=typed_as)
    return trace


def show_typed_refusals(settings: Settings) -> None:
    """Say which typed matrices are not used, and why."""
    if settings.typed:
        for message in typed_numbers(settings)[1]:
            st.warning(markdown_literal(message), icon="✏️")  # it quotes what was typed: shown as typed
    if refusal := own_refusal(settings.own, settings.config, settings.text):
        st.warning(markdown_literal(refusal), icon="📂")
