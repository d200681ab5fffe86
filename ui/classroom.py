"""The class in the room on every page: the lecturer's view goes to the class after each run; a follower's
page checks the class every POLL_SECONDS and shows the lecturer's view when it changes, drawn in turn; the join
link and its QR code; the answers as CSV. The bar above every page is ui/class_bar.py.

The class's rules and store are classroom/ (no Streamlit there). The store is chosen by ATTENTION_CLASS_STORE:
unset, the server's own memory (one server); "sqlite:PATH", a SQLite file in WAL mode; "redis://host:port/db",
Redis, which replicas share. A store that cannot be reached is said on the page, and the page keeps what it shows."""

from __future__ import annotations

import base64
import contextlib
import functools
import html
import io
import os
import secrets
import threading
from urllib.parse import urlencode, urlsplit

import streamlit as st

from classroom import classes
from classroom.classes import Refused
from classroom.store import MemoryStore, RedisStore, SqliteStore, Store, StoreDown
from figures.style import markdown_literal
from ui import decks
from ui.controls import log
from ui.links import refused_values
from ui.pages import BY_TITLE, by_address

STORE_ENV = "ATTENTION_CLASS_STORE"
POLL_SECONDS = 1.0  # a follower's page asks the class this often: the lecturer's step shows within ~1–2 s
CLASS = "class_room"  # session state: {"code", "role", "secret" (the lecturer's), "version", "away", "sent"}
IN_TURN = "class_in_turn"  # session state: this run draws a follower's new view (in_turn)
FOLLOWERS_AT_ONCE = 1
FOLLOWER_TURNS = threading.BoundedSemaphore(FOLLOWERS_AT_ONCE)
TURN_WAIT_SECONDS = 5.0  # a page whose turn has not come by then is drawn anyway: no page waits on a slow one
FOLLOWED = "class_followed"  # session state: the lecturer's view to show on the next run (follow)
REFUSAL = "class_refusal"  # session state: the last refusal, said by the class's bar on the next run
STUDENT = "class_student"  # session state: this browser session's anonymous id, for its one answer
SLIDE = "slide"  # in a class's view: the slide shown (a deck view's stage)
PRIVATE = frozenset({"join", "lead", "key"})  # the Class page's links: never part of a view the class sees


@st.cache_resource
def class_store() -> Store:
    """The store every session of this server uses (ATTENTION_CLASS_STORE; see the module docstring)."""
    where = os.environ.get(STORE_ENV, "")
    if where.startswith("redis://"):
        return RedisStore(where)
    if where.startswith("sqlite:"):
        return SqliteStore(where.removeprefix("sqlite:"))
    return MemoryStore()


def room() -> dict | None:
    return st.session_state.get(CLASS)


def refused(what: str, error: Exception) -> None:
    """A refusal or a lost store: named on the page and in the server's log, never a traceback."""
    log.info("class: %s refused: %s", what, error)
    st.session_state[REFUSAL] = f"{what}: {error}"


def start() -> None:
    try:
        code, secret = classes.start(class_store())
    except (Refused, StoreDown) as error:
        refused("the class was not started", error)
        return
    st.session_state[CLASS] = {"code": code, "role": "lecturer", "secret": secret, "sent": ""}


def join(code: str) -> None:
    """Follow class `code` (a student); its view is shown on the next check."""
    student = st.session_state.setdefault(STUDENT, secrets.token_hex(8))
    try:
        classes.join(class_store(), code, student)
    except (Refused, StoreDown) as error:
        refused(f"joining {str(code)[:12]!r}", error)
        return
    st.session_state[CLASS] = {"code": code.strip().upper(), "role": "student", "version": 0, "away": False}
    st.session_state.pop(REFUSAL, None)


def lead_from_link(code: str, secret: str) -> None:
    """The lecturer's private link: this session leads class `code` if the secret is its lecturer's."""
    try:
        classes.lead_check(class_store(), code, secret)
    except (Refused, StoreDown) as error:
        refused("leading", error)
        return
    st.session_state[CLASS] = {"code": code.strip().upper(), "role": "lecturer", "secret": secret, "sent": ""}


def join_link(code: str) -> str:
    """The address students open to join: this server's, as the lecturer's browser reached it (a replica's load
    balancer, a proxy), or the path alone where the browser's address is unknown."""
    seen = urlsplit(st.context.url or "")
    here = f"{seen.scheme}://{seen.netloc}" if seen.scheme in ("http", "https") and seen.netloc else ""
    return f"{here}/class?join={code}"


def show_qr(link: str, caption: str) -> None:
    """The join link as a QR code for phones, drawn with the link as its text alternative (st.image gives an image
    none)."""
    alt = html.escape(f"QR code of the join link {link}", quote=True)
    st.html(f'<img src="data:image/png;base64,{qr_png(link)}" alt="{alt}" width="300" height="300" class="class-qr">')
    st.caption(markdown_literal(caption))


