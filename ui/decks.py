"""Decks: a lecture as a titled list of views, presented with → and ← alone.

A view is an address (a page and its settings, exactly as the address bar writes them), the slide to open
(a stage, for the pages whose slides are stages) and a note for the lecturer. In presentation mode → past a
view's last slide opens the next view, and the bar says "view 3 of 9". A deck is a small JSON file or one
link (/decks?deck=...); the lectures' own decks ship in decks/. A deck is checked whole when it is loaded,
with the same checks as a link's values (ui.controls): a bad one is named, and nothing of it is loaded.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import re
import zlib
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import streamlit as st

from figures.settings import CONTROLS
from ui import address, slides
from ui.controls import log
from ui.links import NUMBERS_FROM, refused_values
from ui.pages import BY_TITLE, DISPLAY, PAGES, TYPED, PageSpec, by_address, navigation_page

SHIPPED_FOLDER = Path(__file__).resolve().parents[1] / "decks"
MAX_VIEWS = 60
MAX_NOTE = 600  # characters
MAX_TITLE = 120
MAX_FILE = 64 * 1024  # bytes of JSON, or of a link's deck
DECK = "deck"  # session state: the open deck
VIEW_AT = slides.VIEW_AT  # session state: the index of the view shown, while a deck is presented
GO = "deck_go"  # session state: the view asked for (Going), until a run on its page shows it
MAX_SWITCHES = 3  # page switches tried for one view before it is given up (go_to_view)
VERSION = "deck_version"  # session state: bumped when views move, so that the note fields follow them


CONTROL_KEYS = frozenset(control.key for control in CONTROLS)


@dataclasses.dataclass(frozen=True)
class View:
    """One view of a deck: where (address), which slide first (stage: "" for the page's first) and what to say."""

    address: str
    stage: str = ""
    note: str = ""

    @property
    def page(self) -> PageSpec:
        return by_address()[urlsplit(self.address).path or "/"]

    @property
    def params(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.address).query, keep_blank_values=True))

    def describe(self) -> str:
        titles = dict(self.page.slides)
        return self.page.title + (f" · {titles.get(self.stage, self.stage)}" if self.stage else "")


@dataclasses.dataclass(frozen=True)
class Deck:
    title: str
    views: tuple[View, ...]

    def to_json(self) -> str:
        return json.dumps(
            {"title": self.title, "views": [dataclasses.asdict(view) for view in self.views]},
            ensure_ascii=False,
            indent=2,
        )

    def to_token(self) -> str:
        """The deck as one URL-safe word, for a link: compressed JSON in base64."""
        packed = zlib.compress(json.dumps(json.loads(self.to_json()), separators=(",", ":")).encode(), 9)
        return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def own_keys(spec: PageSpec) -> frozenset[str]:
    """What a view's address may hold besides the sidebar's settings: the page's own choices and, on a page that
    reads typed numbers, where they came from (numbers_from: the Training page's weights are named "trained")."""
    return spec.link_keys | ({NUMBERS_FROM.key} if spec.reads >= TYPED else frozenset())


