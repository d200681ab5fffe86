"""The Training page's views of a run: the grammar it learns from, the layer at a step with what it measured,
lecture 002's one step of gradient descent, the scrubber, the live run, the exports and the √d_k experiment."""

from __future__ import annotations

import dataclasses

import numpy as np
import streamlit as st

from app_pages.training.gradient_step import lecture_row, show_lesson
from app_pages.walkthrough.spec import SPEC as WALKTHROUGH
from attention_core import tokenize
from attention_core.training import (
    GROUPS,
    LEARNED_PREDICTED,
    LEARNED_WEIGHT,
    MODALS,
    checkpoint_npz,
    sentence_words,
)
from figures.heatmap import heatmap
from figures.style import markdown_literal
from figures.training import loss_figure, shown_against, sqrt_dk_figures, sqrt_dk_notes
from ui.links import check_choice
from ui.live_chart import show_figure
from ui.numbers import use_weights
from ui.pages import navigation_page, timed_fragment
from ui.screen import slide_columns
from ui.show import show_figures, show_stage, style_for
from ui.training import (
    GRAMMAR,
    HELD_OUT,
    measured_at,
    session_run,
    start,
    trace_at,
)

POSITION_NAMES = ("subject", "modal", "verb", "object")
SQRT_D_K = 64  # the √d_k experiment's d_k: large enough that unscaled scores saturate the softmax


def _step(steps: list[int], delta: int) -> None:
    current = st.session_state.get("t_step", steps[-1])
    index = steps.index(current) if current in steps else len(steps) - 1
    st.session_state["t_step"] = steps[max(0, min(len(steps) - 1, index + delta))]


def sentence_for(settings, run) -> tuple[tuple[str, ...], str]:
    """The sentence to show: the sidebar's when the model knows its words, else one of the grammar's (with why)."""
    try:
        return sentence_words(tokenize(settings.text), run.vocabulary), ""
    except ValueError as error:
        trained = len(run.checkpoints) > 1
        groups = measured_at(run, run.checkpoints[-1]).by_group
        subject = GRAMMAR.subjects[max(range(GROUPS), key=lambda g: groups[g]) if trained else 0]
        words = (subject, MODALS[0], "eat", GRAMMAR.object_of(subject, "eat"))
        chosen = ", whose subject's group the verb looks at most after training" if trained else ""
        why = (
            f"The sidebar's sentence is not one this model can read ({error}). Showing “{' '.join(words)}”"
            f"{chosen}; type any sentence of the grammar's words."
        )
        return words, why


def _never_seen() -> str:
    """The first subject's held-out verb, in words: "Alice never eats: “Alice will eat pizza” is new to the model"."""
    subject = GRAMMAR.subjects[0]
    verb = next(verb for verb, _ in GRAMMAR.objects if GRAMMAR.held_out(subject, verb))
    sentence = " ".join((subject, MODALS[0], verb, GRAMMAR.object_of(subject, verb)))
    return f"{subject} never {verb}s: “{sentence}” is new to the model"


def show_grammar(config) -> None:
    with st.expander("The training sentences (the grammar)"):
        st.markdown(
            f"{config.sentences:,} sentences *subject modal verb object*, like lecture 002's “Alice will eat "
            f"pizza”. The {len(GRAMMAR.subjects)} subjects fall into {GROUPS} groups, each with its own taste: the "
            "object follows from the verb **and** the subject's group. So to predict the object, the verb's "
            "position must find out who the subject is: its query must learn to look at the subject's key. The "
            "modal and the verb are random choices; on new sentences the lowest possible loss is theirs alone "
            f"(**{GRAMMAR.best_loss():.3f}** nats per word; on its own training sentences a model can go a little "
            f"lower by remembering their random choices). Each subject is never paired with one verb in training "
            f"({_never_seen()}): those sentences are held out, to measure what was learned, not remembered. Each "
            f"step learns from {config.batch} of the sentences in turn."
        )
        rows = [
            {
                "group": g + 1,
                "subjects": ", ".join(GRAMMAR.subjects[g::GROUPS]),
                **{verb: things[g] for verb, things in GRAMMAR.objects},
            }
            for g in range(GROUPS)
        ]
        st.dataframe(rows, hide_index=True)


