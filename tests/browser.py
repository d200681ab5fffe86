"""Helpers for driving the app in a real browser (Debian's Chromium via Playwright): starting the server,
and measurements taken inside the page (what Plotly painted, labels outside their chart, overlapping
text, contrast on screen and in the exported image). Used by the browser tests and the benchmarks."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

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
# The suite's browser: V8 without its top compiler, TurboFan. A test's page lives for seconds, and on two cores the
# compiles it starts in the background cost more than its faster code saves: 5-13 % fewer CPU-seconds on lecture
# 000's deck and every page's slides (docs/benchmarks.md). What is drawn is the same. The benchmarks and scripts
# keep the browser as its readers have it (CHROMIUM_FLAGS).
SUITE_FLAGS = [*CHROMIUM_FLAGS, "--js-flags=--no-turbofan"]
# Every limit a test waits to is written as a good day needs it and waited SLOW times as long: the helpers' `timeout`
# (seconds), each explicit Playwright `timeout` (ms), and Playwright's own 30 s for an action that names none
# (`patient`). A wait ends as soon as what it waits for happens, so a long limit costs nothing while the app works:
# it only bounds how long a failure takes to be said. And these machines' speed varies threefold: the same test,
# alone, ran 25 s one day and 37 s the next on this 2-core Xeon, and CI's suite took 18 min on one run and 54 on the
# next (2026-11-30), where waits of 30 s ran out on pages still drawing and eight tests failed.
SLOW = 3

# What Plotly holds for the map (a heatmap panel, found by its trace's name) or the chart (by its own title)
# whose title starts with a prefix: its title and subtitle as drawn, its row labels as painted, whether "<b>"
# became bold, the masked layer's cells, and how many ✕ layers it has.
PLOT_STATE = """prefix => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const data = gd.data || [];
    let index = data.findIndex(t => t.name && t.name.startsWith(prefix));
    let title, subtitle;
    if (index >= 0) {
      ({title = '', subtitle = ''} = data[index].meta || {});
    } else {
      title = gd.querySelector('.gtitle')?.textContent ?? '';
      if (!title.startsWith(prefix)) continue;
      subtitle = gd.querySelector('.gtitle-subtitle')?.textContent ?? '';
      index = 0;
    }
    const axis = data[index].yaxis || 'y';
    const ticks = [...gd.querySelectorAll(`.${axis}tick text`)].map(t => t.textContent);
    const bold = gd.querySelectorAll('g[class$="tick"] tspan[style*="bold"]').length;
    const mine = data.slice(index + 1).filter((t, i, all) => !all.slice(0, i + 1).some(u => u.name))
                     .filter(t => (t.yaxis || 'y') === axis);
    const grey = mine.find(t => t.type === 'heatmap');
    let masked = null;
    if (grey) {  // plotly keeps decoded rows as index -> value objects
      const rows = grey.z._inputArray || grey.z;
      masked = Array.from(rows, row => Array.from({length: ticks.length}, (_, j) => row[j]));
    }
    const outline = mine.find(t => t.fill === 'toself');
    if (!grey && outline) {  // a large map's masked cells: one grey outline, a rectangle per run (masked_outline)
      const z = data[index].z._inputArray || data[index].z;
      masked = Array.from(z, () => Array(ticks.length).fill(null));
      for (let k = 0; k + 4 < outline.x.length; k += 6) {
        for (let i = Math.round(outline.y[k] + 0.5); i < Math.round(outline.y[k + 2] + 0.5); i++) {
          for (let j = Math.round(outline.x[k] + 0.5); j < Math.round(outline.x[k + 1] + 0.5); j++) masked[i][j] = 1;
        }
      }
    }
    const crosses = mine.filter(t => t.type === 'scatter' && t.marker && t.marker.symbol === 'x-thin').length;
    return {title, subtitle, ticks, bold, masked, crosses};
  }
  return null;
}"""

# The numbers of the map (or chart) whose title starts with a prefix.
CHART_Z = """prefix => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const data = gd.data || [];
    let trace = data.find(t => t.name && t.name.startsWith(prefix));
    if (!trace && (gd.querySelector('.gtitle')?.textContent ?? '').startsWith(prefix)) trace = data[0];
    if (!trace) continue;
    const rows = trace.z._inputArray || trace.z;
    return Array.from(rows, row => Array.from(row));
  }
  return null;
}"""

# The text of every chart label (ticks, axis titles, colour-bar numbers, titles) that sticks out of its chart, and
# how many labels were looked at.
CLIPPED = """() => {
  const found = [];
  let looked = 0;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const chart = gd.querySelector('.main-svg').getBoundingClientRect();
    for (const label of gd.querySelectorAll(
        'g[class$="tick"] text, .g-xtitle, .g-ytitle, .cbaxis text, .gtitle, .gtitle-subtitle, .annotation-text')) {
      const box = label.getBoundingClientRect();
      if (box.width === 0) continue;
      looked++;
      const slack = 4;  // a text box includes the line's leading above the glyphs
      if (box.left < chart.left - slack || box.right > chart.right + slack ||
          box.top < chart.top - slack || box.bottom > chart.bottom + slack)
        found.push(label.textContent);
    }
  }
  return {found, looked};
}"""

# Pairs of texts in one chart that are drawn over each other: the title, subtitle and sub-plot titles,
# and the numbers written in neighbouring cells ("-1.42-0.99" run together); and how many pairs were looked at.
OVERLAPS = """() => {
  const found = [];
  let looked = 0;
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 2 && b.top < a.bottom - 2;
  const boxes = texts => texts.map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, b]) => b.width > 0);
  const pairs = (one, other) => {  // other === null: every pair within `one`
    for (let i = 0; i < one.length; i++)
      for (const b of other === null ? one.slice(i + 1) : other) {
        looked++;
        if (hit(one[i][1], b[1])) found.push(`${one[i][0]} | ${b[0]}`);
      }
  };
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const titles = boxes([...gd.querySelectorAll(
      '.gtitle, .gtitle-subtitle, .annotation-text, .g-xtitle text, .g-ytitle text')]);
    pairs(titles, null);  // title, subtitle, sub-plot and axis titles
    pairs(boxes([...gd.querySelectorAll('.heatmaplayer text, .hm text')]), null);  // numbers in neighbouring cells
    pairs(titles, boxes([...gd.querySelectorAll('g[class$="tick"] > text')]));  // a title over the tick labels
  }
  return {found, looked};
}"""

# The page whose colours the charts must follow: the app's element, or the body of a page without one (a deck's file).
PAGE_ELEMENT = "(document.querySelector('.stApp') ?? document.body)"
LUMINANCE = """const luminance = colour => {
    const [r, g, b] = colour.match(/[\\d.]+/g).slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const rgb = colour => {  // any CSS colour -> "rgb(r, g, b)" (the canvas normalises it to #rrggbb or rgba)
    const c = document.createElement('canvas').getContext('2d');
    c.fillStyle = colour;
    const hex = c.fillStyle;
    if (hex.startsWith('rgb')) return hex;
    const part = i => parseInt(hex.slice(i, i + 2), 16);
    return `rgb(${part(1)}, ${part(3)}, ${part(5)})`;
  };"""

# The lowest contrast (WCAG: text needs 4.5) between any chart label, of every sub-plot and legend, and the numbers
# written after bars, and what is behind it (the chart's paper as drawn, or the page where the paper is clear), with
# the label that has it, and how many labels were looked at.
CONTRAST = (
    """() => {
  """
    + LUMINANCE
    + """
  const page = getComputedStyle("""
    + PAGE_ELEMENT
    + """).backgroundColor;
  let worst = [Infinity, ''], looked = 0;
  const labels = 'g[class$="tick"] > text, text[class$="title"], .gtitle-subtitle, .annotation-text, ' +
                 '.legendtext, .legendtitletext, .cbaxis text, text.bartext';  // the app's bar numbers are outside
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const paper = rgb(gd._fullLayout?.paper_bgcolor ?? 'rgba(0, 0, 0, 0)');
    const clear = /rgba\\(.*,\\s*0\\)$/.test(paper);
    const back = luminance(clear ? page : paper);
    for (const label of gd.querySelectorAll(`:is(${labels})`)) {
      if (!label.textContent.trim()) continue;
      looked++;
      const fill = getComputedStyle(label).fill, r = ratio(luminance(fill), back);
      const chart = gd.querySelector('.gtitle')?.textContent ?? gd.getAttribute('aria-label');
      if (r < worst[0]) worst = [r, `${label.textContent} (${fill} on ${clear ? page : paper}, in ${chart})`];
    }
  }
  return [...worst, looked];
}"""
)

# The same for the PNG the camera button saves: Plotly draws it from the figure's layout (the page's CSS does
# not reach it), so the layout's text colours against its paper colour are what the image shows.
EXPORT_CONTRAST = (
    """() => {
  """
    + LUMINANCE
    + """
  let worst = [Infinity, ''], looked = 0;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const L = gd._fullLayout;
    const paper = luminance(rgb(L.paper_bgcolor));
    const texts = [['title', L.title?.font?.color], ['font', L.font?.color], ['legend', L.legend?.font?.color]];
    for (const name of Object.keys(L).filter(k => /^[xy]axis\\d*$/.test(k)))
      texts.push([`${name} ticks`, L[name].tickfont?.color], [`${name} title`, L[name].title?.font?.color]);
    for (const a of L.annotations || []) texts.push([`annotation ${a.text}`, a.font?.color]);
    for (const [name, colour] of texts) {
      if (!colour) continue;
      looked++;
      const r = ratio(luminance(rgb(colour)), paper);
      if (r < worst[0]) worst = [r, `${L.title.text}: ${name} ${colour} on ${L.paper_bgcolor}`];
    }
  }
  return [...worst, looked];
}"""
)

# The main pane's scroll: how far the content runs past the window (0 = fits without scrolling).
OVERFLOW = """() => {
  const pane = document.querySelector('[data-testid="stMain"]') || document.scrollingElement;
  return pane.scrollHeight - pane.clientHeight;
}"""

# Sizes (px) of what a projector needs large, in every chart: tick labels, titles, hover boxes.
CHART_SIZES = """() => {
  const px = el => parseFloat(getComputedStyle(el).fontSize);
  const ticks = [...document.querySelectorAll('.js-plotly-plot g[class$="tick"] > text')].map(px);
  const titles = [...document.querySelectorAll('.js-plotly-plot :is(.gtitle, .annotation-text)')].map(px);
  const hovers = [...document.querySelectorAll('.js-plotly-plot')].map(gd => gd._fullLayout.hoverlabel.font.size);
  return {tick: ticks, title: titles, hover: hovers};
}"""

# ... and on the page itself: buttons, formulas, text.
PAGE_SIZES = """() => {
  const px = el => el ? parseFloat(getComputedStyle(el).fontSize) : null;
  return {
    button: px(document.querySelector('.stButton button p')),
    formula: px(document.querySelector('.katex')),
    text: px(document.querySelector('.stMarkdown p')),
  };
}"""

# Brings the chart whose figure (drawn or not yet: a chart far below the viewport waits) has a map or a title
# starting with a prefix into view; false if the page has none.
BRING = """prefix => {
  for (const chart of document.querySelectorAll('.live-chart')) {
    if (!chart.__latest) continue;
    const figure = JSON.parse(chart.__latest);
    if (figure.data.some(t => t.name && t.name.startsWith(prefix)) ||
        String(figure.layout.title?.text ?? '').startsWith(prefix)) {
      chart.scrollIntoView({block: 'center'});
      return true;
    }
  }
  return false;
}"""


# The loop a reader lives in (bench/bench_loop.py, tests/test_browser_loop.py): installed in every page before its own
# scripts (context.add_init_script). window.__loop.arm() starts a watch; .read() says, in the page's own clock
# (performance.now), when the key was pressed, and for every chart (the app's live chart, or Plotly's own plot in
# the yardstick's st.plotly_chart) drawn since: when its SVG text first changed (a title, a tick, a number in a
# cell), when anything in it first and last changed, whether it was on screen when it changed, its name and its
# data-order (a test may number the charts). The chart's own element's attributes (its name and height, set with
# each figure the server sends) are not a drawing.
LOOP_WATCH = """(() => {
  const CHART = '.live-chart, .js-plotly-plot';
  const loop = window.__loop = {pressed: null, charts: new Map(), armed: false};
  const element = node => node.nodeType === 3 ? node.parentElement : node;
  const inText = node => !!element(node)?.closest?.('svg text');
  const hasText = node => node.nodeName === 'text' || node.nodeName === 'tspan' || !!node.querySelector?.('text');
  const onScreen = chart => { const box = chart.getBoundingClientRect();
                              return box.bottom > 0 && box.top < innerHeight && box.height > 0; };
  new MutationObserver(records => {
    if (!loop.armed) return;
    const now = performance.now();
    for (const r of records) {
      const chart = element(r.target)?.closest?.(CHART);
      if (!chart || (r.target === chart && r.type === 'attributes')) continue;
      const text = r.type === 'characterData' ? inText(r.target)
        : r.type === 'childList' && [...r.addedNodes].some(node => inText(node) || hasText(node));
      const seen = loop.charts.get(chart) ?? {text: null, first: now, last: null, screen: false,
                                              name: chart.getAttribute('aria-label') || '',
                                              order: chart.dataset.order ?? null};
      if (text) seen.text ??= now;
      seen.last = now;
      seen.screen ||= onScreen(chart);
      loop.charts.set(chart, seen);
    }
  }).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
  // On the window, in the capture phase, before any of the page's own (presentation mode's keys stop the event).
  window.addEventListener('keydown', event => { if (loop.armed) loop.pressed ??= event.timeStamp; }, {capture: true});
  loop.arm = () => { loop.pressed = null; loop.charts = new Map(); loop.armed = true; };
  loop.read = () => {
    const seen = [...loop.charts.values()];
    const texts = seen.map(s => s.text).filter(t => t !== null);
    const screen = seen.filter(s => s.screen).map(s => s.last), lasts = seen.map(s => s.last);
    return {pressed: loop.pressed, first: texts.length ? Math.min(...texts) : null,
            screen: screen.length ? Math.max(...screen) : null, last: lasts.length ? Math.max(...lasts) : null,
            changed: seen.length, changedOnScreen: screen.length, charts: seen};
  };
})();"""


# Whether each chart (found by its key: Streamlit gives a keyed element's container the class st-key-<key>) draws the
# figure the server last sent it (handed in from the websocket's frames: ServerSent). What is drawn is read from
# Plotly's own state after it painted (gd._fullData and gd._fullLayout), never from a note chart.js keeps about
# itself: its height and type size, and every trace's type, name and numbers (a typed array decoded here as
# plotly.js decodes it). "not drawn" where the chart has no plot yet (a chart far off screen waits).
DRAWN = """sent => {
  const DTYPES = {f4: Float32Array, f8: Float64Array, i1: Int8Array, u1: Uint8Array, i2: Int16Array,
                  u2: Uint16Array, i4: Int32Array, u4: Uint32Array};
  const numbers = value => {  // every number of an array, a nested one or a typed-array spec, flat
    if (value && value.bdata !== undefined) {
      const bytes = Uint8Array.from(atob(value.bdata), c => c.charCodeAt(0));
      return Array.from(new DTYPES[value.dtype](bytes.buffer));
    }
    if (value && typeof value === 'object' && value.length !== undefined)
      return Array.from(value).flatMap(item => typeof item === 'object' && item !== null ? numbers(item) : [item]);
    return value === undefined ? [] : [value];
  };
  const same = (a, b) => a.length === b.length
    && a.every((v, i) => v === b[i] || (Number.isNaN(v) && Number.isNaN(b[i])));
  const said = {};
  for (const [key, spec] of Object.entries(sent)) {
    const place = `.st-key-${key.trim().replaceAll(/[^a-zA-Z0-9_-]/g, '-')}`;
    const gd = document.querySelector(`${place} .js-plotly-plot`);
    if (!gd?._fullData || !gd._fullLayout) { said[key] = 'not drawn'; continue; }
    const figure = JSON.parse(spec), layout = figure.layout ?? {};
    const drawn = gd._fullData;
    const alike = (layout.height === undefined || layout.height === gd._fullLayout.height)
      && (layout.font?.size === undefined || layout.font.size === gd._fullLayout.font.size)
      && figure.data.length === drawn.length
      && figure.data.every((t, i) => (t.type ?? 'scatter') === drawn[i].type
        && (t.name === undefined || t.name === drawn[i].name)
        && ['x', 'y', 'z'].every(axis => t[axis] === undefined || same(numbers(t[axis]), numbers(drawn[i][axis]))));
    said[key] = alike ? 'its last figure' : 'an older figure';
  }
  return said;
}"""


class ServerSent:
    """What the server sent each live chart, read from the page's websocket (Streamlit's ForwardMsg protobufs): for
    each chart's key, the last figure sent and its number ("session:n", ui/live_chart sent_number). Made before the page
    opens its connection (page.goto). A message the browser already holds comes as a reference to its hash: it is
    read from the one it refers to."""

    def __init__(self, page):
        self.figures: dict[str, tuple[str, str]] = {}
        self._held: dict[str, bytes] = {}
        listen(page, "websocket", lambda socket: socket.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, str):
            return
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        message = ForwardMsg.FromString(payload)
        if message.HasField("ref_hash"):
            message = ForwardMsg.FromString(self._held[message.ref_hash])
        elif message.hash:
            self._held[message.hash] = payload
        if message.WhichOneof("type") != "delta" or message.delta.WhichOneof("type") != "new_element":
            return
        element = message.delta.new_element
        if element.WhichOneof("type") != "bidi_component" or element.bidi_component.component_name != "live_chart":
            return
        data = json.loads(element.bidi_component.json)
        if "spec" in data:  # not the preloader
            key = element.bidi_component.id.split("-", 2)[2]  # "$$ID-<hash>-<key>", as Streamlit reads it back
            self.figures[key] = (data["spec"], data.get("sent", ""))

    def drawn(self, page) -> dict[str, str]:
        """For every chart sent a figure: "its last figure", "an older figure" or "not drawn" (DRAWN)."""
        return page.evaluate(DRAWN, {key: spec for key, (spec, _) in self.figures.items()})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, script: str = "app.py", env: dict | None = None, cwd: Path = ROOT) -> subprocess.Popen:
    """`streamlit run` on 127.0.0.1:port; `env`: variables to add (e.g. a cookie secret shared by replicas); `cwd`:
    the checkout whose app it serves (bench/ab_loop.py serves two)."""
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})},
    )  # fmt: skip


def patient(browser) -> None:
    """Every context the browser opens (and the context of every page it opens alone) waits SLOW times Playwright's
    30 s where an action or a wait names no limit of its own."""
    opened_context, opened_page = browser.new_context, browser.new_page

    def new_context(**options):
        context = opened_context(**options)
        context.set_default_timeout(30_000 * SLOW)
        return context

    def new_page(**options):
        page = opened_page(**options)
        page.context.set_default_timeout(30_000 * SLOW)
        return page

    browser.new_context, browser.new_page = new_context, new_page


def wait_healthy(url: str, timeout: float = 60) -> None:
    timeout *= SLOW
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"streamlit did not become healthy within {timeout:.0f} s")


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the browser tests: install Debian's chromium (see .ci/run)")
        pytest.skip("Debian's chromium is not installed here (apt-get install chromium); CI installs it")


@contextlib.contextmanager
def running_app(script: str = "app.py"):
    """`streamlit run app.py` on a free port, as the README starts it; yields its address."""
    require_chromium()
    port = free_port()
    process = start_server(port, script)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        stop_server(process)


# Kubernetes' grace between its SIGTERM and its SIGKILL (deploy/k8s/deployment.yaml), and `docker stop`'s is 10 s: a
# server still running after it is a fault (tests/test_deploy.py measures how soon it ends).
GRACE = 30


def stop_server(process: subprocess.Popen) -> float:
    """SIGTERM, as `docker stop` and Kubernetes stop a server; the seconds it took to end. One still running after
    GRACE seconds is killed, and said (AssertionError)."""
    started = time.perf_counter()
    process.terminate()
    try:
        process.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"the app's server ({' '.join(process.args[-6:])}) did not end within {GRACE} s of "
                             "SIGTERM (Kubernetes' grace): killed") from None  # fmt: skip
    return time.perf_counter() - started


def outside_requests(page) -> list[str]:
    """Every address the page asks for that is not this machine: the Docker image runs offline,
    so a font, icon or script from the internet would be missing in the lecture hall."""
    asked = []
    listen(page, "request", lambda request: asked.append(request.url))
    return asked  # read after the test: it fills as the page runs


# What each test added to a page's events, taken off again when the page is lent to the next test (lent_tab).
_LISTENERS: dict[int, list] = {}


def listen(page, event: str, handler) -> None:
    """page.on(event, handler), taken off when the test that added it hands its tab back (lent_tab)."""
    page.on(event, handler)
    _LISTENERS.setdefault(id(page), []).append((event, handler))


# Each browser's one tab, lent to its tests in turn. A page opened in a new browser context compiles Streamlit's and
# Plotly's scripts again and starts a new renderer: on a 2-core Intel Xeon, 6.6 CPU-seconds a Walkthrough opened so,
# against 3.0 in a tab that has opened the app before (docs/benchmarks.md). Each test still starts on a new page
# and a new session: the tab is taken to about:blank, its storage and cookies cleared, its listeners taken off.
_TABS: dict[int, object] = {}


@contextlib.contextmanager
def lent_tab(browser, width: int = 1400, height: int = 1000, scheme: str = "light"):
    """This browser's one tab at this window and colour scheme, as a new context would open it, asking nothing of any
    host but this machine's (checked when it is handed back). A tab whose reset fails is closed, and the next test
    gets a new one. Not for a test that adds scripts to its page (add_init_script) or changes it through the DevTools
    protocol (new_cdp_session: a CPU slowed), which stay with the tab: `fresh_page` (refused here; planted in
    tests/test_browser_helpers.py)."""
    page = _TABS.get(id(browser))
    if page is None:
        page = _TABS[id(browser)] = browser.new_context().new_page()
        for owner, name in ((page, "add_init_script"), (page.context, "add_init_script"),
                            (page.context, "new_cdp_session")):  # fmt: skip
            setattr(owner, name, _kept_from_the_lent_tab(name))
    page.set_viewport_size({"width": width, "height": height})
    page.emulate_media(color_scheme=scheme, reduced_motion="no-preference")
    asked = outside_requests(page)
    try:
        yield page
    except Exception as failure:  # what the page showed, said with the failure, before the tab is handed back
        failure.add_note(last_look(page, os.environ.get("PYTEST_CURRENT_TEST", "lent tab").split(" ")[0]))
        raise
    finally:
        _hand_back(browser, page)
    assert offline(asked) == [], "the page fetched from outside this machine"


def last_look(page, name: str) -> str:
    """A failed test's page as it was: a screenshot (test-artifacts/failed-<name>.png) and what it showed (its
    title, captions, messages, address and Streamlit's run state), said: an element not found in a full suite is
    otherwise only its locator, and the page is gone when the log is read."""
    name = re.sub(r"[^\w.-]+", "-", name)[-120:]
    try:
        screenshot(page, f"failed-{name}")
        return f"the page when it failed (test-artifacts/failed-{name}.png): {page.evaluate(PAGE_SAYS)}"
    except PlaywrightError as error:
        return f"the page when it failed could not be read: {error}"


def _kept_from_the_lent_tab(name: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"{name} on a lent tab would stay with it for the next tests: take `fresh_page`")

    return refuse


def forget_tab(browser) -> None:
    """The browser's lent tab let go, before the browser closes (a later browser may get its id)."""
    _TABS.pop(id(browser), None)


