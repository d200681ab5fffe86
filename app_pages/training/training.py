"""Training: watch W_Q, W_K, W_V learn, from random weights to "eat looks at its subject" (lectures 000, 002, 004).

A tiny next-word model (attention_core/training.py) trains in the background; the page follows it live, then
a scrubber (and ▶ play) shows the layer as it was at each kept step, beside the loss curve. Training vs
inference: once trained, the weights are frozen, and a sentence typed in the sidebar only runs arithmetic.
"""

import streamlit as st

from app_pages.training.spec import SPEC
from app_pages.training.views import layer_at, scrubber, sentence_for, show_grammar, show_live, sqrt_dk_experiment
from attention_core.device import cpu_kernels
from attention_core.lectures import weight_text
from attention_core.training import (
    Training,
    load_lecture_model,
)
from figures.style import markdown_literal
from ui.links import TRAINING_RUN, check_choice
from ui.show import friendly_errors, style_for
from ui.sidebar import current_settings, settings_from
from ui.slides import Slides
from ui.training import (
    LECTURE_KEY,
    session_run,
    start,
    stop,
    training_config,
    untrained,
)


def _link_run(config) -> None:
    """On the page's first run in a session, note the run a link names (t_run), for the config it opened with
    (a value that is not a run's fingerprint is named by app.py's link check, and left out here)."""
    if "t_link_run" not in st.session_state:
        raw = st.query_params.get("t_run")
        st.session_state["t_link_run"] = (config, raw if raw and not TRAINING_RUN.refusal(raw) else None)


def _recomputed(run) -> None:
    """Say whether this finished run has the numbers of the run that made the link, and put its own fingerprint
    in the address (t_run) so that a copied link can be checked the same way where it is opened."""
    ours = f"{run.fingerprint()}-{cpu_kernels()}"
    config, theirs = st.session_state.get("t_link_run") or (None, None)
    if theirs and config == run.config:
        if theirs == ours:
            st.caption("The same numbers, bit for bit, as the run that made this link.")
        else:
            made_with = theirs.split("-", 1)[1]
            why = (
                f"the link was made on a CPU computing with {made_with} kernels, this one computes with {cpu_kernels()}"
                if made_with != cpu_kernels()
                else f"both compute with {made_with} kernels, but another thread count or torch build"
            )
            st.info(
                f"This run was recomputed here from the seed, and its numbers are not those of the run that "
                f"made this link: {why}. Training rounds the last bits of each step as the CPU's kernels do, "
                "and over many steps those differences grow, so the weights and every number below differ "
                "from the link's. What to look for is the same: whether the verb learns to look at its "
                "subject (the step's numbers below say how much).",
                icon="🖥️",
            )
    st.query_params["t_run"] = ours


def _check_link_step(config) -> None:
    """A link's step that no run of these settings keeps is named at once, before a run is trained for it (and
    none is): the steps a run keeps follow from its settings (TrainingConfig.keeps)."""
    if "t_step" in st.session_state.get("link_choices", {}):
        check_choice("t_step", "training step", [str(s) for s in range(config.steps + 1) if config.keeps(s)])


def page_config(settings):
    """The run this page shows, and lecture 002's model when it is that run: the sidebar's config, or with
    "Lecture 002's model" on, the shipped model's (the default sizes, its seed)."""
    config = training_config(settings)
    if not st.session_state.get(LECTURE_KEY, st.query_params.get(LECTURE_KEY) == "true"):
        return config, None
    model = load_lecture_model()
    return model.run.config, model


def _lecture_caption(model, short: bool) -> None:
    """What "Lecture 002's model" is: which seed, how it was found, and that it ships (`short`: in one line)."""
    if short:
        st.caption(
            f"Lecture 002's model: seed {model.seed}, trained once and shipped with the app: the same numbers "
            "on every machine."
        )
        return
    passed = [f"seed {seed}: {weight_text(weight)}" for seed, weight, _ in model.tried[:-1]]
    st.caption(
        f"Lecture 002's model: the default run with seed {model.seed}, the first seed whose run learned the "
        f"rule and makes “eat” look at “Alice” ({weight_text(model.tried[-1][1])}) when "
        f"scripts/train_lecture_model.py searched ({model.made_on})"
        + (f"; before it, “eat” put on “Alice” {', '.join(passed)}" if passed else "")
        + ". It ships with the app, so every machine shows these numbers; the sidebar's sizes and seed are "
        "not used while it is on."
    )


def _train() -> None:
    """▶ Train: this session's run of the sidebar's config (a finished one is trained again, from the seed)."""
    try:
        config, _ = page_config(settings_from(st.session_state))
        finished = session_run(config)
        if finished is not None and not finished.running:
            stop(finished)  # forget it: "again" trains anew, and the page follows it live
        st.session_state["t_to_end"] = True  # follow the new run to its end
        start(config)
    except ValueError as error:
        st.session_state["t_refusal"] = str(error)


