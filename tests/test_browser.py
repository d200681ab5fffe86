"""The whole app in a real browser (Debian's Chromium driven by Playwright).

Starts `streamlit run app.py` on a free local port, types a sentence, moves a slider, toggles
the causal mask, and checks what Plotly painted. Screenshots go to test-artifacts/.
Under CI (CI=true) a missing Chromium is a failure, not a skip.
"""

import contextlib
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from figures.stages import STAGE_KEYS

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
AWKWARD = "<b>x</b> the cat saw the dog"
AWKWARD_TOKENS = ["<", "b", ">", "x", "<", "/", "b", ">", "the", "cat", "saw", "the", "dog"]

pytestmark = pytest.mark.browser

# JavaScript run in the page: what Plotly holds for the chart whose title starts with a prefix.
PLOT_STATE = """prefix => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const painted = gd.querySelector('.gtitle');
    const title = painted ? painted.textContent : '';
    const subtitle = gd.querySelector('.gtitle-subtitle')?.textContent ?? '';
    if (!title.startsWith(prefix)) continue;
    const ticks = [...gd.querySelectorAll('.yaxislayer-above .ytick text')].map(t => t.textContent);
    const bold = gd.querySelectorAll('.ytick tspan[style*="bold"], .xtick tspan[style*="bold"]').length;
    let masked = null;
    if (gd.data.length > 1 && gd.data[1].z) {  // plotly keeps decoded rows as index -> value objects
      const rows = gd.data[1].z._inputArray || gd.data[1].z;
      masked = Array.from(rows, row => Array.from({length: ticks.length}, (_, j) => row[j]));
    }
    return {title, subtitle, ticks, bold, masked};
  }
  return null;
}"""

# JavaScript run in the page: the text of every chart label (ticks, axis titles, colour-bar numbers,
# titles) that sticks out of its chart. The margins are computed in Python, not measured by Plotly.
CLIPPED = """() => {
  const out = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const chart = gd.querySelector('.main-svg').getBoundingClientRect();
    for (const label of gd.querySelectorAll(
        '.xtick text, .ytick text, .g-xtitle, .g-ytitle, .cbaxis text, .gtitle, .gtitle-subtitle')) {
      const box = label.getBoundingClientRect();
      if (box.width === 0) continue;
      const slack = 4;  // a text box includes the line's leading above the glyphs
      if (box.left < chart.left - slack || box.right > chart.right + slack ||
          box.top < chart.top - slack || box.bottom > chart.bottom + slack)
        out.push(label.textContent);
    }
  }
  return out;
}"""