def _hand_back(browser, page) -> None:
    """The tab as a new context has it: no listener of the test's, a new blank document, no storage, no cookie, no
    other tab (a link the test opened in a new one)."""
    for event, handler in _LISTENERS.pop(id(page), []):
        page.remove_listener(event, handler)
    try:
        for other in page.context.pages:
            if other != page:
                other.close()
        if page.url.startswith("http"):
            page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        page.goto("about:blank", timeout=10_000 * SLOW)
        page.context.clear_cookies()
        page.mouse.move(0, 0)
    except PlaywrightError:  # a page the test left unusable: a new one for the next
        _TABS.pop(id(browser), None)
        with contextlib.suppress(PlaywrightError):
            page.context.close()


def offline(asked: list[str]) -> list[str]:
    return [url for url in asked if not url.startswith(("http://127.0.0.1", "data:", "blob:", "about:", "file:"))]


@dataclasses.dataclass(frozen=True)
class Measured:
    """What an in-page measurement found wrong, and how many things it looked at: a measurement that looked at
    nothing checked nothing (`assert_none` fails it)."""

    found: list
    looked_at: int


def across_frames(page, script: str, arg=None) -> list:
    """What `script` returns in every frame of the page: the page itself, where the charts are (ui/live_chart), and
    any frame a page embeds (whatever runs there is checked too). The page's own frame must answer: an error there
    (the script throws, the page is gone) is raised, never read as "nothing found". A child frame that went away
    with a rerun is left out."""
    results = [page.main_frame.evaluate(script, arg)]
    for frame in page.frames:
        if frame is page.main_frame:
            continue
        try:
            results.append(frame.evaluate(script, arg))
        except PlaywrightError:
            if not frame.is_detached():
                raise
    return results