def _view_problem(number: int, raw: object) -> tuple[View | None, str]:
    """A view from its JSON, or what is wrong with it (naming the view by its number, from 1)."""
    where = f"view {number}"
    if not isinstance(raw, dict) or not isinstance(raw.get("address"), str):
        return None, f'{where} must be an object with an "address" (text), e.g. {{"address": "/?d_k=8"}}.'
    unknown = set(raw) - {"address", "stage", "note"}
    if unknown:
        return None, f"{where} has {', '.join(sorted(unknown))}, which a view does not have: only address, stage, note."
    stage, note = raw.get("stage", ""), raw.get("note", "")
    if not isinstance(stage, str) or not isinstance(note, str) or len(note) > MAX_NOTE:
        return None, f"{where}: stage and note must be text (a note at most {MAX_NOTE} characters)."
    parts = urlsplit(raw["address"])
    spec = by_address().get(parts.path or "/")
    if spec is None or parts.scheme or parts.netloc:
        return None, (
            f"{where}: the address {raw['address'][:60]!r} names no page of this app: its path must be "
            f"one of {', '.join(by_address())} (no host: a deck never leaves the app)."
        )
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    allowed = CONTROL_KEYS | own_keys(spec) | {spec.slide_key}
    strange = sorted(set(params) - allowed - {"present"})
    if strange:
        return None, f"{where}: {spec.title} has no setting {', '.join(map(repr, strange))}."
    refused = refused_values(params)
    if refused:
        said = next(iter(refused.values())).replace("The link asked for", "its address asks for")
        return None, f"{where}: " + re.sub(r" Showing .* instead\.$", "", said)
    if stage and stage not in spec.slide_keys:
        return None, (
            f"{where}: {stage!r} is not a slide of {spec.title}: it must be one of "
            f"{', '.join(sorted(spec.slide_keys))}."
        )
    params.pop("present", None)  # the deck decides; its views open in the mode it is shown in
    address = (parts.path or "/") + (f"?{urlencode(params)}" if params else "")
    return View(address, stage, note), ""


def deck_from(data: object) -> Deck:
    """A deck from its JSON value, checked whole. Raises ValueError naming what is wrong (and where)."""
    if not isinstance(data, dict) or not isinstance(data.get("title"), str) or not isinstance(data.get("views"), list):
        raise ValueError('A deck must be a JSON object with a "title" (text) and "views" (a list).')
    if not data["title"].strip() or len(data["title"]) > MAX_TITLE:
        raise ValueError(f"A deck's title must be 1 to {MAX_TITLE} characters; got {len(data['title'])}.")
    if not 1 <= len(data["views"]) <= MAX_VIEWS:
        raise ValueError(f"A deck has 1 to {MAX_VIEWS} views; this one has {len(data['views'])}.")
    views = []
    for number, raw in enumerate(data["views"], start=1):
        view, problem = _view_problem(number, raw)
        if problem:
            raise ValueError(f"Deck {data['title'][:40]!r}, {problem}")
        views.append(view)
    return Deck(data["title"].strip(), tuple(views))


def deck_from_text(text: str) -> Deck:
    """A deck from a JSON file's text or from a deck link (or its `deck=` word alone)."""
    text = text.strip()
    if len(text.encode()) > MAX_FILE:
        raise ValueError(f"A deck is at most {MAX_FILE // 1024} KB; this one is {len(text.encode()) // 1024} KB.")
    if text.startswith("{"):
        try:
            return deck_from(json.loads(text))
        except json.JSONDecodeError as error:
            raise ValueError(f"The deck file is not JSON: {error.msg} at line {error.lineno}.") from None
    token = dict(parse_qsl(urlsplit(text).query)).get("deck", text)
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(zlib.decompressobj().decompress(packed, MAX_FILE))
    except (binascii.Error, ValueError, zlib.error):
        raise ValueError("This is neither a deck's JSON nor a deck link (…/decks?deck=…).") from None
    return deck_from(data)


@functools.cache  # read and checked once per server: the folder ships with the app and does not change
def shipped() -> dict[str, Deck]:
    """The decks that come with the app (decks/*.json), by file name: one per lecture."""
    return {path.stem: deck_from(json.loads(path.read_text())) for path in sorted(SHIPPED_FOLDER.glob("*.json"))}


# ------------------------------------------------------------------------------------------------
# Presenting: callbacks ask for a view; app.py goes there (go_to_view) before the sidebar is drawn.


def open_view(index: int, slide: str = "", present: bool | None = None) -> None:
    """Open view `index` of the open deck at its own slide (where it names none, at `slide`: "first" or "last",
    as → or ← came to it), as if its address were a link just opened: the sidebar takes the view's settings (the
    defaults where it names none; the reader's own display choices stay), and the page's own choices of the view
    before it are forgotten."""
    show_view(st.session_state[DECK].views[index], slide, present)
    st.session_state[VIEW_AT] = index


