"""Decks: present a lecture as a list of views, or build one (add views from any page, reorder, note, export)."""

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import streamlit as st

from figures.style import markdown_literal
from ui import classroom, decks
from ui.show import friendly_errors
from ui.sidebar import current_settings
from ui.traces import heavy_slot

ROOT = Path(__file__).resolve().parents[2]
EXPORT_SECONDS = 900  # a deck with a real model's long text takes minutes on 2 cores
HTML = "deck_html"  # session state: (the deck exported, the file's bytes or None, what the export said)


def _load(text: str) -> None:
    """Load a deck (JSON or a link), whole or not at all; the message names what is wrong."""
    try:
        decks.replace(decks.deck_from_text(text))
        st.session_state["deck_loaded"] = st.session_state[decks.DECK].title
    except ValueError as error:
        st.session_state["deck_refusal"] = str(error)


def _load_shipped(name: str) -> None:
    decks.replace(decks.shipped()[name])


def _present(index: int = 0) -> None:
    decks.open_view(index, present=True)


def _views(deck: decks.Deck) -> None:
    """The open deck's views, each with its note and the buttons that move, open or delete it."""
    version = st.session_state.get(decks.VERSION, 0)
    key = f"deck_title_{version}"
    st.text_input(
        "deck title", value=deck.title, key=key, on_change=decks.set_title, args=(key,), max_chars=decks.MAX_TITLE
    )
    for i, view in enumerate(deck.views):
        number, what, note, buttons = st.columns([0.5, 4, 5, 3], vertical_alignment="center")
        number.markdown(f"**{i + 1}**")
        what.markdown(f"{markdown_literal(view.describe())}  \n`{markdown_literal(view.address[:90])}`")
        key = f"deck_note_{version}_{i}"
        note.text_input(
            f"note of view {i + 1}",
            value=view.note,
            key=key,
            on_change=decks.set_note,
            args=(i, key),
            max_chars=decks.MAX_NOTE,
            label_visibility="collapsed",
            placeholder="a note for the room",
        )
        row = buttons.container(horizontal=True, gap="small")
        row.button(
            "↑",
            key=f"deck_up_{version}_{i}",
            on_click=decks.move,
            args=(i, -1),
            disabled=i == 0,
            help=f"Move view {i + 1} up",
        )
        row.button(
            "↓",
            key=f"deck_down_{version}_{i}",
            on_click=decks.move,
            args=(i, 1),
            disabled=i == len(deck.views) - 1,
            help=f"Move view {i + 1} down",
        )
        row.button("▶", key=f"deck_open_{version}_{i}", on_click=_present, args=(i,), help=f"Present from view {i + 1}")
        row.button("✕", key=f"deck_del_{version}_{i}", on_click=decks.delete, args=(i,), help=f"Delete view {i + 1}")


