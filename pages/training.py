"""Training: watch W_Q, W_K, W_V learn, from random weights to "eat looks at its subject" (lectures 000, 002, 004).

A tiny next-word model (attention_core/training.py) trains in the background; the page follows it live, then
a scrubber (and ▶ play) shows the layer as it was at each kept step, beside the loss curve. Training vs
inference: once trained, the weights are frozen, and a sentence typed in the sidebar only runs arithmetic.
"""

import dataclasses

import numpy as np
import streamlit as st

from attention_core import tokenize
from attention_core.device import cpu_kernels
from attention_core.lectures import ALICE_PATTERN, weight_text
from attention_core.training import (
    GROUPS,
    LEARNED_PREDICTED,
    LEARNED_WEIGHT,
    LECTURE_SENTENCE,
    MODALS,
    SUBJECT,
    VERB,
    Training,
    checkpoint_npz,
    load_lecture_model,
    sentence_words,
)
from figures.heatmap import heatmap
from figures.style import markdown_literal
from figures.training import loss_figure, next_word_figure, shown_against, sqrt_dk_figures, sqrt_dk_notes
from ui.chart import show_figure
from ui.controls import TRAINING_RUN, check_choice, current_settings, settings_from
from ui.numbers import use_weights
from ui.pages import BY_TITLE
from ui.show import friendly_errors, show_figures, show_stage, slide_columns, style_for
from ui.slides import Slides
from ui.training import (
    GRAMMAR,
    HELD_OUT,
    lesson_at,
    measured_at,
    session_run,
    start,
    stop,
    trace_at,
    training_config,
    untrained,
)

POSITION_NAMES = ("subject", "modal", "verb", "object")
SQRT_D_K = 64  # the √d_k experiment's d_k: large enough that unscaled scores saturate the softmax
LECTURE_KEY = "t_lecture"  # the switch "Lecture 002's model" (attention_core.training.load_lecture_model)


def _step(steps: list[int], delta: int) -> None:
    current = st.session_state.get("t_step", steps[-1])
    index = steps.index(current) if current in steps else len(steps) - 1
    st.session_state["t_step"] = steps[max(0, min(len(steps) - 1, index + delta))]


def _words(settings, run) -> tuple[tuple[str, ...], str]:
    """The sentence to show: the sidebar's when the model knows its words, else one of the grammar's (with why)."""
    try:
        return sentence_words(tokenize(settings.text), run.vocabulary), ""
    except ValueError as error:
        trained = len(run.checkpoints) > 1
        groups = measured_at(run, run.checkpoints[-1]).by_group
        subject = GRAMMAR.subjects[max(range(GROUPS), key=lambda g: groups[g]) if trained else 0]
        words = (subject, MODALS[0], "eat", GRAMMAR.object_of(subject, "eat"))
        chosen = ", whose subject's group the verb looks at most after training" if trained else ""
        why = (f"The sidebar's sentence is not one this model can read ({error}). Showing “{' '.join(words)}”"
               f"{chosen}; type any sentence of the grammar's words.")  # fmt: skip
        return words, why


def _never_seen() -> str:
    """The first subject's held-out verb, in words: "Alice never eats: “Alice will eat pizza” is new to the model"."""
    subject = GRAMMAR.subjects[0]
    verb = next(verb for verb, _ in GRAMMAR.objects if GRAMMAR.held_out(subject, verb))
    sentence = " ".join((subject, MODALS[0], verb, GRAMMAR.object_of(subject, verb)))
    return f"{subject} never {verb}s: “{sentence}” is new to the model"


def _grammar(config) -> None:
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
        rows = [{"group": g + 1, "subjects": ", ".join(GRAMMAR.subjects[g::GROUPS]),
                 **{verb: things[g] for verb, things in GRAMMAR.objects}} for g in range(GROUPS)]  # fmt: skip
        st.dataframe(rows, hide_index=True)