def _measured(page, script: str) -> Measured:
    answers = across_frames(page, script)
    return Measured([item for answer in answers for item in answer["found"]], sum(a["looked"] for a in answers))


def clipped(page) -> Measured:
    """Chart labels that stick out of their chart, of how many labels."""
    return _measured(page, CLIPPED)


def overlaps(page) -> Measured:
    """Pairs of chart texts drawn over each other, of how many pairs."""
    return _measured(page, OVERLAPS)


def worst_contrast(page, script: str = CONTRAST) -> tuple[float, str, int]:
    """The lowest contrast of any chart label against what is behind it, that label, and how many were looked at."""
    answers = across_frames(page, script)
    ratio, label = min(((a[0] if a[0] is not None else float("inf"), a[1]) for a in answers),
                       default=(float("inf"), ""))  # fmt: skip
    return ratio, label, sum(a[2] for a in answers)


def assert_none(measured: Measured, what: str, charts: bool = True) -> None:
    """Nothing found, and (where the view has charts) something looked at."""
    if charts:
        assert measured.looked_at > 0, f"{what}: nothing was measured (no chart label on the page?)"
    assert measured.found == [], f"{what}: {measured.found}"


def sizes(page) -> dict:
    """The smallest tick label, title and hover font of every chart, and the page's button, formula and text."""
    charts = across_frames(page, CHART_SIZES)
    smallest = {name: min((v for found in charts for v in found[name]), default=None) for name in charts[0]}
    assert all(value is not None for value in smallest.values()), f"no chart text measured: {smallest}"
    return {**smallest, "title": max((v for found in charts for v in found["title"]), default=None),
            **page.evaluate(PAGE_SIZES)}  # fmt: skip