def _export_html(deck: decks.Deck) -> None:
    """The deck as one HTML file (app_pages/decks/export.py), made in a process of its own, which runs the app's
    pages as this server does; the file's links open each view on this server's address."""
    parts = urlsplit(st.context.url or "")
    app_url = f"{parts.scheme}://{parts.netloc}" if parts.netloc else "http://localhost:8501"
    with tempfile.TemporaryDirectory() as folder, heavy_slot("Another heavy run is under way: waiting for it…"):
        source, out = Path(folder) / "deck.json", Path(folder) / "deck.html"
        source.write_text(deck.to_json(), encoding="utf-8")
        try:
            command = [sys.executable, "-m", "app_pages.decks.export", str(source), str(out), "--app", app_url]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=EXPORT_SECONDS)
            said = (done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()[-1:] or [""]
            data = out.read_bytes() if done.returncode == 0 and out.exists() else None
        except subprocess.TimeoutExpired:
            data, said = None, [f"the export took over {EXPORT_SECONDS // 60} minutes and was stopped"]
    st.session_state[HTML] = (deck, data, said[0].replace(str(source), "the deck").replace(str(out), ""))


def _one_file(deck: decks.Deck) -> None:
    """The button that makes the deck one HTML file, and the file to download once made."""
    st.button(
        "Make one HTML file of the deck",
        key="deck_make_html",
        on_click=lambda: _export_html(deck),
        help="Every view with its charts, words and formulas in one file that opens without this server or any "
        "network (a few seconds a view; minutes for a real model's long text)",
    )
    made = st.session_state.get(HTML)
    if made is None or made[0] != deck:  # a deck changed since: not its file
        return
    if made[1] is None:
        st.error(f"⚠️ Not made: {markdown_literal(made[2])}")
        return
    st.download_button(
        f"⬇ deck (.html, {len(made[1]) / 1e6:.1f} MB)",
        data=made[1],
        file_name=f"{re.sub(r'[^a-z0-9]+', '-', deck.title.lower()).strip('-') or 'deck'}.html",
        mime="text/html",
        on_click="ignore",
        key="deck_download_html",
    )
    st.caption("Open it in any browser: ← → step the views, Esc lists them. Controls do not turn in the file.")


def main() -> None:
    with friendly_errors():
        current_settings()  # checks the sidebar's values, as every page does
        st.title("Decks: a lecture as a list of views")
        st.markdown(
            "A deck is a titled list of views: a page with its settings, the slide to open and a note. **▶ Present** "
            "opens the first view in presentation mode; **→** steps through its slides and, past the last, opens the "
            "next view. Build your own with **+ add this view** (in the sidebar, or the bar in presentation mode) on "
            "any page, then reorder, note and export it here."
        )
        if "deck" in st.query_params:  # a deck link: loaded whole, or named and not loaded
            _load(st.query_params["deck"])
            del st.query_params["deck"]
        if st.session_state.get("deck_refusal"):
            st.error(f"⚠️ Not loaded: {markdown_literal(st.session_state.pop('deck_refusal'))}")
        if st.session_state.get("deck_loaded"):
            st.success(f"Loaded the deck “{markdown_literal(st.session_state.pop('deck_loaded'))}”.")

        st.header("The lectures' decks")
        shipped = decks.shipped()
        for name, deck in shipped.items():
            left, right = st.columns([6, 2], vertical_alignment="center")
            left.markdown(f"**{markdown_literal(deck.title)}** · {len(deck.views)} views")
            right.button("Open", key=f"deck_shipped_{name}", on_click=_load_shipped, args=(name,), width="stretch")

        st.header("The open deck")
        deck = st.session_state.get(decks.DECK)
        if deck is None:
            st.info("No deck is open: open a lecture's deck above, load one below, or add views from any page.")
        else:
            row = st.container(horizontal=True)
            row.button("▶ Present from view 1", key="deck_present", on_click=_present, type="primary")
            if classroom.room() is None:  # students' laptops follow every view presented (the Class page)
                row.button(
                    "🏫 Start a class",
                    key="deck_class",
                    on_click=classroom.start,
                    help="Students follow your views on their own screens: the join code shows above",
                )
            _views(deck)
            left, right = st.columns(2)
            left.download_button(
                "⬇ deck (.json)",
                data=deck.to_json(),
                file_name="deck.json",
                mime="application/json",
                on_click="ignore",
                key="deck_download",
            )
            right.button("Close the deck", key="deck_close", on_click=decks.replace, args=(None,))
            _one_file(deck)
            st.caption("The deck as one link (open it on the lecture machine; nothing leaves this one):")
            st.code(
                f"{(st.context.url or '/decks').split('?')[0]}?deck={deck.to_token()}", language=None, wrap_lines=True
            )

        st.header("Load a deck")
        uploaded = st.file_uploader("a deck's .json file", type=["json"], key="deck_file", max_upload_size=1)
        if uploaded is not None and st.button("Load this file", key="deck_load_file"):
            _load(uploaded.getvalue().decode("utf-8", errors="replace"))
            st.rerun()
        pasted = st.text_area("or paste a deck's JSON or its link", key="deck_paste", max_chars=decks.MAX_FILE)
        st.button(
            "Load",
            key="deck_load_text",
            on_click=lambda: _load(st.session_state.get("deck_paste", "")),
            disabled=not pasted,
        )


main()