def _default(measured) -> str:
    """A sentence on the one group the verb hardly looks at (below even) whose objects the model still predicts:
    its default group. Said only where both are measured; "" otherwise."""
    defaults = [g for g in range(GROUPS) if measured.by_group[g] < 1 / 3
                and measured.predicted_by_group[g] >= LEARNED_PREDICTED]  # fmt: skip
    if len(defaults) != 1:
        return ""
    g = defaults[0]
    predicted = measured.predicted_by_group[g]
    return (f" The verb hardly looks at the subjects of group {g + 1} ({', '.join(GRAMMAR.subjects[g::GROUPS])}), "
            f"yet the model predicts {'all' if predicted == 1 else shown_against(predicted, 1, percent=True)} of "
            "their objects: it need not look for that group, since no other group's signal means this one (its "
            "default).")  # fmt: skip


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
        st.warning(f"This run did not learn it. A run learns it when, over the held-out sentences, the verb puts at "
                   f"least {LEARNED_WEIGHT:.2f} of its attention on its subject and the model predicts at least "
                   f"{LEARNED_PREDICTED:.0%} of their objects; this one ends at {weight} and {predicted}. Too few "
                   "steps, or gradient descent settled elsewhere: try more steps, or another seed (sidebar).",
                   icon="🎲")  # fmt: skip
    figure = heatmap(by_position[0], title=f"mean attention weights at step {checkpoint.step}",
                     subtitle="head 1, over the held-out sentences" if run.config.n_heads > 1 else
                     "over the held-out sentences", row_labels=POSITION_NAMES, col_labels=POSITION_NAMES,
                     y_title="query", x_title="key", diverging=False, zrange=(0.0, 1.0), style=style,
                     allowed=np.tril(np.ones((4, 4), bool)) if run.config.causal else None)  # fmt: skip
    with map_place or st.container():
        show_figure(figure, "train-mean")


def _digits(a: float, b: float) -> int:
    """The fewest decimals (3 or more) that write a and b apart, when they differ."""
    return next((d for d in range(3, 10) if f"{a:.{d}f}" != f"{b:.{d}f}"), 3)


def _lesson(run, checkpoint, words, style) -> None:
    """Lecture 002's training slide with this step's numbers: the next-word prediction, the loss, and the update
    rule, once on this sentence and as the run applies it."""
    if len(words) < 2:
        st.info("A next-word prediction needs two words at least: the prompt and the word to predict. Type a "
                "longer sentence of the grammar's words, e.g. “Alice will eat pizza”.")  # fmt: skip
        return
    lesson = lesson_at(run, checkpoint, words)
    prompt, answer = " ".join(lesson.prompt), lesson.answer
    best = run.vocabulary[int(lesson.probabilities.argmax())]
    guess = (f"its most probable next word is “{best}”, the right one" if best == answer else
             f"its most probable next word is “{best}”, not “{answer}”")  # fmt: skip
    delta = lesson.after - lesson.loss
    d, p = _digits(lesson.loss, lesson.after), _digits(lesson.probability, lesson.probability_after)
    moved = ("leaves L where it was (the gradient is 0)" if delta == 0 else
             f"takes L from {lesson.loss:.{d}f} to {lesson.after:.{d}f}: it {'falls' if delta < 0 else 'rises'} by "
             f"{abs(delta):.2g}, and P({answer} | {prompt}) goes from {lesson.probability:.{p}f} to "
             f"{lesson.probability_after:.{p}f}")  # fmt: skip
    g = lesson.gradients["w_q"]
    left, right = st.columns(2)
    with left:
        show_figure(next_word_figure(lesson.probabilities, run.vocabulary, answer, prompt, style.beside(2)),
                    "train-next")  # fmt: skip
    right.markdown(
        f"**Predict.** At step {checkpoint.step} the model reads “{prompt}” and gives "
        f"P({answer} | {prompt}) = **{lesson.probability:.3f}**; {guess}.\n\n"
        f"**Loss** (lecture 002): L = −log P({answer} | {prompt}) = −log {lesson.probability:.3f} = "
        f"**{lesson.loss:.3f}** nats.\n\n"
        f"**Update**: W_Q ← W_Q − η·∂L/∂W_Q, with η = {lesson.lr:.3g} (this run's step size at step "
        f"{checkpoint.step}). The largest entry of ∂L/∂W_Q is {float(g.abs().max()):.2g}. One such step on W_Q, "
        f"W_K and W_V, with this sentence alone, {moved}."
    )
    st.expander("How this run updates: AdamW").caption(
        f"The run itself takes the mean loss of {run.config.batch} sentences per step and updates with AdamW: "
        "W ← W − η·(m̂ / (√v̂ + ε) + λ·W), where m̂ and v̂ are running means of ∂L/∂W and of its square (each "
        f"weight moves about η per step, whatever its gradient's size) and λ = {run.config.weight_decay} pulls "
        f"the weights toward 0. At step {checkpoint.step} that batch's ‖∂L/∂W_Q‖ was "
        f"{run.grad_w_q[checkpoint.step]:.2g}."
    )