@dataclasses.dataclass(frozen=True)
class Going:
    """A view asked for (show_view), kept in the session until a run on its page has shown it (go_to_view)."""

    view: View
    slide: str = ""  # where the view names no slide: "first" or "last", as → or ← came to it
    present: bool | None = None  # presentation mode on or off (None: as it is)
    forget: frozenset[str] = frozenset()  # the keys of the page's own choices before it
    switches: int = 0  # page switches asked for so far


def show_view(view: View, slide: str = "", present: bool | None = None) -> None:
    """Show `view` on the next run as a link just opened would (open_view; a class's follower too): go_to_view
    carries it out."""
    st.session_state[GO] = going_to(view, slide, present, st.query_params.to_dict())


def going_to(view: View, slide: str = "", present: bool | None = None, address_now: Iterable[str] = ()) -> Going:
    """`view` asked for, with the keys of the page's own choices before it to forget (`address_now`: the keys of
    the address as it is)."""
    before = {*address_now, *(spec.slide_key for spec in PAGES if spec.slide_key), *view.params}
    return Going(view, slide, present, frozenset(before - CONTROL_KEYS))


def _shown_now(going: Going) -> None:
    """On the run that has reached the view's page, before its widgets: the sidebar takes the view's settings (the
    defaults where it names none; the reader's own display choices stay), the page's choices before it are
    forgotten, and its own go where a link's wait for their widgets."""
    state, params = st.session_state, going.view.params
    if going.present is not None:
        state["present"] = going.present
    for control in CONTROLS:
        if control.key in params:
            state[control.key] = _value(control, params[control.key])
        elif control.key not in DISPLAY:
            state[control.key] = control.default
    for key in going.forget:
        _forget(key, params)
    state[slides.WANTED] = going.view.stage or going.slide  # a view that names its slide shows it, from either side
    state["link_choices"] = dict(params)  # the page names any own choice it cannot take (check_choice)
    address.clear_bound()  # whatever address the browser sent back
    address.seed({key: value for key, value in params.items() if key not in CONTROL_KEYS})


def _value(control, raw: str):
    """A link's value (checked when the deck was loaded) as its control holds it."""
    if control.kind in ("slider", "number"):
        return int(raw)
    if control.kind == "toggle":
        return raw.lower() == "true"
    return raw


def step_view(delta: int, past_the_end: bool) -> bool:
    """→ / ← while a deck is presented: a view that names its slide is that one slide, so the arrows go to the
    next or previous view; a view of a whole page hands over only past its last (or before its first) slide.
    True when the deck took the step (at either end of the deck it stays where it is)."""
    deck, at = st.session_state.get(DECK), st.session_state.get(VIEW_AT)
    if deck is None or at is None or at >= len(deck.views):
        return False
    if not (deck.views[at].stage or past_the_end):
        return False
    if 0 <= at + delta < len(deck.views):
        open_view(at + delta, "first" if delta > 0 else "last")
    return True


slides.at_the_ends = step_view


def go_to_view(page: str) -> None:
    """The view a callback asked for (show_view), at the top of a run on page `page` (its title), before the
    sidebar's widgets are drawn: first the switch to its page, then, on a run that has reached that page, its
    settings and its own choices, which the page's widgets take as they would a link's.

    The switch can be lost: a fragment's timed rerun (the class bar's poll) that reaches the server before the
    switched run starts is merged with it, and brings the browser's old page, address and widget values. So the
    view is kept until a run on its page shows it: a run on another page switches again, and the values are set
    on the run that shows it, whatever values the browser sent (tests/test_decks.py). Streamlit lets no
    code write or clear a widget-bound value of the address (st.switch_page's query_params refuses them): the
    values go where a link's wait for their widgets, as ui.controls does for a link."""
    state = st.session_state
    going = state.get(GO)
    if going is None:
        return
    there = going.view.page.path
    if (going.switches == 0 or there != BY_TITLE[page].path) and going.switches < MAX_SWITCHES:
        state[GO] = dataclasses.replace(going, switches=going.switches + 1)
        if address.clear_bound():  # the bound values of the view before
            st.switch_page(navigation_page(there))
        return
    del state[GO]
    if there == BY_TITLE[page].path:
        _shown_now(going)
    else:
        log.warning("a deck's view of %s was not reached after %d page switches", there, MAX_SWITCHES)