def _stop() -> None:
    training = st.session_state.get("training")
    if training is not None:
        stop(training)
        training.join(timeout=2)  # it stops before its next step (a run still waiting for a slot, when it gets one)


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        config, lecture = page_config(settings)
        style = style_for(settings)
        _link_run(config)
        spec = SPEC
        slides = Slides(spec.title, spec.slide_key, dict(spec.slides), settings.present)
        slides.steer()
        parts = {part for part in ("train", "predict", "layer", "projections") if slides.shows(part)}
        if "train" in parts:
            introduce(settings, config)
        if parts:
            the_run(settings, config, lecture, style, parts)
        if slides.shows("sqrt"):
            if not settings.present:
                st.divider()
            sqrt_dk_experiment(settings, config, style)


def introduce(settings, config) -> None:
    """The sizes of the run, what the model is, and the grammar it learns from."""
    sizes = (
        f"d_model {config.d_model} · d_k {config.d_k} · {config.heads} head{'s' if config.heads > 1 else ''} · "
        f"{'causal' if config.causal else 'NO causal mask'} · {'scaled' if config.scaled else 'NOT scaled'} · "
        f"seed {config.seed} · {config.steps} steps of AdamW"
    )
    if settings.present:  # the bar names the slide; the sizes in one line
        st.caption(sizes)
    else:
        st.title("Watch attention learn")
        st.caption(
            f"{sizes} · a word embedding, ONE attention layer (this app's own), an unembedding. The same seed "
            "trains the same numbers, bit for bit, on this machine; a CPU with other kernels rounds differently, "
            "and its run of this seed ends with other numbers."
        )
    if not config.causal:
        st.warning(
            "Without the causal mask each word sees the next one, the word it must predict: the "
            "subject and the modal learn to look at it and copy it, and the loss falls to almost 0. (The "
            "verb's next word, the object, is never an input, so the verb still has to find its subject.)",
            icon="👀",
        )
    show_grammar(config)


def the_run(settings, config, lecture, style, parts: set[str]) -> None:
    """The buttons, the switch to lecture 002's model, and the run: at step 0, live, or done with its scrubber."""
    _check_link_step(lecture.run.config if lecture is not None else config)
    training = session_run(config)  # after ▶ Train's or ■ Stop's callback, which run before the script
    if lecture is not None:
        training = Training.finished(lecture.run)
    elif training is None and "t_step" in st.query_params:
        training = start(config)  # a shared link: train from the seed (the same weights), then show its step
    start_col, stop_col, lecture_col, play_col, state_col = st.columns([2, 2, 3, 1.6, 3.4], vertical_alignment="center")
    start_col.button(
        "▶ Train" if training is None else "▶ Train again",
        key="t_start",
        on_click=_train,
        disabled=lecture is not None or (training is not None and training.running),
        type="primary",
        help="Lecture 002's model is trained already: switch it off to train your own" if lecture is not None else None,
    )
    stop_col.button("■ Stop", key="t_stop", on_click=_stop, disabled=training is None or not training.running)
    check_choice(LECTURE_KEY, "Lecture 002's model", ["true", "false"])
    lecture_col.toggle(
        "Lecture 002's model",
        key=LECTURE_KEY,
        bind="query-params",
        help="A run of the default sizes that makes “eat” look at “Alice”, as lecture 002's "
        "trained weights do; trained once and shipped with the app",
    )
    if lecture is not None:
        _lecture_caption(lecture, settings.present)
    if st.session_state.get("t_refusal"):
        st.error(f"⚠️ {markdown_literal(st.session_state.pop('t_refusal'))}")
    if training is not None and not training.running and not training.run.checkpoints:
        training = None  # stopped before its first step: nothing to show but step 0
    if training is None or training.state != "done" or lecture is not None:
        # The address names a run once it has run its whole budget; lecture 002's ships: its switch names it.
        st.query_params.pop("t_run", None)
    if training is None:
        state_col.caption(
            "Step 0, at random: press ▶ Train."
            if settings.present
            else "Step 0: W_Q, W_K, W_V drawn at random. Press Train."
        )
        run = untrained(config)
        checkpoint = run.checkpoints[0]
        words, why = sentence_for(settings, run)
        layer_at(run, checkpoint, words, why, settings, style, parts)
    elif training.running:
        show_live(training, style)
    else:
        state_col.caption(
            f"Trained: {len(training.run.loss) - 1} steps, shipped."
            if lecture is not None
            else {"done": "Trained", "stopped": "Stopped", "time cap": "Stopped at the time cap"}[training.state]
            + f": {len(training.run.loss) - 1} steps in {training.seconds:.1f} s."
        )
        if training.state == "done" and lecture is None:  # a stopped run is not what a link recomputes
            _recomputed(training.run)
        scrubber(training.run, settings, style, parts, play_col if settings.present else st.container())


main()