def _default(measured) -> str:
    """A sentence on the one group the verb hardly looks at (below even) whose objects the model still predicts:
    its default group. Said only where both are measured; "" otherwise."""
    defaults = [
        g for g in range(GROUPS) if measured.by_group[g] < 1 / 3 and measured.predicted_by_group[g] >= LEARNED_PREDICTED
    ]
    if len(defaults) != 1:
        return ""
    g = defaults[0]
    predicted = measured.predicted_by_group[g]
    return (
        f" The verb hardly looks at the subjects of group {g + 1} ({', '.join(GRAMMAR.subjects[g::GROUPS])}), "
        f"yet the model predicts {'all' if predicted == 1 else shown_against(predicted, 1, percent=True)} of "
        "their objects: it need not look for that group, since no other group's signal means this one (its "
        "default)."
    )


def _measured(run, checkpoint, style, map_place=None) -> None:
    """What the layer does at this step over the held-out sentences, in numbers and one map (in `map_place`, a
    column beside the loss on a slide)."""
    measured = measured_at(run, checkpoint)
    by_position, groups = measured.by_position.numpy(), measured.by_group  # [heads, 4, 4], per subject group
    chance = 1 / 3 if run.config.causal else 1 / 4
    weight = shown_against(measured.verb_to_subject, LEARNED_WEIGHT)
    predicted = shown_against(measured.predicted, LEARNED_PREDICTED, percent=True)
    st.markdown(
        f"**Step {checkpoint.step}**, over {len(HELD_OUT)} held-out sentences: the verb puts **{weight}** of its "
        f"attention on the subject (looking evenly would give {chance:.2f}), and the model predicts the object of "
        f"**{predicted}** of them. By subject group: {', '.join(f'{g:.2f}' for g in groups)}.{_default(measured)}"
    )
    if checkpoint.step == run.config.steps and not measured.learned:  # only a run's end is judged
        st.warning(
            f"This run did not learn it. A run learns it when, over the held-out sentences, the verb puts at "
            f"least {LEARNED_WEIGHT:.2f} of its attention on its subject and the model predicts at least "
            f"{LEARNED_PREDICTED:.0%} of their objects; this one ends at {weight} and {predicted}. Too few "
            "steps, or gradient descent settled elsewhere: try more steps, or another seed (sidebar).",
            icon="🎲",
        )
    figure = heatmap(
        by_position[0],
        title=f"mean attention weights at step {checkpoint.step}",
        subtitle="head 1, over the held-out sentences" if run.config.heads > 1 else "over the held-out sentences",
        row_labels=POSITION_NAMES,
        col_labels=POSITION_NAMES,
        y_title="query",
        x_title="key",
        diverging=False,
        zrange=(0.0, 1.0),
        style=style,
        allowed=np.tril(np.ones((4, 4), bool)) if run.config.causal else None,
    )
    with map_place or st.container():
        show_figure(figure, "train-mean")


