"""Every student can read it (issue 29), in a real browser: no serious or critical problem that axe-core (the standard
accessibility engine, from npm) finds on any page, in either theme; a map's cells walked with the keyboard and read
out; every chart named and summed up in words computed from its numbers; its numbers as a table on request; ▶ play
still where the browser asks for reduced motion. Presentation mode's slides and the lectures' decks are checked by
axe-core as tests/test_browser.py walks them."""

import re

import pytest

from app_pages import BY_TITLE, PAGES
from attention_core import trace_sentence
from figures.settings import DEFAULTS
from tests.browser import (
    RUN_ENDED,
    SLOW,
    accessibility_problems,
    chart_locator,
    idle,
    lent_tab,
    no_traceback,
    scheme,
    screenshot,
    settled,
    wait_for_chart,
)
from ui.sidebar import settings_from
from ui.slides import PLAY_SECONDS

pytestmark = pytest.mark.browser
SAID = "[...document.querySelectorAll('.live-chart-said')].map(e => e.textContent).filter(Boolean)"
PRESENTED_HERE = ("Walkthrough", "Decoding", "Decks")  # the other pages' slides: tests/test_browser.py


def default_trace():
    """The trace the Walkthrough shows by default (the sidebar's defaults, validated as the app does)."""
    settings = settings_from(DEFAULTS)
    return trace_sentence(settings.text, settings.config)


@pytest.mark.models  # the Real model page among them
def test_no_page_has_a_serious_accessibility_problem(server, browser):
    """Every page read normally, and the pages whose slides no other test walks in presentation mode, in both
    colour schemes (the system's scheme switched live on each page)."""
    with lent_tab(browser, 1400, 900, "light") as page:
        shown = [(spec, False) for spec in PAGES] + [(BY_TITLE[title], True) for title in PRESENTED_HERE]
        for spec, present in shown:
            page.goto(f"{server}{spec.address}" + ("?present=true" if present else ""))
            page.get_by_test_id("stApp").wait_for()
            page.wait_for_function(RUN_ENDED, timeout=60000 * SLOW)
            for turn in range(2):
                if turn:
                    page.emulate_media(color_scheme="dark" if scheme(page) == "light" else "light")
                settled(page)
                no_traceback(page)
                how = ("presentation" if present else "read normally", scheme(page))
                # the other scheme: the rules that read colours (the document is the first scheme's)
                assert accessibility_problems(page, "colours" if turn else "all") == [], (spec.title, *how)


def test_the_arrow_keys_walk_a_maps_cells_and_each_is_read_out_and_shown(server, page):
    page.goto(server)
    wait_for_chart(page, "attention weights")
    settled(page)
    chart = chart_locator(page, "attention weights")
    assert chart.get_attribute("role") == "application"
    assert chart.get_attribute("aria-label") == "attention weights = softmax(rows)"
    chart.focus()  # as Tab reaches it: one tab stop
    page.keyboard.press("ArrowRight")  # the first key puts the walk on the first cell
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.wait_for_function(f"{SAID}.some(t => t.includes('row next, column next'))", timeout=5000)
    said = page.evaluate(SAID)[0]
    # The cell's hover label, read out: its arithmetic and value (figures.stages writes α to three decimals).
    assert "query next → key next" in said
    assert float(said.split("α₂₂ = softmax → ")[1][:5]) == pytest.approx(
        float(default_trace().weights[0, 1, 1]), abs=1e-3
    )
    assert page.locator(".hoverlayer .hovertext").count() == 1  # and shown, as a hover would
    page.keyboard.press("End")
    page.wait_for_function(f"{SAID}.some(t => t.includes('row next, column bright'))", timeout=5000)
    screenshot(page, "keyboard-walk")
    assert chart.evaluate("e => document.activeElement === e")  # the arrows did not leave the chart
    # Tab: the chart's one toolbar button (the camera), then the table's switch; no eight toolbar stops.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Download plot as a PNG"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Numbers as a table"
    assert page.locator(".hoverlayer .hovertext").count() == 0  # the label went with the focus


def test_every_chart_is_named_and_summed_up_from_its_numbers(server, page):
    page.goto(server)
    wait_for_chart(page, "attention weights")
    settled(page)
    charts = page.evaluate("""() => [...document.querySelectorAll('.live-chart')].map(e => ({
        name: e.getAttribute('aria-label'), role: e.getAttribute('role'),
        summary: document.getElementById(e.getAttribute('aria-describedby'))?.textContent}))""")
    assert len(charts) >= 8
    for chart in charts:
        assert chart["name"] and chart["summary"] and chart["role"] in ("application", "figure"), chart
    trace = default_trace()
    summary = next(c["summary"] for c in charts if c["name"] == "attention weights = softmax(rows)")
    # Written here from the numbers: the size, and the most focused row with where it looks (two decimals).
    weights, n = trace.weights[0], trace.n_tokens
    row = int(weights.max(dim=1).values.argmax())
    column, top = int(weights[row].argmax()), float(weights[row].max())
    assert 0.005 < top < 0.995  # two decimals say it as it is (the summary's edge cases: tests/test_describe.py)
    assert summary == (f"attention weights = softmax(rows): {n} × {n} weights, each row sums to 1; the most focused "
                       f"row, '{trace.tokens[row]}', puts {top:.2f} on '{trace.tokens[column]}'.")  # fmt: skip


def test_a_maps_numbers_are_a_table_on_request(server, page):
    page.goto(server)
    wait_for_chart(page, "attention weights")
    chart = chart_locator(page, "attention weights")
    table = chart.locator("xpath=..").locator("details.live-chart-table")
    table.locator("summary").click()
    caption = table.locator("caption")
    caption.wait_for()
    assert caption.text_content() == "attention weights = softmax(rows)"
    trace = default_trace()
    header = table.locator("thead th").all_text_contents()
    assert header == list(trace.tokens)
    rows = table.locator("tbody tr")
    assert rows.count() == len(trace.tokens)
    for i, token in enumerate(trace.tokens):
        cells = rows.nth(i).locator("td").all_text_contents()
        assert rows.nth(i).locator("th").text_content() == token
        assert [float(c) for c in cells] == pytest.approx(trace.weights[0, i].tolist(), abs=0.005)


@pytest.mark.parametrize("motion", ["reduce", "no-preference"])
def test_play_runs_on_only_where_motion_is_welcome(server, browser, motion):
    """Where the browser asks for reduced motion, ▶ steps once per click and nothing moves on its own."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion=motion)
    page = context.new_page()
    try:
        page.goto(f"{server}/decoding?dec_step=1")
        label = "▶ step" if motion == "reduce" else "▶ play"
        page.get_by_role("button", name=label).click(timeout=30000 * SLOW)
        page.wait_for_url(re.compile(r"dec_step=2\b"), timeout=15000 * SLOW)
        if motion == "reduce":  # nothing moves on its own: quiet for three of play's steps, and still at step 2
            idle(page, quiet=3 * PLAY_SECONDS)
            step = int(page.locator("input[type=range][aria-label=step]").input_value())
            assert step == 2 and page.get_by_role("button", name="▶ step").is_visible()
        else:  # it runs on (to the last step, where it stops by itself)
            page.wait_for_url(re.compile(r"dec_step=[3-9]\b"), timeout=15000 * SLOW)
        no_traceback(page)
    finally:
        context.close()
