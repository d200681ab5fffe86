"""The class in the room: a lecturer starts a class and leads it; students join with its code and follow."""

import streamlit as st

from ui import classroom
from ui.show import friendly_errors
from ui.sidebar import current_settings


def main() -> None:
    with friendly_errors():
        current_settings()  # the sidebar's settings travel with the class's views
        links()
        st.title("The class in the room")
        here = classroom.room()
        if here is None:
            start_or_join()
        elif here["role"] == "lecturer":
            leading(here)
        else:
            st.markdown(f"You follow class **{here['code']}**. Every page shows the lecturer's view as it changes.")
            st.button("Leave the class", on_click=classroom.leave, key="class_leave")


def links() -> None:
    """A join link (`?join=CODE`) or the lecturer's private link (`?lead=CODE&key=SECRET`), taken once and removed
    from the address, so that the secret is never part of a view the class sees."""
    params = st.query_params
    if "join" in params:
        classroom.join(params.pop("join"))
    elif "lead" in params:
        classroom.lead_from_link(params.pop("lead"), params.pop("key", ""))
    else:
        return
    st.rerun()  # the class's bar is drawn above the page: a run from the top shows it


def start_or_join() -> None:
    left, right = st.columns(2)
    with left:
        st.subheader("Lecturer")
        st.markdown("Start a class: students follow every page you show, and answer questions before the reveal.")
        st.button("Start a class", on_click=classroom.start, key="class_start", type="primary")
    with right:
        st.subheader("Student")
        code = st.text_input("The class's code, from the screen", max_chars=6, key="class_code")
        st.button("Join", on_click=lambda: classroom.join(code), key="class_join", disabled=not code)


def leading(here: dict) -> None:
    code = here["code"]
    link = classroom.join_link(code)
    words, picture = st.columns([3, 2])
    with words:
        st.markdown(f"## Join code: `{code}`")
        st.markdown(
            f"Students open **{link}**, scan the code beside it, or type the code on this page. Everything you show "
            "from now on is shown to them within a couple of seconds."
        )
        st.markdown("Your private link, to lead from another window (keep it to yourself: whoever holds it leads):")
        st.code(f"/class?lead={code}&key={here['secret']}", language=None, wrap_lines=True)
        table = classroom.answers_csv()
        row = st.container(horizontal=True)
        row.download_button(
            "Download the answers (CSV)",
            table or "",
            file_name=f"class-{code}-answers.csv",
            mime="text/csv",
            key="class_csv",
            disabled=table is None,
            help="Every question asked, each option's count and the answer; no names",
        )
        row.button("End the class here", on_click=classroom.leave, key="class_end")
    with picture:
        classroom.show_qr(link, f"Scan to join class {code}: {link}")


main()