# JavaScript run in the page: the lowest contrast ratio (WCAG: 4.5 is enough for text) between a chart's
# labels and the page behind them, with the label that has it.
CONTRAST = """() => {
  const luminance = colour => {
    const [r, g, b] = colour.match(/[\\d.]+/g).slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const back = luminance(getComputedStyle(document.querySelector('.stApp')).backgroundColor);
  let worst = [Infinity, ''];
  const labels = '.xtick text, .ytick text, .cbaxis text, .xtitle, .ytitle, ' +
                 '.gtitle, .gtitle-subtitle, .annotation-text';
  for (const label of document.querySelectorAll(`.js-plotly-plot :is(${labels})`)) {
    const text = luminance(getComputedStyle(label).fill);
    const ratio = (Math.max(text, back) + 0.05) / (Math.min(text, back) + 0.05);
    if (ratio < worst[0]) worst = [ratio, label.textContent];
  }
  return worst;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app():
    """`streamlit run app.py` on a free port, as the README starts it; yields its address."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the browser tests: install Debian's chromium (see .ci/run)")
        pytest.skip("Debian's chromium is not installed here (apt-get install chromium); CI installs it")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("streamlit did not become healthy within 60 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def outside_requests(page) -> list[str]:
    """Every address the page asks for that is not this machine: the Docker image runs offline,
    so a font, icon or script from the internet would be missing in the lecture hall."""
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    return asked  # read after the test: it fills as the page runs


def offline(asked: list[str]) -> list[str]:
    return [url for url in asked if not url.startswith(("http://127.0.0.1", "data:", "blob:", "about:"))]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    asked = outside_requests(page)
    yield page
    context.close()
    assert offline(asked) == [], "the page fetched from outside this machine"


def wait_for_chart(page, prefix, check=lambda state: True, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = page.evaluate(PLOT_STATE, prefix)
        if state and check(state):
            return state
        time.sleep(0.2)
    raise AssertionError(f"chart {prefix!r} never reached the expected state; last: {state}")


def no_traceback(page):
    assert page.locator("[data-testid='stException']").count() == 0
    assert "Traceback" not in page.content()


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_type_slide_toggle_and_see_it_painted(server, page):
    page.goto(server)
    wait_for_chart(page, "attention weights", lambda s: s["ticks"] == ["The", "next", "day", "is", "bright"])
    no_traceback(page)
    assert page.evaluate(CLIPPED) == []
    screenshot(page, "walkthrough-default")

    sentence = page.get_by_role("textbox", name="Sentence")
    sentence.fill(AWKWARD)
    sentence.press("Control+Enter")
    wait_for_chart(page, "attention weights", lambda s: s["ticks"] == AWKWARD_TOKENS)

    slider = page.get_by_role("slider", name="d_k (query/key width per head)")
    slider.focus()
    slider.press("ArrowRight")  # d_k 4 -> 5
    wait_for_chart(page, "Q = X·W_Q", lambda s: "[8x5]" in s["title"])

    page.get_by_text("causal mask", exact=True).click()
    state = wait_for_chart(page, "attention weights", lambda s: s["masked"] is not None)
    n = len(AWKWARD_TOKENS)
    for i in range(n):
        for j in range(n):
            assert (state["masked"][i][j] == 1) == (j > i), (i, j)  # the causal triangle
    assert state["ticks"] == AWKWARD_TOKENS  # literal "<", repeated "the" and "b" keep their rows
    assert state["bold"] == 0  # "<b>" was not interpreted as markup
    no_traceback(page)
    assert page.evaluate(CLIPPED) == []
    page.get_by_text("7 · Softmax").scroll_into_view_if_needed()
    screenshot(page, "walkthrough-awkward-causal")


def test_odd_unicode_keeps_every_row_and_every_label_inside_its_chart(server, page):
    """Right-to-left words, CJK, emoji, a zero-width space and a very long word: one row each,
    nothing drawn outside its chart, no traceback."""
    text = "שלום עולם 我们 🙂 zero\u200bwidth antidisestablishmentarianism"
    page.goto(f"{server}/?text={quote(text)}")
    state = wait_for_chart(page, "attention weights", lambda s: len(s["ticks"]) == 6)
    assert state["ticks"][:2] == ["שלום", "עולם"] and state["ticks"][4] == "zerowidth"  # the invisible char is dropped
    assert state["ticks"][5] == "antidisestablis…"  # cut on the axis (whole in the hover)
    no_traceback(page)
    assert page.evaluate(CLIPPED) == []
    screenshot(page, "walkthrough-odd-unicode")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_labels_are_readable_in_the_light_and_the_dark_theme(server, browser, scheme):
    """Streamlit follows the system's colour scheme; every chart label must stand out from the page."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
    page = context.new_page()
    try:
        page.goto(f"{server}/?causal=true")
        wait_for_chart(page, "attention weights", lambda s: s["masked"] is not None)
        ratio, label = page.evaluate(CONTRAST)
        assert ratio >= 4.5, f"{label!r} has contrast {ratio:.1f} in the {scheme} theme"
        page.get_by_text("7 · Softmax").scroll_into_view_if_needed()
        screenshot(page, f"walkthrough-{scheme}")
    finally:
        context.close()


def test_exports_download_the_exact_numbers(server, page):
    """The weights' CSV and the whole trace's .npz, downloaded as a user would, agree with each other;
    the chart's HTML carries plotly.js inside it."""
    page.goto(f"{server}/?text={quote('the cat saw the <b>dog</b>')}&causal=true")
    wait_for_chart(page, "attention weights", lambda s: s["masked"] is not None)
    page.get_by_role("button", name="⬇ export").nth(STAGE_KEYS.index("weights")).click()
    with page.expect_download() as csv_download:
        page.get_by_role("button", name="weights (CSV)").click()
    rows = list(csv.reader(Path(csv_download.value.path()).read_text(encoding="utf-8").splitlines()))
    with page.expect_download() as html_download:
        page.get_by_role("button", name="attention weights = softmax(rows) (HTML)").click()
    standalone = Path(html_download.value.path()).read_text(encoding="utf-8")
    assert "<script src=" not in standalone and "Plotly.newPlot" in standalone  # plotly.js inside: opens offline
    page.keyboard.press("Escape")
    with page.expect_download() as npz_download:
        page.get_by_role("button", name="⬇ whole trace (.npz)").click()
    trace = np.load(npz_download.value.path())
    tokens = json.loads(trace["tokens_json"].tobytes())
    assert tokens == ["the", "cat", "saw", "the", "<", "b", ">", "dog", "<", "/", "b", ">"]
    assert rows[0] == ["weights", *tokens] and [row[0] for row in rows[1:]] == tokens
    weights = np.array([row[1:] for row in rows[1:]], dtype=np.float32)
    np.testing.assert_array_equal(weights, trace["weights"][0])  # 9 digits: float32 round-trips exactly
    assert np.allclose(weights.sum(axis=1), 1) and np.all(np.triu(weights, 1) == 0)  # causal rows
    no_traceback(page)


def test_every_page_keeps_the_sidebar_and_paints(server, page):
    page.goto(f"{server}/?text={quote('the dog chased the ball')}&heads=3")
    wait_for_chart(page, "attention weights")
    for link, prefix, name in (
        ("Multi-head", "weights of all 3 heads", "multihead"),
        ("Why √d_k", "The variance of a dot product", "why-sqrt-dk"),
        ("Compare", "attention weights", "compare"),
    ):
        page.get_by_role("link", name=link).click()
        wait_for_chart(page, prefix)
        assert page.get_by_role("textbox", name="Sentence").input_value() == "the dog chased the ball"
        no_traceback(page)
        time.sleep(0.5)
        assert page.evaluate(CLIPPED) == [], name
        screenshot(page, name)


@pytest.mark.parametrize(("path", "chart"), [("multihead", "weights of all 3 heads"), ("why_sqrt_dk", "The variance")])
def test_a_link_to_a_page_is_the_first_request_of_a_fresh_server(browser, path, chart):
    """With a folder named pages/ beside app.py, Streamlit starts in its older multipage mode: such a
    link once opened its page alone, with 2 heads, the default sentence and no sidebar, or under a
    "Page not found" box."""
    with running_app() as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        asked = outside_requests(page)
        page.goto(f"{url}/{path}?text={quote('the dog chased the ball')}&heads=3")
        wait_for_chart(page, chart)
        assert page.get_by_role("textbox", name="Sentence").input_value() == "the dog chased the ball"
        assert page.get_by_text("Page not found").count() == 0
        page.get_by_role("link", name="Walkthrough").click()  # the link's settings survive a click
        state = wait_for_chart(page, "attention weights", lambda s: s["subtitle"] == "head 1 of 3")
        assert state["ticks"] == ["the", "dog", "chased", "the", "ball"]
        no_traceback(page)
        page.close()
        assert offline(asked) == []


def test_a_link_restores_the_exact_view(server, page):
    page.goto(f"{server}/?text={quote(AWKWARD)}&causal=true&d_k=5&seed=7")
    state = wait_for_chart(page, "attention weights", lambda s: s["masked"] is not None)
    assert state["ticks"] == AWKWARD_TOKENS
    wait_for_chart(page, "Q = X·W_Q", lambda s: "[8x5]" in s["title"])
    assert page.get_by_label("seed").input_value() == "7"


def test_a_copied_address_restores_the_stage_head_and_page_choices(server, page, browser):
    """The lecturer picks a stage and a head; the address bar, opened elsewhere, shows the same."""
    page.goto(f"{server}/?present=true&heads=3")
    page.get_by_text("1 · Input embeddings X").wait_for()
    page.get_by_role("radio", name="softmax", exact=True).click()
    page.get_by_role("radio", name="head 3", exact=True).click()
    wait_for_chart(page, "attention weights", lambda s: s["subtitle"] == "head 3 of 3")
    elsewhere = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        elsewhere.goto(page.url)
        wait_for_chart(elsewhere, "attention weights", lambda s: s["subtitle"] == "head 3 of 3")
        assert elsewhere.get_by_text("8 · Context vectors").count() == 0  # one stage per screen, still
        elsewhere.goto(f"{server}/multihead?heads=3&mh_stage=scores&mh_shared=false")
        wait_for_chart(elsewhere, "scores of all 3 heads (a colour scale per head")
        elsewhere.goto(f"{server}/?heads=2&head={quote('head 5')}")  # a head this link no longer has
        wait_for_chart(elsewhere, "attention weights", lambda s: s["subtitle"] == "head 1 of 2")
        no_traceback(elsewhere)
    finally:
        elsewhere.close()


def test_presentation_mode_steps_through_stages(server, page):
    page.goto(f"{server}/?present=true")
    page.get_by_text("1 · Input embeddings X").wait_for()
    page.get_by_role("button", name="next →").click()
    page.get_by_text("2 · Projection matrices").wait_for(timeout=15000)
    assert not page.locator("section[data-testid='stSidebar']").is_visible()
    no_traceback(page)
    screenshot(page, "presentation")


def test_presentation_mode_steps_with_the_arrow_keys(server, page):
    page.goto(f"{server}/?present=true")
    page.get_by_text("1 · Input embeddings X").wait_for()
    page.get_by_role("button", name="next →").wait_for()  # its shortcut is live once it is drawn
    page.keyboard.press("ArrowRight")
    page.get_by_text("2 · Projection matrices").wait_for(timeout=15000)
    page.keyboard.press("ArrowLeft")
    page.get_by_text("1 · Input embeddings X").wait_for(timeout=15000)
    page.keyboard.press("ArrowLeft")  # wraps round to the last stage
    page.get_by_text("9 · Concatenate the heads").wait_for(timeout=15000)
    no_traceback(page)


def test_real_model_page_paints_a_trained_decoder(server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 7000})  # the page scrolls inside its own pane
    page = context.new_page()
    asked = outside_requests(page)
    try:
        # Bound select boxes keep their shown label in the URL.
        model, head = quote("SmolLM2-135M-Instruct (Llama-style decoder)"), quote("head 5 (kv 2)")
        page.goto(f"{server}/real_model?text={quote('the cat saw the dog <b>')}&rm_model={model}&rm_head={head}")
        tokens = ["the", "cat", "saw", "the", "dog", "<", "b", ">"]
        state = wait_for_chart(page, "attention weights", lambda s: s["masked"] is not None, timeout=90)
        assert state["subtitle"] == "head 5 of 9"
        assert state["ticks"] == tokens and state["bold"] == 0
        for i in range(len(tokens)):
            for j in range(len(tokens)):
                assert (state["masked"][i][j] == 1) == (j > i), (i, j)
        grid = wait_for_chart(page, "Mean normalized entropy")
        assert grid["ticks"][0] == "layer 1" and grid["ticks"][-1] == "layer 30"
        wait_for_chart(page, "Attention weights of all 30 layers x 9 heads")
        no_traceback(page)
        assert page.evaluate(CLIPPED) == []
        time.sleep(1)
        screenshot(page, "real-model-smollm2")
        page.goto(f"{server}/real_model?text={quote(AWKWARD)}")
        state = wait_for_chart(page, "attention weights", lambda s: s["ticks"][:2] == ["[CLS]", "<"], timeout=60)
        assert state["masked"] is None and state["bold"] == 0
        no_traceback(page)
        time.sleep(1)
        screenshot(page, "real-model-minilm-awkward")
        assert offline(asked) == []
    finally:
        context.close()
