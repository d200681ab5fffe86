"""A deck exported to one HTML file that runs without the server (app_pages/decks/export.py): every shipped deck
exported, opened from disk in a real browser that refuses every request, walked with → to its end and back with ←;
each view's charts are the figures the app draws for that view opened by the file's own link (compared byte for
byte with a run of the app that is not the export's), fit the screen and pass axe-core in both colour schemes. A
deck that cannot be exported is refused by name, and nothing half-written is left."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

import app_pages  # noqa: F401  (the pages registered: a deck's addresses name them)
from app_pages.decks import export
from app_pages.decks.export_html import _element, write_page
from tests.browser import SLOW, accessibility_problems, assert_none, clipped, overlaps, readable_charts, screenshot
from tests.test_decks import _shortest_long_text
from ui import decks

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = decks.shipped()
WITH_MODELS = {name for name, deck in SHIPPED.items() if any(v.page.title == "Real model" for v in deck.views)}
# What the walk reads of the view shown: its counter, the charts drawn (each with the figure JSON chart.js drew),
# and how far the view would scroll.
SHOWN = """() => ({counter: document.getElementById('counter').textContent,
  charts: [...document.querySelectorAll('#stage .live-chart')].map(c => c.__spec ?? null),
  scrolls: document.getElementById('stage').scrollHeight - document.getElementById('stage').clientHeight})"""


@pytest.fixture
def file_page(browser):
    """A page of its own that may run the tests' scripts on the file: the file forbids a script made from text
    (its Content-Security-Policy), and Playwright's waits are such scripts. What the policy itself blocks is
    checked on a page that keeps it (the planted request)."""
    context = browser.new_context(bypass_csp=True)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("decks")
    return {"folder": folder}


def _exported(files, name: str) -> Path:
    if name not in files:
        path = files["folder"] / f"{name}.html"
        done = export.export_deck(_shortest_long_text(SHIPPED[name]), path)
        assert done.views == len(SHIPPED[name].views) and done.size < export.MAX_FILE_BYTES, done
        files[name] = path
    return files[name]


def _refusing(page) -> list[str]:
    """Every request the page makes that is not to the file itself refused, and kept to be said."""
    asked = []

    def refuse(route):
        url = route.request.url
        if url.startswith(("file:", "blob:", "data:")):
            route.continue_()
        else:
            asked.append(url)
            route.abort()

    page.route("**/*", refuse)
    return asked


def _walk(page, name: str, views: int, width: int, scheme: str) -> list[list[str | None]]:
    """Every view reached with → alone, checked; then back to the first with ← alone. The figures each view drew."""
    drawn = []
    for index in range(views):
        what = f"{name}, view {index + 1} at {width} ({scheme})"
        page.wait_for_function(f"document.getElementById('counter').textContent === 'view {index + 1} of {views}'")
        page.wait_for_function(
            "[...document.querySelectorAll('#stage .live-chart')].every(c => c.__spec && c.querySelector('.main-svg'))"
            " && document.querySelectorAll('#stage .live-chart').length === document.querySelectorAll('#stage .chart')"
            ".length && document.querySelectorAll('#stage .tex').length === "
            "document.querySelectorAll('#stage .tex .katex').length",
            timeout=30_000 * SLOW,
        )
        shown = page.evaluate(SHOWN)
        assert shown["scrolls"] <= 2, f"{what} scrolls {shown['scrolls']} px"
        drawn.append(shown["charts"])
        if shown["charts"]:
            assert_none(clipped(page), f"{what}: labels outside their chart")
            assert_none(overlaps(page), f"{what}: texts over each other")
            ratio, label, _ = readable_charts(page, what)
            assert ratio >= 4.5, f"{what}: {label!r} has contrast {ratio:.1f}"
        # Every rule at the first size, in light; at the second, in dark, the rules a scheme changes (the colours):
        # roles, names and order do not change with the window or the scheme (as the app's walks, tests/browser.py)
        assert accessibility_problems(page, "all" if width == 1400 else "colours") == [], what
        if index in (0, views - 1):
            screenshot(page, f"deck-file-{name}-{index + 1:02}-{width}-{scheme}")
        page.keyboard.press("ArrowRight")
    page.wait_for_timeout(100)
    assert page.evaluate(SHOWN)["counter"] == f"view {views} of {views}"  # → at the last stays there
    for index in range(views - 1, 0, -1):
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(f"document.getElementById('counter').textContent === 'view {index} of {views}'")
    return drawn


def _sent_by_the_app(link: str) -> list[str]:
    """The figure JSON of every chart the app sends for the view its link opens: a run of the app by the link, as a
    browser opening it would (not the export's deck walk)."""
    parts = urlsplit(link)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params.update(dict(parse_qsl(parts.query, keep_blank_values=True)))
    at.run()
    if parts.path not in ("", "/"):
        page = next(spec for spec in app_pages.PAGES if spec.address == parts.path)
        at.switch_page(page.path).run()
    assert not at.exception and not at.error, (link, [e.value for e in at.exception], [e.value for e in at.error])
    specs = [json.loads(c.proto.json) for c in at.get("bidi_component") if c.proto.json]
    return [s["spec"] for s in specs if "spec" in s]


def _digest(spec: str | None) -> str:
    return hashlib.sha256((spec or "").encode()).hexdigest()[:16]


def _marks(name: str) -> list:
    with_models = [pytest.mark.models] if name in WITH_MODELS else []
    return with_models + ([pytest.mark.xdist_group("sweep")] if name == "after-mla" else [])


# The deck after MLA exports its masks' view measured: it runs with the browser's walks of that deck ("sweep"), after
# the app's server has measured the sweep and kept its points on disk (attention_core/models/kept.py), which this
# process's own model worker then reads instead of running the 21 passes again.
@pytest.mark.browser
@pytest.mark.parametrize("name", [pytest.param(name, marks=_marks(name)) for name in sorted(SHIPPED)])
def test_every_shipped_deck_exports_to_one_file_that_walks_offline_and_draws_the_apps_figures(files, file_page, name):
    path = _exported(files, name)
    text = path.read_text()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text  # the file asks no host for anything
    deck = json.loads(re.search(r'<script id="deck" type="application/json">(.*?)</script>', text, re.S).group(1))
    views = len(SHIPPED[name].views)
    page = file_page
    asked = _refusing(page)
    for width, height, scheme in ((1400, 900, "light"), (1920, 1080, "dark")):
        page.set_viewport_size({"width": width, "height": height})
        page.emulate_media(color_scheme=scheme)
        page.goto(path.as_uri())
        drawn = _walk(page, name, views, width, scheme)
        assert [[_digest(spec) for spec in view] for view in drawn] == [
            [_digest(chart["spec"]) for chart in view["charts"]] for view in deck["views"]
        ], f"{name}: a view drew other figures than the file holds"
    assert asked == [], f"{name}: the file asked {asked}"
    if name in ("lecture-000", "masks-and-scores"):  # each view's figures are the app's for the view's own link
        for index, view in enumerate(deck["views"]):
            sent = [_digest(spec) for spec in _sent_by_the_app(view["link"])]
            assert [_digest(chart["spec"]) for chart in view["charts"]] == sent, (name, index + 1, view["link"])


@pytest.mark.browser
def test_the_files_keys_buttons_and_scheme_switch_work_and_a_planted_request_is_caught(files, file_page):
    path = _exported(files, "lecture-000")
    views = len(SHIPPED["lecture-000"].views)
    page = file_page
    asked = _refusing(page)
    page.goto(path.as_uri() + "#view-3")
    page.wait_for_function(f"document.getElementById('counter').textContent === 'view 3 of {views}'")
    page.keyboard.press("End")
    page.wait_for_function(f"document.getElementById('counter').textContent === 'view {views} of {views}'")
    page.keyboard.press("Home")
    page.wait_for_function(f"document.getElementById('counter').textContent === 'view 1 of {views}'")
    page.get_by_role("button", name="next →").click()
    page.wait_for_function(f"document.getElementById('counter').textContent === 'view 2 of {views}'")
    page.keyboard.press("Escape")  # the list of views; a view chosen from it opens
    page.get_by_role("dialog").get_by_role("button").nth(9).click()
    page.wait_for_function(f"document.getElementById('counter').textContent === 'view 10 of {views}'")
    assert page.evaluate("location.hash") == "#view-10"
    assert (
        page.get_by_role("link", name="open this view in the app")
        .get_attribute("href")
        .startswith(export.APP_URL + "/?")
    )
    before = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.get_by_role("button", name=re.compile("switch to dark")).click()
    page.wait_for_function(f"getComputedStyle(document.body).backgroundColor !== '{before}'")
    ratio, label, looked = readable_charts(page, "lecture 000's view 10 switched to dark")
    assert looked > 0 and ratio >= 4.5, (label, ratio)
    assert accessibility_problems(page) == []
    assert asked == []
    # The planted fault: a file that asks another host for a font is caught by the same watch.
    planted = path.with_name("planted.html")
    planted.write_text(
        path.read_text().replace("</body>", "<link rel=stylesheet href='http://example.invalid/f.css'></body>")
    )
    page.goto(planted.as_uri())
    page.wait_for_function("document.getElementById('counter').textContent.startsWith('view 1')")
    assert any("example.invalid" in url for url in asked), asked
    # And where the file's policy holds (a reader's browser), the request is not even made: the browser refuses it.
    reader = page.context.browser.new_context()
    try:
        kept, refused = reader.new_page(), []
        kept.on("console", lambda message: refused.append(message.text))
        made = _refusing(kept)
        kept.goto(planted.as_uri())
        kept.get_by_text("view 1 of").wait_for()
        assert made == [] and any("Content Security Policy" in said for said in refused), (made, refused)
    finally:
        reader.close()


def test_a_deck_that_cannot_be_exported_is_refused_by_name_and_nothing_is_left(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"title": "bad", "views": [{"address": "/no-such-page", "stage": "", "note": ""}]}))
    out = tmp_path / "out.html"
    assert export.main([str(bad), str(out)]) == 1
    said = capsys.readouterr().err
    assert "not exported" in said and "/no-such-page" in said, said
    assert list(tmp_path.iterdir()) == [bad]  # nothing written
    # A view whose figures are over the limit: named, and nothing written (not even the scratch file beside it).
    monkeypatch.setattr(export, "MAX_VIEW_BYTES", 1000)
    good = tmp_path / "one.json"
    good.write_text(json.dumps({"title": "one", "views": [{"address": "/", "stage": "weights", "note": "n"}]}))
    assert export.main([str(good), str(out)]) == 1
    said = capsys.readouterr().err
    assert "view 1 (Walkthrough" in said and "MB of figures" in said, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "one.json"]