def chart_locator(page, prefix):
    """The chart (ui/live_chart's live chart) holding a map or title that starts with `prefix`."""
    wait_for_chart(page, prefix)
    return page.locator(".live-chart").filter(has_text=prefix).first


def wait_for_chart(page, prefix, check=lambda state: True, timeout=30):
    """Until the chart holding `prefix` is drawn and its state passes `check` (see PLOT_STATE). A chart far
    below the viewport is drawn when it comes near: it is scrolled into view first."""
    deadline = time.time() + timeout * SLOW
    state = None
    while time.time() < deadline:
        state = page.evaluate(PLOT_STATE, prefix)
        if state and check(state):
            return state
        with contextlib.suppress(Exception):  # the page navigated meanwhile
            page.evaluate(BRING, prefix)
        time.sleep(0.2)
    raise AssertionError(f"chart {prefix!r} never reached the expected state; last: {state}")


def chart_z(page, prefix):
    """The numbers of the map titled `prefix`, as Plotly holds them (after waiting for it to be drawn)."""
    deadline = time.time() + 30 * SLOW
    while True:  # a rerun may redraw the chart between the two looks: look again
        wait_for_chart(page, prefix)
        z = page.evaluate(CHART_Z, prefix)
        if z is not None:
            return z
        assert time.time() < deadline, f"chart {prefix!r} is drawn but holds no numbers"
        time.sleep(0.1)


