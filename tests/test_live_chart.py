"""The live chart (ui/live_chart): each figure's number, which chart.js keeps a chart's figures in order by; the
plotly.js it serves, npm's own file; the text colours chart.js repaints, the figures' own. In a browser:
tests/test_browser_loop.py (what is drawn against what the server sent) and tests/test_browser.py."""

import json
import os
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from figures.style import TEXT_COLOURS
from ui.live_chart import PLOTLY_JS

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120


@pytest.fixture
def app():
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()


def chart_data(at) -> dict[str, dict]:
    """Each chart's data (ui/live_chart show_figure) by its element's id, which its key decides."""
    data = {chart.proto.id: json.loads(chart.proto.json) for chart in at.get("bidi_component") if chart.proto.json}
    return {key: d for key, d in data.items() if "spec" in d}


def test_each_new_figure_is_sent_with_a_higher_number_and_an_unchanged_one_with_its_own(app):
    """The order chart.js keeps a chart's figures in (tests/test_browser_loop.py checks that it does): each chart is
    sent "session:n" (ui/live_chart sent_number). A rerun that changes nothing sends every chart the number it had; a
    d_k step gives each chart whose figure changed a number above every one sent before; another session counts
    with a token of its own."""

    def numbers(at):
        return {key: d["sent"].split(":") for key, d in chart_data(at).items()}

    first, specs = numbers(app), {key: d["spec"] for key, d in chart_data(app).items()}
    assert len(first) >= 10 and len({token for token, _ in first.values()}) == 1, first
    assert numbers(app.run()) == first
    app.slider(key="d_k").set_value(5).run()
    after = numbers(app)
    changed = {key for key, d in chart_data(app).items() if d["spec"] != specs.get(key)}
    assert len(changed & first.keys()) >= 5, changed  # the maps of Q, K, the scores, the weights, ...
    highest = max(int(number) for _, number in first.values())
    assert all(int(after[key][1]) > highest for key in changed), (first, after)
    assert all(after[key] == first[key] for key in first.keys() - changed), (first, after)
    other = numbers(AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run())
    assert {token for token, _ in other.values()}.isdisjoint({token for token, _ in first.values()})


def test_charts_keyed_like_the_sessions_own_counters_keep_their_numbers_apart():
    """A chart's key is the page's to choose: charts keyed "count", "session" or "charts" are numbered as any other,
    and neither the session's token nor its count is overwritten by them (each chart's entry lives apart)."""

    def script():
        import streamlit as st

        from ui.live_chart import sent_number

        said = [
            sent_number(key, spec)
            for key, spec in (
                ("count", "a"),
                ("session", "b"),
                ("charts", "c"),
                ("count", "a"),
                ("count", "d"),
                ("other", "e"),
            )
        ]
        st.write(" ".join(said))  # fmt: skip

    at = AppTest.from_function(script, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    said = at.markdown[0].value.split()
    tokens = {number.split(":")[0] for number in said}
    assert len(tokens) == 1 and len(next(iter(tokens))) == 8, said  # one session, its token untouched
    assert [int(number.split(":")[1]) for number in said] == [1, 2, 3, 1, 4, 5], said


def test_the_pages_plotly_bundle_is_npms_own_file():
    """The copy the app serves is byte for byte the npm package's file (package.json pins it; `make test` installs
    it), so where it came from can be checked, and a newer pin without a newer copy fails here."""
    package = ROOT / "node_modules" / "plotly.js-cartesian-dist-min"
    if not package.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI must check the plotly.js copy: `npm ci` installs its package (see the Makefile)")
        pytest.skip("the npm packages are not installed here (npm ci); `make test` installs them")
    assert PLOTLY_JS.read_bytes() == (package / "plotly-cartesian.min.js").read_bytes()
    assert PLOTLY_JS.with_name("plotly-LICENSE").read_bytes() == (package / "LICENSE").read_bytes()


def test_the_live_chart_knows_the_text_colours_the_figures_write():
    """ui/live_chart/frontend/chart.js draws every figure in the page's colours as they are when it is drawn: it finds
    the text the server wrote in the theme's colour by these two values (figures/style.py TEXT_COLOURS)."""
    chart_js = (ROOT / "ui" / "live_chart" / "frontend" / "chart.js").read_text()
    written = re.search(r"THEME_TEXT = new Set\(\[(.*?)\]\)", chart_js)
    assert written and sorted(re.findall(r'"(#[0-9A-F]{6})"', written.group(1))) == sorted(TEXT_COLOURS.values())
