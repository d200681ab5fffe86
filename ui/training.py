"""Training runs for the Training page: shared by every session, bounded, and each session's own choice.

A run is a pure function of its TrainingConfig (the same config trains the same weights bit for bit on the
CPU), so runs live in one registry that all sessions share: a class that opens the lecturer's link trains
once and every student watches the same run. The registry keeps RUNS_KEPT runs (the oldest finished one
goes first); at most HEAVY_AT_ONCE runs train at a time (they take the same slots as large traces,
ui.traces.HEAVY_SLOTS), each in a thread of its own, and a session trains one run at a time.
"""

from __future__ import annotations

import collections
import threading

import streamlit as st

from attention_core.training import (
    Checkpoint,
    Grammar,
    HeldOut,
    Lesson,
    Run,
    Training,
    TrainingConfig,
    checkpoint_trace,
    held_out_attention,
    held_out_sentences,
    lesson,
    train,
)
from ui.controls import log
from ui.traces import HEAVY_SLOTS

LECTURE_KEY = "t_lecture"  # the switch "Lecture 002's model" (attention_core.training.load_lecture_model)

RUNS_KEPT = 8  # a run's checkpoints: 264 KiB at the default sizes, ~16 MB at the largest allowed (README)
STEPS_CACHED = 256  # per cache below: a step's held-out numbers, or its layer on a 4-token sentence (a few KB)
GRAMMAR = Grammar()
HELD_OUT = held_out_sentences(GRAMMAR)  # the sentences the page measures the layer on

_runs: collections.OrderedDict[TrainingConfig, Training] = collections.OrderedDict()
_lock = threading.Lock()


def training_config(settings) -> TrainingConfig:
    """The run the sidebar asks for (its sizes, scaling and seed; the Training page's causal and steps), from the
    validated Settings every page reads: a ValueError names the field, the value and what is allowed. (The
    model's one layer is MHA: its variant and positions are the Training page's own, see training.py.)"""
    config = settings.config
    return TrainingConfig(
        d_model=config.d_model,
        d_k=config.d_k,
        heads=config.heads,
        causal=settings.train_causal,
        scaled=config.scaled,
        seed=config.seed,
        steps=settings.train_steps,
    )


def shared_run(config: TrainingConfig) -> Training | None:
    """The registry's run of this config, if one is kept (running or finished)."""
    with _lock:
        return _runs.get(config)


def start(config: TrainingConfig, slot: str = "training") -> Training:
    """This session's run of `config`: the registry's if it has one, else a new one started. A session has one
    run per `slot` (the page's run; each of the √d_k pair): refused (ValueError) while the slot's previous
    run of another config is still training."""
    mine = st.session_state.get(slot)
    if mine is not None and mine.running and mine.run.config != config:
        raise ValueError(
            f"this session is already training (step {len(mine.run.loss)} of {mine.run.config.steps}): "
            "stop it first, or wait for it to finish; one training per session"
        )
    with _lock:
        training = _runs.get(config)
        if training is None:
            training = Training(config, GRAMMAR, slots=HEAVY_SLOTS).start()
            _runs[config] = training
            log.info("training started: %s", config)
            finished = [key for key, run in _runs.items() if not run.running]
            while len(_runs) > RUNS_KEPT and finished:
                _runs.pop(finished.pop(0))
        _runs.move_to_end(config)
    st.session_state[slot] = training
    return training


def stop(training: Training) -> None:
    """Stop a run; it leaves the registry (a stopped run is not the config's run), this session keeps it."""
    training.stop()
    with _lock:
        if _runs.get(training.run.config) is training:
            del _runs[training.run.config]


def session_run(config: TrainingConfig, slot: str = "training") -> Training | None:
    """The run this page shows for `config`: this session's own (also a stopped one), else a shared one."""
    mine = st.session_state.get(slot)
    if mine is not None and mine.run.config == config:
        return mine
    return shared_run(config)


@st.cache_resource(max_entries=16, show_spinner=False)
def untrained(config: TrainingConfig) -> Run:
    """Step 0 alone (the random layer before any step), for the page before a run is started."""
    return train(config, GRAMMAR, stop=lambda: True)[1]


def measured_at(run: Run, checkpoint: Checkpoint) -> HeldOut:
    """The layer at a checkpoint over the held-out sentences: computed once per config and step for every
    session (a config's step s is the same weights in every run of it), not on each rerun."""
    return _measured(run.config, checkpoint.step, run, checkpoint)


@st.cache_resource(max_entries=STEPS_CACHED, show_spinner=False)
def _measured(config: TrainingConfig, step: int, _run: Run, _checkpoint: Checkpoint) -> HeldOut:
    return held_out_attention(_checkpoint, _run, HELD_OUT, GRAMMAR)


def trace_at(run: Run, checkpoint: Checkpoint, words: tuple[str, ...]):
    """The layer at a checkpoint on the sentence, computed once per config, step and sentence for every
    session (scrubbing back and forth, or a class on one link, computes each once)."""
    return _trace(run.config, checkpoint.step, words, run, checkpoint)


@st.cache_resource(max_entries=STEPS_CACHED, show_spinner=False)
def _trace(config: TrainingConfig, step: int, words: tuple[str, ...], _run: Run, _checkpoint: Checkpoint):
    return checkpoint_trace(_checkpoint, _run, words)


def lesson_at(run: Run, checkpoint: Checkpoint, words: tuple[str, ...]) -> Lesson:
    """Lecture 002's prediction, loss and update on the sentence at a checkpoint, once per config, step and
    sentence for every session."""
    return _lesson(run.config, checkpoint.step, words, run, checkpoint)


@st.cache_resource(max_entries=STEPS_CACHED, show_spinner=False)
def _lesson(config: TrainingConfig, step: int, words: tuple[str, ...], _run: Run, _checkpoint: Checkpoint) -> Lesson:
    return lesson(_checkpoint, _run, words)