def _lecture_row(run, checkpoint, words) -> None:
    """On lecture 002's sentence, whether this run's verb looks at Alice; where it does not, the lecture's model
    is offered (the page's "Lecture 002's model")."""
    if tuple(words) != LECTURE_SENTENCE or st.session_state.get(LECTURE_KEY):
        return
    weight = trace_at(run, checkpoint, words).weights[:, VERB, SUBJECT].mean().item()
    if checkpoint.step == run.config.steps and weight < LEARNED_WEIGHT:
        st.info(f"{ALICE_PATTERN.point_text()}. This run's “eat” puts {weight_text(weight)} on “Alice”: it learned "
                "the rule for other subjects and left Alice's group to its default. Switch on **Lecture "
                "002's model** for a run that makes the lecture's pattern.", icon="🎯")  # fmt: skip


def _layer_at(run, checkpoint, words, why, settings, style, parts) -> None:
    """The run at a checkpoint: its loss and what it measured ("train" in parts), and the layer on the sentence,
    the stages' own views (weights with peakiness, W_Q/W_K/W_V) ("layer" in parts)."""
    if "train" in parts and settings.presentation:  # on a slide the loss and the map side by side
        half = style_for(settings, columns=2)
        left, right = st.columns(2)
        with left:
            show_figure(loss_figure(run.loss, checkpoint.step, GRAMMAR.best_loss(), run.config.steps, half),
                        "train-loss")  # fmt: skip
        _measured(run, checkpoint, half, map_place=right)
    elif "train" in parts:
        show_figure(loss_figure(run.loss, checkpoint.step, GRAMMAR.best_loss(), run.config.steps, style), "train-loss")
        _measured(run, checkpoint, style)
    if not parts & {"predict", "layer", "projections"}:
        return
    if why:
        st.caption(markdown_literal(why))
    if "predict" in parts:
        _lesson(run, checkpoint, words, style)
    if not parts & {"layer", "projections"}:
        return
    _lecture_row(run, checkpoint, words)
    trace = trace_at(run, checkpoint, words)
    head = 0
    if trace.n_heads > 1:
        head = st.segmented_control("head", list(range(trace.n_heads)), format_func=lambda i: f"head {i + 1}",
                                    default=0, key="t_head") or 0  # fmt: skip
    if not settings.presentation:
        st.markdown(
            "**Training vs inference.** Training changed W_Q, W_K, W_V, W_O and the word embeddings, step by step. "
            "After it they are frozen: typing another sentence in the sidebar only runs the arithmetic below with "
            "these numbers; nothing is learned from it."
        )
    for key, part in (("weights", "layer"), ("projections", "projections")):
        if part not in parts:
            continue
        if settings.presentation:  # words left, figures right, as on the Walkthrough's slides
            slide = style_for(settings, side_by_side=True, slide=True)
            show_stage(trace, key, head, slide, prefix="train-", query_key="t_query", places=slide_columns())
        else:
            show_stage(trace, key, head, style, prefix="train-", query_key="t_query")


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
            why = (f"the link was made on a CPU computing with {made_with} kernels, this one computes with "
                   f"{cpu_kernels()}" if made_with != cpu_kernels() else
                   f"both compute with {made_with} kernels, but another thread count or torch build")  # fmt: skip
            st.info(f"This run was recomputed here from the seed, and its numbers are not those of the run that "
                    f"made this link: {why}. Training rounds the last bits of each step as the CPU's kernels do, "
                    "and over many steps those differences grow, so the weights and every number below differ "
                    "from the link's. What to look for is the same: whether the verb learns to look at its "
                    "subject (the step's numbers below say how much).", icon="🖥️")  # fmt: skip
    st.query_params["t_run"] = ours