@functools.lru_cache(maxsize=16)  # a class's link is drawn on every run of the lecturer's Class page
def qr_png(link: str) -> str:
    """The link's QR code as a base64 PNG, written here by segno (nothing leaves the machine)."""
    import segno

    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=10, border=2)
    return base64.b64encode(out.getvalue()).decode()


def answers_csv() -> str | None:
    """Every question of the lecturer's class with its answers counted (classes.answers_csv); None where the
    store cannot be reached."""
    here = room()
    try:
        return classes.answers_csv(class_store(), here["code"], here["secret"])
    except (Refused, StoreDown) as error:
        refused("the answers could not be read", error)
        return None


def leave() -> None:
    st.session_state.pop(CLASS, None)


def send_view(page_title: str) -> None:
    """After a lecturer's run: the view on screen becomes the class's (only when it changed)."""
    here = room()
    if here is None or here["role"] != "lecturer":
        return
    view = decks.on_screen(page_title)
    if st.session_state.get("present") and not view.stage and BY_TITLE[page_title].slides:
        return  # presenting, on a run that ended before its slide was known: the class would get the page read through
    params = {k: v for k, v in view.params.items() if k not in PRIVATE} | ({SLIDE: view.stage} if view.stage else {})
    sent = urlsplit(view.address).path + "?" + urlencode(sorted(params.items()))
    if sent != here["sent"]:
        here["pending"] = (sent, urlsplit(view.address).path, params)
        send_pending(here)


def send_pending(here: dict) -> None:
    """The lecturer's view not yet in the store (it was unreachable): sent now, or kept for the next try."""
    if "pending" not in here:
        return
    sent, page, params = here["pending"]
    try:
        classes.lead(class_store(), here["code"], here["secret"], page, params)
        here["sent"], here["lost"] = sent, False
        del here["pending"]
    except StoreDown as error:
        if not here.get("lost"):
            log.info("class %s: the store is unreachable: %s", here["code"], error)
        here["lost"] = True  # the lecturer keeps presenting; the bar tries again every second
    except Refused as error:
        del here["pending"]
        refused("the class did not take the view", error)


def _shown(view: classes.View) -> decks.View | None:
    """The class's view as a deck's view, if this app can show it (its page and every value checked again)."""
    params = {k: str(v) for k, v in view.params.items() if k != SLIDE}
    spec = by_address().get(view.page)
    if spec is None or refused_values(params):
        return None
    return decks.View(view.page + (f"?{urlencode(params)}" if params else ""), str(view.params.get(SLIDE, "")))


def follow() -> None:
    """A student's page: the class's view when it changes (unless broken away), and its question."""
    here = room()
    if here is None or here["role"] != "student":
        return
    try:
        now = classes.view(class_store(), here["code"])
        here["lost"] = False
    except StoreDown:
        here["lost"] = True
        return
    if now is None or here["away"] or now.version == here["version"]:
        return
    here["version"] = now.version
    shown = _shown(now)
    if shown is None:
        refused("the lecturer's view", Refused(f"{now.page} is not a view this app can show"))
        return
    # Shown on a run from the top, before the sidebar's widgets are drawn: this check may run inside a whole
    # run, after them, where Streamlit refuses to set a widget's value.
    st.session_state[FOLLOWED] = shown
    st.rerun()


def show_followed_view() -> None:
    """At the top of app.py, before any widget: the lecturer's view that follow() found, shown as a link would."""
    shown = st.session_state.pop(FOLLOWED, None)
    if shown is not None:  # presented as the lecturer presents it: a slide on its own, or the page read through
        decks.show_view(shown, present=bool(shown.stage))
        st.session_state[IN_TURN] = True  # its page is drawn in turn (in_turn), on the run the view opens


@contextlib.contextmanager
def in_turn():
    """Around the page's drawing: a follower's page showing the lecturer's new view waits for one of
    FOLLOWERS_AT_ONCE turns. When the lecturer steps, every follower's page is drawn again within the second;
    drawn all at once, each thread of the server takes its turn on the one core Python code runs on, and every
    page is finished only when all are (measured for 60: median 2.9 s, p95 3.5 s; in turn 1.9 s and 2.4-2.6 s)."""
    turn = st.session_state.pop(IN_TURN, False) and FOLLOWER_TURNS.acquire(timeout=TURN_WAIT_SECONDS)
    try:
        yield
    finally:
        if turn:
            FOLLOWER_TURNS.release()


def break_away() -> None:
    room()["away"] = True


def rejoin() -> None:
    here = room()
    here["away"], here["version"] = False, 0  # the lecturer's view now, on the next check