def _cells(charts: list[dict]) -> list[tuple[int, ...]]:
    """The shape of every map the charts draw (plotly's typed arrays say theirs; a nested list, its lengths)."""
    shapes = []
    for chart in charts:
        for trace in json.loads(chart["spec"])["data"]:
            if trace.get("type") == "heatmap" and isinstance(trace.get("z"), dict):
                shapes.append(tuple(int(n) for n in str(trace["z"]["shape"]).split(",")))
            elif trace.get("type") == "heatmap":
                shapes.append((len(trace["z"]), len(trace["z"][0])))
    return shapes


def test_a_view_too_large_for_the_file_is_drawn_with_fewer_cells_and_says_so(monkeypatch):
    """A view whose figures are over the limit is drawn again with fewer cells a map (a block's mean each) until it
    fits, and says so at its top; the view after it is drawn as the page draws it."""
    sentence = " ".join(["the cat sat on the mat"] * 12)  # 72 tokens: maps of 72 × 72
    big = decks.View(f"/?text={sentence.replace(' ', '+')}", "weights", "")
    small = decks.View("/", "weights", "")
    whole = export.shown_views(decks.Deck("as drawn", (big, small)))
    size = sum(len(chart["spec"]) for chart in whole[0].charts)
    assert (72, 72) in _cells(whole[0].charts) and "Drawn smaller" not in whole[0].body
    monkeypatch.setattr(export, "MAX_VIEW_BYTES", size // 2)  # 64 cells a side is not enough: 32 is
    first, second = export.shown_views(decks.Deck("fitted", (big, small)))
    assert sum(len(chart["spec"]) for chart in first.charts) <= size // 2
    assert all(max(shape) <= 32 for shape in _cells(first.charts)) and (32, 32) in _cells(first.charts)
    assert "Drawn smaller to fit this file: each map at most 32 × 32 cells, each a block's mean." in first.body
    assert [chart["spec"] for chart in second.charts] == [chart["spec"] for chart in whole[1].charts]
    assert "Drawn smaller" not in second.body


def test_a_view_showing_an_error_is_not_put_in_a_file(monkeypatch):
    """A view whose page shows an error is refused by name (never an error in front of the room, from a file)."""
    deck = decks.Deck("errs", (decks.View("/?d_k=1", "weights", ""),))
    shown = export.shown_views(deck)
    assert len(shown) == 1 and shown[0].charts  # the control: a view that shows no error is taken
    monkeypatch.setattr(export, "_problems", lambda at: ["planted"])
    with pytest.raises(export.NotExported, match=r"view 1 \(Walkthrough .* shows a problem: planted"):
        export.shown_views(deck)


def test_what_a_file_cannot_show_is_said_and_the_words_are_the_apps():
    """Write_page on a made-up view: the placeholders for charts, the words escaped, an element the file cannot
    show said as such, and a script inside the data cannot end its script element."""
    view = decks.View("/", "weights", "a note </script><script>alert(1)</script>")
    shown = export.Shown(0, view, "<p>words</p>", [{"spec": "{}", "height": "10"}], {"stage": "softmax"})
    page, charts = write_page(decks.Deck("t <b>", (view,)), [shown], "http://h:1", "abc", view_most=10**6)
    assert charts == 1 and "<title>t &lt;b&gt;</title>" in page
    assert "</script><script>alert(1)" not in page and "http://h:1/?stage=softmax&present=true" in page
    unknown = _element(SimpleNamespace(type="map", children={}), [], "http://h:1")  # an element the file cannot draw
    assert "a map the file cannot show: open the view in the app" in unknown
    assert f"Attention Explorer {tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']}," in page


@pytest.mark.slow
def test_the_decks_page_makes_the_open_deck_one_file_to_download():
    """The Decks page's button: the open deck exported by a process of its own, offered as a download whose
    bytes are the file; a deck changed since is not offered the old file."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.switch_page("app_pages/decks/decks.py")
    short = decks.Deck("two views", SHIPPED["lecture-000"].views[:2])
    at.session_state[decks.DECK] = short
    at.run()
    at.button(key="deck_make_html").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    made = at.session_state["deck_html"]
    assert made[1] is not None and made[1].startswith(b"<!doctype html>"), made[2]
    views = json.loads(re.search(rb'<script id="deck" type="application/json">(.*?)</script>', made[1], re.S).group(1))
    assert [view["note"] for view in views["views"]] == [view.note for view in short.views]
    assert [b.label for b in at.get("download_button") if "html" in b.label][0].startswith("⬇ deck (.html, ")
    at.session_state[decks.DECK] = decks.Deck("one view", short.views[:1])  # another deck: the file is not its
    at.run()
    assert not [b for b in at.get("download_button") if "html" in b.label]


@pytest.mark.slow  # three Pythons started, two exports
def test_a_notebook_and_a_shell_export_a_deck_by_its_name_or_its_file(tmp_path):
    """attention_explorer.export_deck, run by `python -m attention_explorer.deck` from another folder: a deck's file
    to one file by the app's exporter, the views' links at the address asked for; a shipped deck by its name; a name
    that is neither, or a deck the exporter refuses, refused with the reason, and nothing written. The notebook's
    process imports neither the app nor Streamlit. (The installed package, which holds no app, says so:
    tests/test_notebook.py.)"""
    import attention_explorer as ax

    assert ax.deck.deck_file("lecture-000", tmp_path) == ROOT / "decks" / "lecture-000.json"
    with pytest.raises(ValueError, match=r"deck: 'no-such-deck' is neither .*lecture-000"):
        ax.export_deck("no-such-deck", tmp_path / "none.html")
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"title": "mine", "views": [{"address": "/?d_k=2", "stage": "weights", "note": "n"}]}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shell, env = [sys.executable, "-m", "attention_explorer.deck"], {**os.environ, "PYTHONPATH": str(ROOT)}
    made = subprocess.run([*shell, str(mine), "out.html", "--app", "http://127.0.0.1:8600"], cwd=elsewhere, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0 and "1 views" in made.stdout, made.stderr
    held = re.search(r'<script id="deck" type="application/json">(.*?)</script>', (elsewhere / "out.html").read_text(),
                     re.S).group(1)  # fmt: skip
    held = json.loads(held)
    assert held["title"] == "mine" and len(held["views"]) == 1 and held["views"][0]["charts"]
    assert held["views"][0]["link"].startswith("http://127.0.0.1:8600/?") and "d_k=2" in held["views"][0]["link"]
    refused = subprocess.run([*shell, "lecture-999", "no.html"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "lecture-999: not exported: deck: 'lecture-999' is neither" in refused.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"title": "bad", "views": [{"address": "/no-such-page", "stage": "", "note": ""}]}))
    # In a notebook's process: the exporter's reason, and neither the app nor Streamlit imported there.
    script = (f"import sys, attention_explorer as ax\ntry: ax.export_deck({str(bad)!r}, 'x.html')\n"
              "except ValueError as no: print(no, '|', [m for m in sys.modules if m.split('.')[0] in "
              "('streamlit', 'app_pages', 'ui')])")  # fmt: skip
    said = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert "/no-such-page" in said.stdout and said.stdout.strip().endswith("| []"), (said.stdout, said.stderr)
    assert sorted(path.name for path in elsewhere.iterdir()) == ["out.html"]  # nothing written by a refusal