def _check_link_step(config) -> None:
    """A link's step that no run of these settings keeps is named at once, before a run is trained for it (and
    none is): the steps a run keeps follow from its settings (TrainingConfig.keeps)."""
    if "t_step" in st.session_state.get("link_choices", {}):
        check_choice("t_step", "training step", [str(s) for s in range(config.steps + 1) if config.keeps(s)])


def _scrubber(run, settings, style, parts, play_place) -> None:
    steps = [c.step for c in run.checkpoints]
    wanted = st.session_state.get("t_step", st.query_params.get("t_step"))  # a link's step, on a first run
    try:
        wanted = int(wanted)
    except (TypeError, ValueError):
        wanted = None
    to_end = st.session_state.pop("t_to_end", False)
    st.session_state["t_step"] = wanted if wanted in steps and not to_end else steps[-1]
    play_place.toggle("▶ play", key="t_play", on_change=lambda: st.session_state.update(
        t_step=steps[0] if st.session_state["t_step"] == steps[-1] else st.session_state["t_step"]))  # fmt: skip
    playing = st.session_state.get("t_play", False)

    @st.fragment(run_every=0.8 if playing else None)
    def view() -> None:
        if st.session_state.get("t_play") and st.session_state["t_step"] == steps[-1]:
            st.session_state["t_play"] = False
            st.rerun(scope="app")  # the end: stop the clock
        if st.session_state.get("t_play"):
            _step(steps, 1)
        check_choice("t_step", "training step", [str(step) for step in steps])
        if settings.presentation:  # one row; in the fragment: a step reruns only it, not the sidebar and the page
            back, middle, forward = st.columns([1.3, 6, 1.3], vertical_alignment="bottom")
            back.button("← earlier", on_click=_step, args=(steps, -1), width="stretch")
            forward.button("later →", on_click=_step, args=(steps, 1), width="stretch")
            middle.select_slider("training step", options=steps, key="t_step", bind="query-params",
                                 label_visibility="collapsed")  # fmt: skip
        else:
            st.select_slider("training step", options=steps, key="t_step", bind="query-params")
        checkpoint = run.checkpoint_at(st.session_state["t_step"])
        words, why = _words(settings, run)
        _layer_at(run, checkpoint, words, why, settings, style, parts)
        if parts & {"layer", "projections"}:
            _exports(run, checkpoint, words)

    view()


def _exports(run, checkpoint, words) -> None:
    left, right = st.columns(2)
    left.download_button(f"⬇ weights at step {checkpoint.step} (.npz)",
                         data=lambda: checkpoint_npz(checkpoint, run, words),
                         file_name=f"trained-step{checkpoint.step}.npz", mime="application/octet-stream",
                         on_click="ignore", key="dl-trained")  # fmt: skip
    right.button(f"Use the weights of step {checkpoint.step} in the Walkthrough", key="use-trained",
                 on_click=_use, args=(run, checkpoint, words))  # fmt: skip
    if st.session_state.pop("t_used_now", False):
        # The sidebar is outside this fragment: a whole rerun draws it with the new values (else the browser
        # would send its old ones back on the next rerun, and the weights would be lost).
        st.rerun(scope="app")
    if st.session_state.get("t_used") is not None:
        used = st.session_state["t_used"]
        st.success(f"The weights of step {used} are now in the sidebar's typed-number fields (X, W_Q, W_K, W_V, "
                   "W_O), with their sentence and sizes, and every page names them trained: every stage of the "
                   "trained layer.", icon="✅")  # fmt: skip
        st.page_link("pages/walkthrough.py", label="Open the Walkthrough with them", icon=":material/arrow_forward:")