# True once Streamlit's script has run and ended and nothing in the frame has changed for `quiet` seconds (polled
# by the browser at each frame; the first look arms the watch). A frame without Streamlit's app in it (a fixture
# page) is judged by its changes alone.
QUIET = """quiet => {
  const watch = window.__quiet ??= (() => {
    const w = {changed: Date.now()};
    new MutationObserver(() => { w.changed = Date.now(); })
      .observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
    return w;
  })();
  // Streamlit's page (its #root) is busy until the script has run and ended: "initial" (the first run not begun
  // yet), "running", "rerunRequested".
  const app = document.querySelector('[data-testid=stApp]');
  if ((app || document.getElementById('root')) && app?.getAttribute('data-test-script-state') !== 'notRunning')
    watch.changed = Date.now();
  // Nor while an element is faded as stale (from the run before), a colour is still in its transition (a scheme
  // switched) or a widget is a grey placeholder while its code loads (stSkeleton): what is read then is neither
  // the old view nor the new one (axe saw grey text at 3.8:1; a slide with its sliders still placeholders).
  const moving = document.getAnimations().some(a => a.playState === 'running'
    && Number.isFinite(a.effect?.getComputedTiming?.().endTime));
  if (moving || document.querySelector('[data-stale=true], [data-testid=stSkeleton]')) watch.changed = Date.now();
  return Date.now() - watch.changed > quiet * 1000;
}"""