def where() -> tuple[str, str]:
    """For the presentation bar: which view of the presented deck this is, and the deck's title with the view's
    note (both "" when no deck is presented)."""
    deck, at = st.session_state.get(DECK), st.session_state.get(VIEW_AT)
    if deck is None or at is None or at >= len(deck.views):
        return "", ""
    return f"view {at + 1} of {len(deck.views)}", f"{deck.title}: {deck.views[at].note}"


# ------------------------------------------------------------------------------------------------
# Building a deck (the Decks page and the "add this view" buttons).


def on_screen(page: str) -> View:
    """The view on screen: the page, its address as it is now, and the slide shown on it (if any)."""
    spec = BY_TITLE[page]
    state = st.session_state
    # The sidebar's settings as a link writes them (those that differ from the defaults), and the page's own.
    params = {
        control.key: str(value).lower() if isinstance(value, bool) else str(value)
        for control in CONTROLS
        if control.key != "present" and (value := state.get(control.key, control.default)) != control.default
    }
    params |= {key: value for key, value in st.query_params.to_dict().items() if key in own_keys(spec)}
    at = state.get(slides.AT)  # the slide on screen; read normally, a page is all its slides
    stage = at[1] if state.get("present") and at and at[0] == page else ""
    return View(spec.address + (f"?{urlencode(params)}" if params else ""), stage)


def add_view(page: str) -> None:
    """Add the view on screen to the open deck (a new deck where none is open)."""
    state = st.session_state
    view = on_screen(page)
    deck: Deck = state.get(DECK) or Deck("My lecture", ())
    if len(deck.views) >= MAX_VIEWS:
        st.toast(f"A deck has at most {MAX_VIEWS} views.", icon="⚠️")
        return
    replace(dataclasses.replace(deck, views=(*deck.views, view)))
    st.toast(f"Added view {len(deck.views) + 1}: {page}" + (f", {view.stage}" if view.stage else ""), icon="➕")


def replace(deck: Deck | None) -> None:
    """Make `deck` the open deck (None: close it); the note fields are drawn anew for its views."""
    state = st.session_state
    if deck is None:
        state.pop(DECK, None)
    else:
        state[DECK] = deck
    state.pop(VIEW_AT, None)
    state[VERSION] = state.get(VERSION, 0) + 1


def move(index: int, delta: int) -> None:
    deck: Deck = st.session_state[DECK]
    views = list(deck.views)
    other = index + delta
    if 0 <= other < len(views):
        views[index], views[other] = views[other], views[index]
        replace(dataclasses.replace(deck, views=tuple(views)))


def delete(index: int) -> None:
    deck: Deck = st.session_state[DECK]
    views = deck.views[:index] + deck.views[index + 1 :]
    replace(dataclasses.replace(deck, views=views) if views else None)


def set_note(index: int, key: str) -> None:
    deck: Deck = st.session_state[DECK]
    note = str(st.session_state.get(key, ""))[:MAX_NOTE]
    views = list(deck.views)
    views[index] = dataclasses.replace(views[index], note=note)
    st.session_state[DECK] = dataclasses.replace(deck, views=tuple(views))


def set_title(key: str) -> None:
    deck: Deck = st.session_state[DECK]
    title = str(st.session_state.get(key, "")).strip()[:MAX_TITLE] or deck.title
    st.session_state[DECK] = dataclasses.replace(deck, title=title)


def _forget(key: str, params: dict) -> None:
    """A page's own choice of the view before forgotten. One the view names is removed: its widget takes the view's
    value from the address (address.seed). One it does not name is set to its widget's default where its widget
    was drawn in this session (Streamlit keeps each widget's deserializer, which gives its default for no value),
    so that the browser shows the default too: a choice only taken out of the session keeps its old text or option
    on screen while the server reads the default (a radio showing the residual stream over the heads' map)."""
    default = None if key in params else address.widget_default(key)
    if default is None:
        st.session_state.pop(key, None)
    else:
        st.session_state[key] = default
