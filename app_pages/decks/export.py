"""A deck as one HTML file that runs without the server: every view as the app presents it, its charts drawn by the
app's own chart code and plotly.js, both inside the file, and nothing fetched from anywhere.

    python -m app_pages.decks.export decks/lecture-000.json lecture-000.html [--app http://localhost:8501]

How: the app itself is run without a browser (Streamlit's AppTest), the deck opened and presented view after view
with → as a lecturer would, and what each view shows read from what the server would send: its headings, words,
formulas and every chart's figure JSON, byte for byte the JSON the app's charts draw (export_html.py writes them
into the page). The file names the app's version, the commit and the date, and links each view back into the app.
Controls do not turn in a file: each view says so and links to itself in the app.

A view whose figures would make the file too large for a lecture hall's laptop (MAX_VIEW_BYTES) is drawn again with
fewer cells a map (SMALLER: each cell a block's mean, as the app draws a map longer than 128 tokens), and says so.
A deck that cannot be exported is refused by name, and nothing is left half-written: a view whose page shows an
error, or that is still too large at the fewest cells, or a file over MAX_FILE_BYTES.
The shipped decks: `make decks`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as `python -m` from anywhere
    sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

import app_pages  # noqa: E402, F401  (the pages registered: a deck's addresses name them)
from app_pages.decks.export_html import Shown, view_body, write_page  # noqa: E402
from figures.style import escape  # noqa: E402
from ui import decks  # noqa: E402
from ui.show import DRAWN_AT_MOST  # noqa: E402

# What a view shows only once a button has measured or trained it (once per server): pressed before the view is
# read, and the view read once its work is done (no progress bar left), so that the file holds the numbers, not a
# button that cannot be pressed there.
MEASURE_FIRST = ("Measure every mask", "Train both")
WORK_SECONDS = 600  # the most a pressed button's work is waited for
MAX_VIEW_BYTES = 3_000_000  # a view's figures: a real model's every head at 128 tokens is ~1 MB
SMALLER = (64, 32, 16)  # the most cells a side a map is drawn at, tried in turn, where a view is over MAX_VIEW_BYTES
MAX_FILE_BYTES = 8_000_000  # the whole file, plotly.js (1.5 MB) and the fonts included
APP_URL = "http://localhost:8501"  # `make run`'s address: where each view's link opens it
SECONDS_A_VIEW = 600  # AppTest's wait for one run: a real model's long text takes minutes on 2 cores


class NotExported(ValueError):
    """A deck that cannot be made into a file, with the reason (its view and what is wrong)."""


@dataclasses.dataclass(frozen=True)
class Exported:
    path: Path
    views: int
    charts: int
    size: int  # bytes
    seconds: float


def _problems(at) -> list[str]:
    """What a view must not show the room: an exception or an error message."""
    return [str(e.value)[:200] for e in at.exception] + [str(e.value)[:200] for e in at.error]


def shown_views(deck: decks.Deck, app_url: str = APP_URL) -> list[Shown]:
    """Each view of `deck` as the app presents it: opened from the Decks page and stepped with → (the deck's own
    next button), each read once its page has run. Refused (NotExported) where a view shows a problem or is not
    reached."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=SECONDS_A_VIEW).run()
    at.switch_page("app_pages/decks/decks.py")
    at.session_state[decks.DECK] = deck
    at.run()
    version = at.session_state.get(decks.VERSION, 0)
    at.button(key=f"deck_open_{version}_0").click().run()
    shown = []
    for index, view in enumerate(deck.views):
        where = f"view {index + 1} ({view.describe()})"
        at_view = at.session_state.get("deck_view")
        if at_view != index:
            raise NotExported(f"{where} was not reached: the deck showed view {at_view}")
        if any(str(button.label).startswith(MEASURE_FIRST) for button in at.button):
            # AppTest reruns the page it was last told to show: the view's page, for the button's click to reach it
            at.switch_page(view.page.path).run()
            for button in [b for b in at.button if str(b.label).startswith(MEASURE_FIRST) and not b.disabled]:
                button.click().run()  # (a disabled one: its work is done or under way, which the wait below reads)
            deadline = time.monotonic() + WORK_SECONDS
            while at.get("progress") and time.monotonic() < deadline:  # work in a thread of its own: looked at again
                time.sleep(0.5)
                at.run()
        if problems := _problems(at):
            raise NotExported(f"{where} shows a problem: {problems[0]}")
        address = {
            **view.params,
            **{key: value[-1] if isinstance(value, list) else value for key, value in at.query_params.items()},
        }
        slide = view.page.slide_key  # the slide shown, which the browser (not the server) writes into the address
        if slide and at.session_state.get(slide) is not None:
            address[slide] = str(at.session_state[slide])
        shown.append(Shown(index, view, *fitted(at, view, app_url), address))
        if index < len(deck.views) - 1:
            at.button(key="slide_next").click().run()
    return shown