def address_holds(page, part: str, timeout: float = 30) -> None:
    """Until the page's address (location.href, read in the page) holds `part`; fails naming the address it has.
    Not Playwright's wait_for_url, which waits for navigation events: a run that writes a dozen bound values
    pushes a dozen history entries within a millisecond, and once in CI (a class's follower, busy machine) the
    wait saw only the first ("navigated to /") and said nothing of the address the page then had."""
    timeout *= SLOW
    try:
        page.wait_for_function("part => location.href.includes(part)", arg=part, polling=100, timeout=timeout * 1000)
    except PlaywrightTimeout:
        now = page.evaluate("location.href")
        raise AssertionError(f"the address never held {part!r} in {timeout:.0f} s: it is {now}") from None


# What a page shows, for a failure's message: its title, its captions (a page's settings line), its messages, its
# address, whether its script is running, and the presentation keys' count of presses (ui/keys.js: sent, run by the
# server, sent again, waiting) with the element in focus.
PAGE_SAYS = """() => ({title: document.querySelector('h1')?.textContent,
  captions: [...document.querySelectorAll('[data-testid=stCaptionContainer]')].map(c => c.textContent).slice(0, 4),
  messages: [...document.querySelectorAll('[data-testid=stAlert], [data-testid=stException]')]
    .map(m => m.textContent.slice(0, 200)),
  address: location.href,
  run: document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state'),
  keys: window.__slideKeys && (({clicked, seen, resent, waiting}) => ({clicked, seen, resent, waiting: waiting.length}))
    (window.__slideKeys), focus: document.activeElement?.tagName})"""


def until_visible(page, locator, what: str, timeout: float = 60) -> None:
    """Until `locator` is visible; fails naming `what` and what the page shows instead (PAGE_SAYS), with a
    screenshot (test-artifacts/missing-<what>.png)."""
    timeout *= SLOW
    try:
        locator.wait_for(timeout=timeout * 1000)
    except PlaywrightTimeout:
        screenshot(page, "missing-" + re.sub(r"\W+", "-", what))
        says = page.evaluate(PAGE_SAYS)
        raise AssertionError(f"{what} not shown in {timeout:.0f} s; the page shows {says}") from None


def text_shown(page, text: str, timeout: float = 30) -> None:
    """Until `text` is visible on the page; fails saying what the page shows instead (title, captions, address),
    where Playwright's timeout names only the text it waited for."""
    timeout *= SLOW
    try:
        page.get_by_text(text).first.wait_for(timeout=timeout * 1000)
    except PlaywrightTimeout:
        raise AssertionError(
            f"{text!r} not shown in {timeout:.0f} s; the page shows {page.evaluate(PAGE_SAYS)}"
        ) from None


def settled(page, quiet: float = 0.3, timeout: float = 30) -> None:
    """Until Streamlit's script has finished its run and nothing on the page (and in any frame it embeds) has
    changed for `quiet` seconds (a rerun updates its charts in turn); fails if it is still changing after
    `timeout` seconds."""
    timeout *= SLOW
    try:
        page.main_frame.wait_for_function(QUIET, arg=quiet, polling="raf", timeout=timeout * 1000)
        for frame in page.frames:
            if frame is not page.main_frame and not frame.is_detached():
                frame.wait_for_function(QUIET, arg=quiet, polling="raf", timeout=timeout * 1000)
    except PlaywrightTimeout:
        raise AssertionError(f"the page was still changing after {timeout:.0f} s (never quiet for {quiet} s)") from None


RUN_ENDED = "document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state') === 'notRunning'"


# Counts the page's runs that end from now on (window.__runsEnded): what a wait for a rerun that was asked for reads,
# where a quiet moment can come before the rerun begins on a busy machine (runs_ended).
# Evaluated again on the same page, it starts the count again (one observer a page: a second would count twice).
COUNT_RUNS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  window.__runsEnded = 0;
  if (window.__runsCounted) return;
  window.__runsCounted = true;
  new MutationObserver(() => { if (app.getAttribute('data-test-script-state') === 'notRunning') window.__runsEnded++; })
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def runs_ended(page, at_least: int, timeout: float = 30) -> None:
    """Until at least `at_least` runs have ended since COUNT_RUNS was evaluated on the page."""
    failure = f"fewer than {at_least} of the page's runs ended"
    _until(page, f"() => window.__runsEnded >= {at_least}", timeout, lambda: failure)


