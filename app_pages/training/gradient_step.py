"""Lecture 002's one step of gradient descent, with the trained layer's live numbers: the loss of a sentence, the
gradient of W_Q, the step, and the loss after it."""

from __future__ import annotations

import streamlit as st

from attention_core.lectures import ALICE_PATTERN, weight_text
from attention_core.training import (
    LEARNED_WEIGHT,
    LECTURE_SENTENCE,
    SUBJECT,
    VERB,
)
from figures.training import next_word_figure
from ui.live_chart import show_figure
from ui.training import (
    LECTURE_KEY,
    lesson_at,
    trace_at,
)


def _digits(a: float, b: float) -> int:
    """The fewest decimals (3 or more) that write a and b apart, when they differ."""
    return next((d for d in range(3, 10) if f"{a:.{d}f}" != f"{b:.{d}f}"), 3)


def show_lesson(run, checkpoint, words, style) -> None:
    """Lecture 002's training slide with this step's numbers: the next-word prediction, the loss, and the update
    rule, once on this sentence and as the run applies it."""
    if len(words) < 2:
        st.info(
            "A next-word prediction needs two words at least: the prompt and the word to predict. Type a "
            "longer sentence of the grammar's words, e.g. “Alice will eat pizza”."
        )
        return
    lesson = lesson_at(run, checkpoint, words)
    prompt, answer = " ".join(lesson.prompt), lesson.answer
    best = run.vocabulary[int(lesson.probabilities.argmax())]
    guess = (
        f"its most probable next word is “{best}”, the right one"
        if best == answer
        else f"its most probable next word is “{best}”, not “{answer}”"
    )
    delta = lesson.after - lesson.loss
    d, p = _digits(lesson.loss, lesson.after), _digits(lesson.probability, lesson.probability_after)
    moved = (
        "leaves L where it was (the gradient is 0)"
        if delta == 0
        else f"takes L from {lesson.loss:.{d}f} to {lesson.after:.{d}f}: it {'falls' if delta < 0 else 'rises'} by "
        f"{abs(delta):.2g}, and P({answer} | {prompt}) goes from {lesson.probability:.{p}f} to "
        f"{lesson.probability_after:.{p}f}"
    )
    g = lesson.gradients["w_q"]
    left, right = st.columns(2)
    with left:
        show_figure(
            next_word_figure(lesson.probabilities, run.vocabulary, answer, prompt, style.beside(2)), "train-next"
        )
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


def lecture_row(run, checkpoint, words) -> None:
    """On lecture 002's sentence, whether this run's verb looks at Alice; where it does not, the lecture's model
    is offered (the page's "Lecture 002's model")."""
    if tuple(words) != LECTURE_SENTENCE or st.session_state.get(LECTURE_KEY):
        return
    weight = trace_at(run, checkpoint, words).weights[:, VERB, SUBJECT].mean().item()
    if checkpoint.step == run.config.steps and weight < LEARNED_WEIGHT:
        st.info(
            f"{ALICE_PATTERN.point_text()}. This run's “eat” puts {weight_text(weight)} on “Alice”: it learned "
            "the rule for other subjects and left Alice's group to its default. Switch on **Lecture "
            "002's model** for a run that makes the lecture's pattern.",
            icon="🎯",
        )