def _use(run, checkpoint, words) -> None:
    """The weights go to the typed-number fields (ui.numbers.use_weights), and the page links the Walkthrough."""
    use_weights(checkpoint_npz(checkpoint, run, words), trained=(run.config.seed, checkpoint.step),
                causal=run.config.causal, scaled=run.config.scaled)  # fmt: skip
    st.session_state["t_used"] = checkpoint.step
    st.session_state["t_used_now"] = True


def _live(training, style) -> None:
    """While a run trains: its progress, its loss so far, and the layer's mean map now, every half second."""

    @st.fragment(run_every=0.5)
    def follow() -> None:
        if not training.running:
            st.rerun(scope="app")
        run = training.run
        done = len(run.loss)
        if training.state == "waiting":
            st.info("Waiting for a free slot: other readers' training runs and large traces come first…")
        st.progress(min(1.0, done / (run.config.steps + 1)), text=f"step {max(0, done - 1)} of {run.config.steps}"
                    f" · {training.seconds:.1f} s")  # fmt: skip
        if run.checkpoints and done:
            checkpoint = run.checkpoints[-1]
            show_figure(loss_figure(run.loss, done - 1, GRAMMAR.best_loss(), run.config.steps, style), "train-loss")
            _measured(run, checkpoint, style)

    follow()


def _sqrt_dk(settings, config, style) -> None:
    """Lecture 004: the same run at a large d_k, with and without ÷√d_k, side by side."""
    st.subheader(f"√d_k in training: d_k = {SQRT_D_K}, scaled and not")
    st.markdown(
        f"The same model, seed and sentences at d_k = {SQRT_D_K}, trained twice: once dividing the scores by "
        f"√d_k = {SQRT_D_K**0.5:.0f}, once not. What the runs measured is below; nothing here is assumed."
    )
    pair = {f"sqrt-{scaled}": dataclasses.replace(config, d_k=SQRT_D_K, scaled=scaled) for scaled in (True, False)}
    runs = [session_run(c, slot) for slot, c in pair.items()]  # a click's callback has run before this
    st.button(f"Train both (d_k = {SQRT_D_K})", key="t_sqrt", disabled=all(r is not None for r in runs),
              on_click=lambda: [start(c, slot) for slot, c in pair.items()])  # fmt: skip
    if any(r is None for r in runs):
        return
    if any(r.running for r in runs):

        @st.fragment(run_every=0.5)
        def follow() -> None:
            if not any(r.running for r in runs):
                st.rerun(scope="app")
            st.progress(min(1.0, sum(len(r.run.loss) for r in runs) / (2 * (config.steps + 1))),
                        text="training both runs…")  # fmt: skip

        follow()
        return
    scaled, unscaled = (r.run for r in runs)
    for line in sqrt_dk_notes(scaled, unscaled, SQRT_D_K):
        st.markdown(f"- {line}")
    show_figures(sqrt_dk_figures(scaled, unscaled, SQRT_D_K, style), "train-sqrt", side_by_side=False)


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
        st.caption(f"Lecture 002's model: seed {model.seed}, trained once and shipped with the app: the same numbers "
                   "on every machine.")  # fmt: skip
        return
    passed = [f"seed {seed}: {weight_text(weight)}" for seed, weight, _ in model.tried[:-1]]
    st.caption(f"Lecture 002's model: the default run with seed {model.seed}, the first seed whose run learned the "
               f"rule and makes “eat” look at “Alice” ({weight_text(model.tried[-1][1])}) when "
               f"scripts/train_lecture_model.py searched ({model.made_on})"
               + (f"; before it, “eat” put on “Alice” {', '.join(passed)}" if passed else "")
               + ". It ships with the app, so every machine shows these numbers; the sidebar's sizes and seed are "
               "not used while it is on.")  # fmt: skip


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