def _size(charts: list[dict]) -> int:
    return sum(len(chart["spec"]) for chart in charts)


def fitted(at, view: decks.View, app_url: str) -> tuple[str, list[dict]]:
    """The view on screen as view_body reads it; if its figures are over MAX_VIEW_BYTES, drawn again with fewer
    cells a map (SMALLER, until it fits), said at its top. One still too large is left so (write_page refuses it)."""
    body, charts = view_body(at.main, app_url)
    over = _size(charts) > MAX_VIEW_BYTES
    for most in SMALLER if over else ():
        at.session_state[DRAWN_AT_MOST] = most
        at.switch_page(view.page.path).run()  # AppTest reruns the page it was last told to show: the view's
        body, charts = view_body(at.main, app_url)
        if _size(charts) <= MAX_VIEW_BYTES:
            said = (f"Drawn smaller to fit this file: each map at most {most} × {most} cells, each a block's mean. "
                    "The app draws every cell: open this view there.")  # fmt: skip
            body = f'<p class="smaller">{escape(said)}</p>{body}'
            break
    if over:
        at.session_state[DRAWN_AT_MOST] = None  # the next view as the page draws it
    return body, charts


def _commit() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return "not a git checkout"


def export_deck(deck: decks.Deck, path: str | Path, app_url: str = APP_URL) -> Exported:
    """Write `deck` to one HTML file at `path` (whole, or nothing: written beside it and moved into place)."""
    started = time.perf_counter()
    path = Path(path)
    app_url = app_url.rstrip("/")
    views = shown_views(deck, app_url)
    page, charts = write_page(deck, views, app_url=app_url, commit=_commit(), view_most=MAX_VIEW_BYTES)
    data = page.encode()
    if len(data) > MAX_FILE_BYTES:
        raise NotExported(f"the file would be {len(data) / 1e6:.1f} MB, over {MAX_FILE_BYTES / 1e6:.0f} MB")
    handle, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(scratch, 0o644)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
    return Exported(path, len(views), charts, len(data), time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export a deck (its JSON file) to one HTML file that runs offline.")
    parser.add_argument("deck", help="a deck's JSON file, as the Decks page saves it (decks/*.json)")
    parser.add_argument("out", help="the HTML file to write")
    parser.add_argument("--app", default=APP_URL, help=f"where each view's link opens the app (default {APP_URL})")
    args = parser.parse_args(argv)
    try:
        deck = decks.deck_from_text(Path(args.deck).read_text(encoding="utf-8"))
        done = export_deck(deck, args.out, app_url=args.app)
    except (OSError, ValueError) as error:  # NotExported is a ValueError, as is a deck file refused
        print(f"{args.deck}: not exported: {error}", file=sys.stderr)
        return 1
    print(f"{done.path}: {done.views} views, {done.charts} charts, {done.size / 1e6:.1f} MB in {done.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
