"""The class's bar above every page: for a student, whom they follow and how (following, on their own, the
link lost), the question and its reveal; for the lecturer, the class's code, "Ask the class" and the answers as they
come. The class's state and its store are ui/classroom.py's."""

from __future__ import annotations

import streamlit as st

from classroom import classes, questions
from classroom.classes import Refused
from classroom.store import StoreDown
from figures.style import markdown_literal
from ui.classroom import (
    POLL_SECONDS,
    REFUSAL,
    STUDENT,
    break_away,
    class_store,
    follow,
    refused,
    rejoin,
    room,
    send_pending,
)
from ui.pages import timed_fragment


def ask(kind: str) -> None:
    """Ask the class a question of kind `kind` (classroom.questions) about the sidebar's sentence, as the pages
    compute it."""
    from ui.sidebar import current_settings
    from ui.traces import trace_for

    here = room()
    try:
        text, options, answer = questions.BY_KEY[kind].build(trace_for(current_settings()))
        classes.ask(class_store(), here["code"], here["secret"], text, options, answer)
    except (Refused, StoreDown, ValueError) as error:
        refused("the question was not asked", error)


def reveal() -> None:
    here = room()
    try:
        classes.reveal(class_store(), here["code"], here["secret"])
    except (Refused, StoreDown) as error:
        refused("the answer was not revealed", error)


def _answer(key: str, widget: str) -> None:
    here = room()
    try:
        classes.answer(class_store(), here["code"], key, st.session_state[STUDENT], st.session_state[widget])
    except (Refused, StoreDown) as error:
        refused("your answer was not taken", error)


def class_bar(page: str, asked_on: tuple[str, ...]) -> None:
    """Above every page (`page`: its title): the class's bar, and any refusal of the run before. `asked_on`: the
    titles of the pages whose numbers a question asks of (their specs' `questions`)."""
    if refusal := st.session_state.pop(REFUSAL, None):
        st.warning(markdown_literal(refusal), icon="🏫")
    here = room()
    if here is not None and here["role"] == "student":
        _student_bar()
    elif here is not None:
        _lecturer_bar(page, asked_on)


def _student_bar() -> None:
    _check_the_class()
    here = room()
    if here is None:
        return
    code = here["code"]
    row = st.container(horizontal=True, vertical_alignment="center")
    if here.get("lost"):
        row.caption(f"The link to class {code} is lost: this is the last view it showed. It resumes by itself.")
    elif here["away"]:
        row.caption(f"On your own: class {code} goes on without you.")
        row.button("Rejoin the class", on_click=rejoin, key="class_rejoin")
    else:
        row.caption(f"Following the lecturer of class {code}: this page changes when theirs does.")
        row.button("Break away", on_click=break_away, key="class_away")
    _question_for_student(code)


@timed_fragment(POLL_SECONDS)
def _check_the_class() -> None:
    """A student's page asks the class every POLL_SECONDS, and draws nothing: only when the lecturer's view, the
    question or the link to the store has changed does the page run again (from the top, bar and all). A class
    of 60 checks 60 times a second, so a check must cost next to nothing (bench/bench_class.py)."""
    follow()  # a new view: the page runs again
    here = room()
    if here is None or here["role"] != "student":
        return
    try:
        asked = classes.question(class_store(), here["code"])
        shown = (here.get("lost"), asked and (asked.key, asked.revealed))
    except StoreDown:
        shown = (True, here.get("bar", (None, None))[1])
    if shown != here.setdefault("bar", shown):
        here["bar"] = shown
        st.rerun()


def _question_now(code: str) -> tuple[classes.Question | None, dict[str, int]]:
    """The class's question and its answers so far (StoreDown where the store cannot be reached)."""
    asked = classes.question(class_store(), code)
    return asked, classes.tally(class_store(), code) if asked else {}


def _none_or_revealed(asked: classes.Question | None, counts: dict[str, int]) -> bool:
    """True where there is nothing more to draw: no question, or one revealed (its distribution drawn here)."""
    if asked is not None and asked.revealed:
        _distribution(asked, counts)
    return asked is None or asked.revealed


def _question_for_student(code: str) -> None:
    try:
        asked, counts = _question_now(code)
    except StoreDown:
        return
    if _none_or_revealed(asked, counts):
        return
    widget = f"class_answer_{asked.key}"
    st.radio(
        asked.text,
        asked.options,
        index=None,
        key=widget,
        on_change=_answer,
        args=(asked.key, widget),
        horizontal=True,
        help="One answer each, anonymous; change it until the lecturer reveals the answer.",
    )


def _distribution(asked: classes.Question, counts: dict[str, int]) -> None:
    """The class's answers as bars, the right one named (from the numbers on screen)."""
    import pandas as pd

    st.markdown(f"**{markdown_literal(asked.text)}** The answer: **{markdown_literal(asked.answer)}** ✓")
    right, other = "the answer", "other answers"
    table = pd.DataFrame(
        {
            "option": list(counts),
            right: [n if option == asked.answer else 0 for option, n in counts.items()],
            other: [0 if option == asked.answer else n for option, n in counts.items()],
        }
    )
    st.bar_chart(
        table,
        x="option",
        y=[right, other],
        color=["#1a7f5a", "#8a8a8a"],
        horizontal=True,
        sort=False,
        x_label="",
        y_label="students",
        height=80 + 28 * len(counts),
    )


def _lecturer_bar(page: str, asked_on: tuple[str, ...]) -> None:
    here = room()
    code = here["code"]
    row = st.container(horizontal=True, vertical_alignment="center")
    row.caption(f"Leading class **{code}**: students join with the code on the Class page, or at /class?join={code}")
    with row.popover("Ask the class", help="A question on the numbers on screen; the answer comes from them"):
        if page not in asked_on:  # other pages show other numbers (a real model's, a training run's)
            st.caption(
                f"A question's answer comes from the numbers of the {' and '.join(asked_on)} pages: "
                "open one of them to ask."
            )
        for kind in questions.KINDS:
            st.button(
                kind.label,
                on_click=ask,
                args=(kind.key,),
                key=f"class_ask_{kind.key}",
                disabled=page not in asked_on,
            )
    _answers_so_far(code)


@timed_fragment(POLL_SECONDS)
def _answers_so_far(code: str) -> None:
    here = room()
    if here is None:
        return
    send_pending(here)
    try:
        asked, counts = _question_now(code)
        here["lost"] = "pending" in here  # reached again, with the last view still to send
    except StoreDown:
        here["lost"] = True
    if here.get("lost"):
        st.caption(
            "The class store is unreachable: your students keep your last view, and get this one when it "
            "returns. You keep presenting."
        )
        return
    if _none_or_revealed(asked, counts):
        return
    row = st.container(horizontal=True, vertical_alignment="center")
    row.caption(f"{markdown_literal(asked.text)} {sum(counts.values())} answered so far.")
    row.button("Reveal", on_click=reveal, key="class_reveal")