def layer_at(run, checkpoint, words, why, settings, style, parts) -> None:
    """The run at a checkpoint: its loss and what it measured ("train" in parts), and the layer on the sentence,
    the stages' own views (weights with peakiness, W_Q/W_K/W_V) ("layer" in parts)."""
    if "train" in parts and settings.present:  # on a slide the loss and the map side by side
        half = style_for(settings, columns=2)
        left, right = st.columns(2)
        with left:
            show_figure(
                loss_figure(run.loss, checkpoint.step, GRAMMAR.best_loss(), run.config.steps, half), "train-loss"
            )
        _measured(run, checkpoint, half, map_place=right)
    elif "train" in parts:
        show_figure(loss_figure(run.loss, checkpoint.step, GRAMMAR.best_loss(), run.config.steps, style), "train-loss")
        _measured(run, checkpoint, style)
    if not parts & {"predict", "layer", "projections"}:
        return
    if why:
        st.caption(markdown_literal(why))
    if "predict" in parts:
        show_lesson(run, checkpoint, words, style)
    if not parts & {"layer", "projections"}:
        return
    lecture_row(run, checkpoint, words)
    trace = trace_at(run, checkpoint, words)
    head = 0
    if trace.heads > 1:
        head = (
            st.segmented_control(
                "head", list(range(trace.heads)), format_func=lambda i: f"head {i + 1}", default=0, key="t_head"
            )
            or 0
        )
    if not settings.present:
        st.markdown(
            "**Training vs inference.** Training changed W_Q, W_K, W_V, W_O and the word embeddings, step by step. "
            "After it they are frozen: typing another sentence in the sidebar only runs the arithmetic below with "
            "these numbers; nothing is learned from it."
        )
    for key, part in (("weights", "layer"), ("projections", "projections")):
        if part not in parts:
            continue
        if settings.present:  # words left, figures right, as on the Walkthrough's slides
            slide = style_for(settings, side_by_side=True, slide=True)
            show_stage(trace, key, head, slide, prefix="train-", query_key="t_query", places=slide_columns())
        else:
            show_stage(trace, key, head, style, prefix="train-", query_key="t_query")


def _play_key() -> str:
    """The key of play's switch now: a new one each time play has stopped itself (see scrubber)."""
    return f"t_play_{st.session_state.get('t_play_stops', 0)}"


def scrubber(run, settings, style, parts, play_place) -> None:
    steps = [c.step for c in run.checkpoints]
    wanted = st.session_state.get("t_step", st.query_params.get("t_step"))  # a link's step, on a first run
    try:
        wanted = int(wanted)
    except (TypeError, ValueError):
        wanted = None
    to_end = st.session_state.pop("t_to_end", False)
    st.session_state["t_step"] = wanted if wanted in steps and not to_end else steps[-1]
    # Play's switch has a key of its own each time play has stopped itself at the last step, so that the switch
    # drawn then is a new one, off. A browser that has not yet drawn it off and sends an action (a click on Leave, a
    # slide's key) sends the old switch's "on" with it: under one key that read as a press of play, and play began
    # again from step 0. Under the old key it is the old switch's, whose change Streamlit still reports: ignored.
    play = _play_key()

    def pressed() -> None:  # play turned on at the last step plays from the first
        if play == _play_key() and st.session_state.get(play) and st.session_state["t_step"] == steps[-1]:
            st.session_state["t_step"] = steps[0]

    play_place.toggle("▶ play", key=play, on_change=pressed)
    playing = st.session_state.get(play, False)

    @timed_fragment(0.8 if playing else None)
    def view() -> None:
        if st.session_state.get(play) and st.session_state["t_step"] == steps[-1]:
            st.session_state["t_play_stops"] = st.session_state.get("t_play_stops", 0) + 1
            st.rerun(scope="app")  # the end: stop the clock, and draw play's switch anew, off
        if st.session_state.get(play):
            _step(steps, 1)
        check_choice("t_step", "training step", [str(step) for step in steps])
        if settings.present:  # one row; in the fragment: a step reruns only it, not the sidebar and the page
            back, middle, forward = st.columns([1.3, 6, 1.3], vertical_alignment="bottom")
            back.button("← earlier", on_click=_step, args=(steps, -1), width="stretch")
            forward.button("later →", on_click=_step, args=(steps, 1), width="stretch")
            middle.select_slider(
                "training step", options=steps, key="t_step", bind="query-params", label_visibility="collapsed"
            )
        else:
            st.select_slider("training step", options=steps, key="t_step", bind="query-params")
        checkpoint = run.checkpoint_at(st.session_state["t_step"])
        words, why = sentence_for(settings, run)
        layer_at(run, checkpoint, words, why, settings, style, parts)
        if parts & {"layer", "projections"}:
            _exports(run, checkpoint, words)

    view()


