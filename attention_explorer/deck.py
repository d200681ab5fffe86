"""A deck exported to one HTML file from a notebook or a shell, as the Decks page's button and `make decks` do.

    ax.export_deck("lecture-000", "lecture-000.html")    # a deck that ships with the app, by its name
    ax.export_deck("my-deck.json", "my-deck.html")       # a deck the Decks page saved

    python -m attention_explorer.deck lecture-002 lecture-002.html [--app http://localhost:8501]

The export runs the app's own pages without a browser, in a process of its own (app_pages/decks/export.py, as the
Decks page's button runs it), so it needs the app beside this library: a clone of the repository (`pip install -e .`
or not) or the Docker image. `pip install .` installs the library alone, and export_deck says so there instead of
failing somewhere inside. This library never imports the app, nor Streamlit: the export's process does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

APP_ROOT = Path(__file__).resolve().parents[1]  # in a clone, the folder that holds app.py; site-packages otherwise
EXPORTER = "app_pages.decks.export"  # the app's own command, run in APP_ROOT


class NoApp(RuntimeError):
    """The app is not beside the library (an installed package): a deck cannot be exported from here."""


def _app() -> Path:
    """The app's folder, beside this library; NoApp where there is none."""
    if not (APP_ROOT / "app.py").is_file() or not (APP_ROOT / "app_pages" / "decks" / "export.py").is_file():
        raise NoApp(
            f"export_deck runs the app's pages, and the app is not beside this library ({APP_ROOT} holds no "
            "app.py): the installed package holds the library alone. Export from a clone of the repository "
            "(python -m attention_explorer.deck, or make decks) or from the Docker image."
        )
    return APP_ROOT


def deck_file(deck, folder: str | Path) -> Path:
    """The JSON file of `deck`: a shipped deck's name ("lecture-000": the app's decks/lecture-000.json), a deck's
    JSON file as it is, or a deck the app holds (ui.decks.Deck) written into `folder`."""
    if hasattr(deck, "to_json"):
        path = Path(folder) / "deck.json"
        path.write_text(deck.to_json(), encoding="utf-8")
        return path
    shipped = {path.stem: path for path in sorted((_app() / "decks").glob("*.json"))}
    if isinstance(deck, str) and deck in shipped:
        return shipped[deck]
    if not Path(deck).is_file():
        raise ValueError(
            f"deck: {str(deck)!r} is neither a deck's JSON file nor a shipped deck's name ({', '.join(shipped)})"
        )
    return Path(deck)


def export_deck(deck, path: str | Path, app_url: str | None = None) -> Path:
    """Write `deck` (a shipped deck's name, a deck's JSON file or a Deck) to one HTML file at `path` that runs
    offline, every view as the app presents it; each view links back into the app at `app_url` (`make run`'s
    address by default). Prints what was written (views, charts, size, seconds) and returns its path. Raises NoApp
    where the app is not beside the library, ValueError for a deck that cannot be read or exported (said by name:
    nothing is written then)."""
    app, out = _app(), Path(path).resolve()
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", EXPORTER, str(deck_file(deck, folder).resolve()), str(out)]
        command += ["--app", app_url] if app_url else []
        done = subprocess.run(command, cwd=app, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"the exporter stopped with code {done.returncode}"])[-1]
        raise ValueError(said.partition(": not exported: ")[2] or said)  # the reason, without the scratch file's name
    print(done.stdout.strip())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export a deck to one HTML file that runs offline.")
    parser.add_argument("deck", help="a shipped deck's name (lecture-000) or a deck's JSON file (the Decks page's)")
    parser.add_argument("out", help="the HTML file to write")
    parser.add_argument("--app", default=None, help="where each view's link opens the app (default: make run's)")
    args = parser.parse_args(argv)
    try:
        export_deck(args.deck, args.out, app_url=args.app)
    except (NoApp, OSError, ValueError) as error:
        print(f"{args.deck}: not exported: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