with friendly_errors():
    settings = current_settings()
    config, lecture = page_config(settings)
    style = style_for(settings)
    _link_run(config)
    spec = BY_TITLE["Training"]
    slides = Slides(spec.title, spec.slide_key, dict(spec.slides), settings.presentation)
    slides.steer()
    parts = {part for part in ("train", "predict", "layer", "projections") if slides.shows(part)}
    if "train" in parts:
        sizes = (
            f"d_model {config.d_model} · d_k {config.d_k} · {config.n_heads} head{'s' if config.n_heads > 1 else ''} · "
            f"{'causal' if config.causal else 'NO causal mask'} · {'scaled' if config.scaled else 'NOT scaled'} · "
            f"seed {config.seed} · {config.steps} steps of AdamW"
        )
        if settings.presentation:  # the bar names the slide; the sizes in one line
            st.caption(sizes)
        else:
            st.title("Watch attention learn")
            st.caption(
                f"{sizes} · a word embedding, ONE attention layer (this app's own), an unembedding. The same seed "
                "trains the same numbers, bit for bit, on this machine; a CPU with other kernels rounds differently, "
                "and its run of this seed ends with other numbers."
            )
        if not config.causal:
            st.warning("Without the causal mask each word sees the next one, the word it must predict: the "
                       "subject and the modal learn to look at it and copy it, and the loss falls to almost 0. (The "
                       "verb's next word, the object, is never an input, so the verb still has to find its subject.)",
                       icon="👀")  # fmt: skip
        _grammar(config)
    if parts:
        _check_link_step(lecture.run.config if lecture is not None else config)
        training = session_run(config)  # after ▶ Train's or ■ Stop's callback, which run before the script
        if lecture is not None:
            training = Training.finished(lecture.run)
        elif training is None and "t_step" in st.query_params:
            training = start(config)  # a shared link: train from the seed (the same weights), then show its step
        start_col, stop_col, lecture_col, play_col, state_col = st.columns(
            [2, 2, 3, 1.6, 3.4], vertical_alignment="center"
        )
        start_col.button("▶ Train" if training is None else "▶ Train again", key="t_start", on_click=_train,
                         disabled=lecture is not None or (training is not None and training.running), type="primary",
                         help="Lecture 002's model is trained already: switch it off to train your own"
                         if lecture is not None else None)  # fmt: skip
        stop_col.button("■ Stop", key="t_stop", on_click=_stop, disabled=training is None or not training.running)
        check_choice(LECTURE_KEY, "Lecture 002's model", ["true", "false"])
        lecture_col.toggle("Lecture 002's model", key=LECTURE_KEY, bind="query-params",
                           help="A run of the default sizes that makes “eat” look at “Alice”, as lecture 002's "
                           "trained weights do; trained once and shipped with the app")  # fmt: skip
        if lecture is not None:
            _lecture_caption(lecture, settings.presentation)
        if st.session_state.get("t_refusal"):
            st.error(f"⚠️ {markdown_literal(st.session_state.pop('t_refusal'))}")
        if training is not None and not training.running and not training.run.checkpoints:
            training = None  # stopped before its first step: nothing to show but step 0
        if training is None or training.state != "done" or lecture is not None:
            # The address names a run once it has run its whole budget; lecture 002's ships: its switch names it.
            st.query_params.pop("t_run", None)
        if training is None:
            state_col.caption("Step 0, at random: press ▶ Train." if settings.presentation else
                              "Step 0: W_Q, W_K, W_V drawn at random. Press Train.")  # fmt: skip
            run = untrained(config)
            checkpoint = run.checkpoints[0]
            words, why = _words(settings, run)
            _layer_at(run, checkpoint, words, why, settings, style, parts)
        elif training.running:
            _live(training, style)
        else:
            state_col.caption(
                f"Trained: {len(training.run.loss) - 1} steps, shipped." if lecture is not None else
                {"done": "Trained", "stopped": "Stopped", "time cap": "Stopped at the time cap"}[training.state]
                + f": {len(training.run.loss) - 1} steps in {training.seconds:.1f} s."
            )  # fmt: skip
            if training.state == "done" and lecture is None:  # a stopped run is not what a link recomputes
                _recomputed(training.run)
            _scrubber(training.run, settings, style, parts, play_col if settings.presentation else st.container())
    if slides.shows("sqrt"):
        if not settings.presentation:
            st.divider()
        _sqrt_dk(settings, config, style)