def idle(page, quiet: float = 1.0, timeout: float = 60) -> None:
    """Until Streamlit's script has ended its run and nothing on the page has changed for `quiet` seconds: what
    a check that something does NOT happen waits for (instead of a fixed sleep)."""
    page.wait_for_function(f"() => {RUN_ENDED}", timeout=timeout * SLOW * 1000)
    settled(page, quiet=quiet, timeout=timeout)


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # from npm: package.json, installed by `make test`
# Where the app's readers see serious trouble: axe-core's impacts "serious" and "critical" (WCAG 2 A and AA and
# best practice), each as its rule, how many elements, and the first three of them with what to fix; and how many
# rules found something to check.
# The rules that read a page's colours: all that can change when only its colour scheme does (the document, its
# names, roles and sizes are the scheme's before and after the switch). check_view_in_both_schemes runs all of axe's
# rules in the first scheme and these in the other.
COLOUR_RULES = ("color-contrast", "link-in-text-block")
AXE_RUN = """async rules => {
  const only = rules === "colours" ? {runOnly: {type: "rule", values: COLOUR_RULES}} : {};
  const result = await axe.run(document, {resultTypes: ["violations"], ...only});
  const found = result.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
    `${v.id} (${v.impact}, ${v.nodes.length}): ` +
    v.nodes.slice(0, 3).map(n => `${n.target.join(" ")}: ${n.failureSummary.replace(/\\s+/g, " ")}`).join(" | "));
  return {found, looked: result.passes.length + result.violations.length};
}""".replace("COLOUR_RULES", json.dumps(list(COLOUR_RULES)))
# axe-core's answer for each view already checked in this test session: a walk that comes back to a view (a deck
# shows the Walkthrough's slides again) does not run it twice. A view is what the page shows, not its address
# (/check's verdicts, a follower's page and a popover open all keep theirs): its whole document (every element, its
# attributes and text) and what axe's rules read of each element's style (its colours, opacity, type size and
# weight, visibility: a stylesheet's rule changes them without a change in the document), the window's size and the
# colour scheme. The page hashes it (cyrb53, 53 bits) rather than send a megabyte of SVG to be hashed here.
_axe_answers: dict[tuple, Measured] = {}
VIEW = """() => {
  const styles = [...document.getElementsByTagName('*')].map(element => {
    const s = getComputedStyle(element);
    return [s.color, s.backgroundColor, s.backgroundImage, s.opacity, s.fontSize, s.fontWeight, s.visibility,
            s.display].join('|');
  });
  const text = document.documentElement.outerHTML + '\\n' + styles.join('\\n');
  let h1 = 0xdeadbeef, h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return [4294967296 * (2097151 & h2) + (h1 >>> 0), text.length];
}"""


def view_key(page) -> tuple:
    """What identifies the view on screen, for accessibility()'s answers."""
    size = page.viewport_size or {}
    dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    digest, length = page.evaluate(VIEW)
    return page.url, size.get("width"), size.get("height"), dark, digest, length


def accessibility(page, rules: str = "all") -> Measured:
    """The serious and critical violations axe-core finds on the page as it is now (injected from npm's copy), and
    how many of its rules applied: all of them, or ("colours") COLOUR_RULES. Cached by the view (view_key): its
    document, its elements' styles as axe reads them, the window and the colour scheme; and by the rules run."""
    if not AXE.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the accessibility checks: `npm ci` installs axe-core (see the Makefile)")
        pytest.skip("axe-core is not installed here (npm ci); `make test` installs it")
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))  # before the key: the script tag is an element of the view
    key = (*view_key(page), rules)
    if key not in _axe_answers:
        answer = page.evaluate(AXE_RUN, rules)
        _axe_answers[key] = Measured(answer["found"], answer["looked"])
    return _axe_answers[key]


def accessibility_problems(page, rules: str = "all") -> list[str]:
    """axe-core's serious and critical violations here (`accessibility`), failing if it checked nothing."""
    measured = accessibility(page, rules)
    assert measured.looked_at > 0, "axe-core applied no rule: it did not run on this page"
    return measured.found


def check_view(page, what: str, charts: bool | None = None, axe: bool = True, rules: str = "all") -> None:
    """What every view a walk reaches must pass: no traceback; no chart label outside its chart and no two chart
    texts over each other (where the view has charts, with some looked at); no serious accessibility problem.
    `charts`: whether the view has charts; by default, whether the server sent it any (a chart sent but not drawn
    then fails: nothing is measured). `axe=False`: where the same view was checked by axe-core at another size;
    `rules`: axe's rules run (accessibility)."""
    settled(page)  # a page mid-rerun is faded while Streamlit redraws it: axe would measure the fade
    if charts is None:
        charts = page.locator(".live-chart").count() > 0
    if charts:  # a rerun's charts are drawn after a quiet moment on a busy machine: measured once drawn
        charts_drawn(page, what)
    no_traceback(page)
    assert_none(clipped(page), f"{what}: labels outside their chart", charts)
    assert_none(overlaps(page), f"{what}: texts drawn over each other", charts)
    if axe:
        problems = accessibility_problems(page, rules)
        assert problems == [], f"{what}: {problems}"  # said in full: tests/browser.py's asserts are not rewritten


# Whether every chart drawn on the page (PAGE_ELEMENT) has followed the page's colour scheme: its paper is the page's
# background, its labels are there, and chart.js draws none and has each in the colours its place on the page has
# now. After a switch chart.js redraws each chart once Streamlit has repainted the page; on a busy machine that comes
# after a quiet moment, so a check that only waited for quiet measured a chart mid-redraw.
IN_PAGE_COLOURS = (
    """() => {
  """
    + LUMINANCE
    + """
  const app = getComputedStyle("""
    + PAGE_ELEMENT
    + """), page = rgb(app.backgroundColor);
  // Streamlit's own repaint done: the page's text readable on its background (seen seconds apart in a full suite)
  if (ratio(luminance(rgb(app.color)), luminance(page)) < 4.5) return false;
  return [...document.querySelectorAll('.js-plotly-plot')].every(gd => gd._fullLayout
    && rgb(gd._fullLayout.paper_bgcolor) === page && gd.querySelector('g[class$="tick"] > text, text[class$="title"]'))
    && (window.__liveCharts ? window.__liveCharts.followed() : true);  // no chart.js on the page: nothing to follow
}"""
)