def _exports(run, checkpoint, words) -> None:
    left, right = st.columns(2)
    left.download_button(
        f"⬇ weights at step {checkpoint.step} (.npz)",
        data=lambda: checkpoint_npz(checkpoint, run, words),
        file_name=f"trained-step{checkpoint.step}.npz",
        mime="application/octet-stream",
        on_click="ignore",
        key="dl-trained",
    )
    right.button(
        f"Use the weights of step {checkpoint.step} in the Walkthrough",
        key="use-trained",
        on_click=_use,
        args=(run, checkpoint, words),
    )
    if st.session_state.pop("t_used_now", False):
        # The sidebar is outside this fragment: a whole rerun draws it with the new values (else the browser
        # would send its old ones back on the next rerun, and the weights would be lost).
        st.rerun(scope="app")
    if st.session_state.get("t_used") is not None:
        used = st.session_state["t_used"]
        st.success(
            f"The weights of step {used} are now in the sidebar's typed-number fields (X, W_Q, W_K, W_V, "
            "W_O), with their sentence and sizes, and every page names them trained: every stage of the "
            "trained layer.",
            icon="✅",
        )
        st.page_link(
            navigation_page(WALKTHROUGH.path), label="Open the Walkthrough with them", icon=":material/arrow_forward:"
        )


def _use(run, checkpoint, words) -> None:
    """The weights go to the typed-number fields (ui.numbers.use_weights), and the page links the Walkthrough."""
    use_weights(
        checkpoint_npz(checkpoint, run, words),
        trained=(run.config.seed, checkpoint.step),
        causal=run.config.causal,
        scaled=run.config.scaled,
    )
    st.session_state["t_used"] = checkpoint.step
    st.session_state["t_used_now"] = True


def show_live(training, style) -> None:
    """While a run trains: its progress, its loss so far, and the layer's mean map now, every half second."""

    @timed_fragment(0.5)
    def follow() -> None:
        if not training.running:
            st.rerun(scope="app")
        run = training.run
        done = len(run.loss)
        if training.state == "waiting":
            st.info("Waiting for a free slot: other readers' training runs and large traces come first…")
        st.progress(
            min(1.0, done / (run.config.steps + 1)),
            text=f"step {max(0, done - 1)} of {run.config.steps} · {training.seconds:.1f} s",
        )
        if run.checkpoints and done:
            checkpoint = run.checkpoints[-1]
            show_figure(loss_figure(run.loss, done - 1, GRAMMAR.best_loss(), run.config.steps, style), "train-loss")
            _measured(run, checkpoint, style)

    follow()


def sqrt_dk_experiment(settings, config, style) -> None:
    """Lecture 004: the same run at a large d_k, with and without ÷√d_k, side by side."""
    st.subheader(f"√d_k in training: d_k = {SQRT_D_K}, scaled and not")
    st.markdown(
        f"The same model, seed and sentences at d_k = {SQRT_D_K}, trained twice: once dividing the scores by "
        f"√d_k = {SQRT_D_K**0.5:.0f}, once not. What the runs measured is below; nothing here is assumed."
    )
    pair = {f"sqrt-{scaled}": dataclasses.replace(config, d_k=SQRT_D_K, scaled=scaled) for scaled in (True, False)}
    runs = [session_run(c, slot) for slot, c in pair.items()]  # a click's callback has run before this
    st.button(
        f"Train both (d_k = {SQRT_D_K})",
        key="t_sqrt",
        disabled=all(r is not None for r in runs),
        on_click=lambda: [start(c, slot) for slot, c in pair.items()],
    )
    if any(r is None for r in runs):
        return
    if any(r.running for r in runs):

        @timed_fragment(0.5)
        def follow() -> None:
            if not any(r.running for r in runs):
                st.rerun(scope="app")
            st.progress(
                min(1.0, sum(len(r.run.loss) for r in runs) / (2 * (config.steps + 1))), text="training both runs…"
            )

        follow()
        return
    scaled, unscaled = (r.run for r in runs)
    for line in sqrt_dk_notes(scaled, unscaled, SQRT_D_K):
        st.markdown(f"- {line}")
    # Presented, the three side by side: stacked, they ran 600 px past a 1400 x 900 screen (seen in a deck's file)
    show_figures(sqrt_dk_figures(scaled, unscaled, SQRT_D_K, style), "train-sqrt", side_by_side=settings.present)