APP_COLOURS = (
    """() => { const app = getComputedStyle("""
    + PAGE_ELEMENT
    + """);
  return `text ${app.color} on ${app.backgroundColor}`; }"""
)


# A chart's labels drawn on the page, and every chart on or near the screen showing its latest figure in the page's
# colours (chart.js's own account, kept where automation drives the browser): what a measurement of labels waits for.
CHARTS_DRAWN = """() => document.querySelector(
  '.js-plotly-plot g[class$="tick"] > text, .js-plotly-plot text[class$="title"]') !== null
  && (window.__liveCharts ? window.__liveCharts.followed() : true)"""


def charts_drawn(page, what: str, timeout: float = 30) -> None:
    """Until a chart's labels are on the page and every chart near the screen is drawn (CHARTS_DRAWN): a view whose
    charts were sent and are not drawn in `timeout` fails, named."""
    _until(page, CHARTS_DRAWN, timeout, lambda: f"{what}: its charts were sent and not drawn")


def _until(page, script: str, timeout: float, failure) -> None:
    """Until `script` is true in the page; else an AssertionError saying failure() (read after the wait) and the
    limit waited."""
    timeout *= SLOW
    try:
        page.wait_for_function(script, timeout=timeout * 1000)
    except PlaywrightTimeout:
        raise AssertionError(f"{failure()} in {timeout:.0f} s") from None


def charts_followed(page, what: str, timeout: float = 30) -> None:
    """Until every chart has followed the page's colours (IN_PAGE_COLOURS); fails naming the scheme."""
    _until(
        page,
        IN_PAGE_COLOURS,
        timeout,
        lambda: f"{what}: the charts did not follow the page's {scheme(page)} colours",
    )


def scheme(page) -> str:
    """The colour scheme the page is shown in now: "light" or "dark"."""
    return "dark" if page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") else "light"


def check_view_in_both_schemes(
    page, what: str, shot: str | None = None, charts: bool | None = None, other: str = "full", axe: bool = True
) -> None:
    """check_view and the charts' contrast (4.5:1 against what is behind each label) in the scheme the page is in,
    then again after the reader's system switches to the other one, live, as a laptop's evening switch does during
    a lecture (the page is not reloaded: Streamlit repaints it and the charts follow). The page is left in the
    other scheme, so a walk alternates. `shot`: a screenshot's name, taken in each scheme. `other`: what the other
    scheme gets: "full" (check_view, the contrast, the screenshot), "colours" (the screenshot and the contrast: where
    check_view there would repeat the layout checked in the first scheme at this size) or "none" (no switch: where
    the colours of every view were measured in both schemes at another size, which they do not depend on). `axe`:
    as check_view's."""
    for turn in range(1 if other == "none" else 2):
        if turn:
            page.emulate_media(color_scheme="light" if scheme(page) == "dark" else "dark")
            charts_followed(page, what)  # not a quiet moment before the redraw
            settled(page)
        now = scheme(page)
        if shot:
            screenshot(page, f"{shot}-{now}")  # before the checks: a failure is seen
        if turn == 0 or other == "full":
            check_view(page, f"{what} ({now})", charts, axe, rules="colours" if turn else "all")
        else:  # what check_view waits for first: after a switch, Streamlit may repaint again after a quiet moment
            settled(page)
        ratio, label, looked = readable_charts(page, f"{what} ({now})")  # once the charts have followed (again)
        drawn = page.locator(".live-chart").count() > 0 if charts is None else charts
        assert looked > 0 or not drawn, f"{what} ({now}): no chart label to measure"
        assert ratio >= 4.5, f"{what} ({now}): {label!r} has contrast {ratio:.1f}"


def readable_charts(page, what: str, timeout: float = 30) -> tuple[float, str, int]:
    """worst_contrast, once the charts have followed the page's colours (charts_followed): measured once. A label
    below 4.5:1 is the caller's failure, whatever a later look would see: a student at the back reads it now."""
    charts_followed(page, what, timeout)
    return worst_contrast(page)


def no_traceback(page):
    """No exception box, and no traceback in the page's text (read in the page: the whole document sent here, SVG
    and all, takes ten times as long)."""
    assert page.locator("[data-testid='stException']").count() == 0
    assert not page.evaluate("() => document.documentElement.textContent.includes('Traceback')")


def screenshot(page, name):
    """The page as it is, into test-artifacts/. caret="initial": Playwright's default hides a text caret by adding a
    style to the page for the shot, a change that made the settled() after every screenshot wait its quiet 0.3 s
    (lecture 000's deck at 1920x1080: 34 s, 26 s without it)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), caret="initial")


def toggle(page, label):
    """A sidebar toggle by its label (the same words can also be a link or an emphasis on the page)."""
    return page.get_by_test_id("stSidebarUserContent").get_by_text(label, exact=True)


def masks_measured(page, progress: bool = True) -> bool:
    """On the Real model page's masks after MLA (slide or section): measured by a click if this server has not yet
    measured them (`progress`: its progress is seen), then shown measured. The server keeps the sweep for every
    reader, so the test that comes first measures it and every later one sees it measured: each checks the measured
    view, whatever the order. Whether this call measured them."""
    button = page.get_by_role("button", name="Measure every mask")
    shown = page.get_by_text("Losing most weight under")
    button.or_(shown).first.wait_for(timeout=60000 * SLOW)
    measuring = button.count() > 0
    if measuring:
        button.click(timeout=60000 * SLOW)
        if progress:
            page.get_by_text("Measuring:").first.wait_for(timeout=60000 * SLOW)
    shown.first.wait_for(timeout=180000 * SLOW)
    return measuring
