"""Helpers for driving the app in a real browser (Debian's Chromium via Playwright): starting the server,
and measurements taken inside the page (what Plotly painted, labels outside their chart, overlapping
text, contrast on screen and in the exported image). Used by the browser tests and the benchmarks."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

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

# The text of every chart label (ticks, axis titles, colour-bar numbers, titles) that sticks out of its chart.
CLIPPED = """() => {
  const out = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const chart = gd.querySelector('.main-svg').getBoundingClientRect();
    for (const label of gd.querySelectorAll(
        'g[class$="tick"] text, .g-xtitle, .g-ytitle, .cbaxis text, .gtitle, .gtitle-subtitle, .annotation-text')) {
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

# Pairs of texts in one chart that are drawn over each other: the title, subtitle and sub-plot titles,
# and the numbers written in neighbouring cells ("-1.42-0.99" run together).
OVERLAPS = """() => {
  const out = [];
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 2 && b.top < a.bottom - 2;
  const boxes = texts => texts.map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, b]) => b.width > 0);
  const pairs = (one, other) => {  // other === null: every pair within `one`
    for (let i = 0; i < one.length; i++)
      for (const b of other === null ? one.slice(i + 1) : other)
        if (hit(one[i][1], b[1])) out.push(`${one[i][0]} | ${b[0]}`);
  };
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const titles = boxes([...gd.querySelectorAll(
      '.gtitle, .gtitle-subtitle, .annotation-text, .g-xtitle text, .g-ytitle text')]);
    pairs(titles, null);  // title, subtitle, sub-plot and axis titles
    pairs(boxes([...gd.querySelectorAll('.heatmaplayer text, .hm text')]), null);  // numbers in neighbouring cells
    pairs(titles, boxes([...gd.querySelectorAll('g[class$="tick"] > text')]));  // a title over the tick labels
  }
  return out;
}"""

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

# The lowest contrast (WCAG: text needs 4.5) between any chart label, of every sub-plot and legend, and
# the page behind it, with the label that has it.
CONTRAST = (
    """() => {
  """
    + LUMINANCE
    + """
  const app = document.querySelector('.stApp');
  const back = luminance(getComputedStyle(app).backgroundColor);
  let worst = [Infinity, ''];
  const labels = 'g[class$="tick"] > text, text[class$="title"], .gtitle-subtitle, .annotation-text, ' +
                 '.legendtext, .legendtitletext, .cbaxis text';
  for (const label of document.querySelectorAll(`.js-plotly-plot :is(${labels})`)) {
    if (!label.textContent.trim()) continue;
    const r = ratio(luminance(getComputedStyle(label).fill), back);
    if (r < worst[0]) worst = [r, label.textContent];
  }
  return worst;
}"""
)

# The same for the PNG the camera button saves: Plotly draws it from the figure's layout (the page's CSS does
# not reach it), so the layout's text colours against its paper colour are what the image shows.
EXPORT_CONTRAST = (
    """() => {
  """
    + LUMINANCE
    + """
  let worst = [Infinity, ''];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const L = gd._fullLayout;
    const paper = luminance(rgb(L.paper_bgcolor));
    const texts = [['title', L.title?.font?.color], ['font', L.font?.color], ['legend', L.legend?.font?.color]];
    for (const name of Object.keys(L).filter(k => /^[xy]axis\\d*$/.test(k)))
      texts.push([`${name} ticks`, L[name].tickfont?.color], [`${name} title`, L[name].title?.font?.color]);
    for (const a of L.annotations || []) texts.push([`annotation ${a.text}`, a.font?.color]);
    for (const [name, colour] of texts) {
      if (!colour) continue;
      const r = ratio(luminance(rgb(colour)), paper);
      if (r < worst[0]) worst = [r, `${L.title.text}: ${name} ${colour} on ${L.paper_bgcolor}`];
    }
  }
  return worst;
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, script: str = "app.py", env: dict | None = None) -> subprocess.Popen:
    """`streamlit run` on 127.0.0.1:port; `env`: variables to add (e.g. a cookie secret shared by replicas)."""
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})},
    )  # fmt: skip


def wait_healthy(url: str, timeout: float = 60) -> None:
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
        process.terminate()
        process.wait(timeout=20)


def outside_requests(page) -> list[str]:
    """Every address the page asks for that is not this machine: the Docker image runs offline,
    so a font, icon or script from the internet would be missing in the lecture hall."""
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    return asked  # read after the test: it fills as the page runs


def offline(asked: list[str]) -> list[str]:
    return [url for url in asked if not url.startswith(("http://127.0.0.1", "data:", "blob:", "about:"))]


def across_frames(page, script: str, arg=None) -> list:
    """What `script` returns in every frame of the page: the page itself, where the charts are (ui/chart.py), and
    any frame a page embeds (whatever runs there is checked too)."""
    results = []
    for frame in page.frames:
        try:
            results.append(frame.evaluate(script, arg))
        except Exception:  # a frame that went away with a rerun
            continue
    return results


def clipped(page) -> list[str]:
    return [label for found in across_frames(page, CLIPPED) for label in found]


def overlaps(page) -> list[str]:
    return [pair for found in across_frames(page, OVERLAPS) for pair in found]


def worst_contrast(page, script: str = CONTRAST) -> tuple[float, str]:
    return min((tuple(found) for found in across_frames(page, script)), default=(float("inf"), ""))


def sizes(page) -> dict:
    """The smallest tick label, title and hover font of every chart, and the page's button, formula and text."""
    charts = across_frames(page, CHART_SIZES)
    smallest = {name: min((v for found in charts for v in found[name]), default=None) for name in charts[0]}
    return {**smallest, "title": max((v for found in charts for v in found["title"]), default=None),
            **page.evaluate(PAGE_SIZES)}  # fmt: skip


def chart_locator(page, prefix):
    """The chart (ui/chart.py's live chart) holding a map or title that starts with `prefix`."""
    wait_for_chart(page, prefix)
    return page.locator(".live-chart").filter(has_text=prefix).first


def wait_for_chart(page, prefix, check=lambda state: True, timeout=30):
    """Until the chart holding `prefix` is drawn and its state passes `check` (see PLOT_STATE). A chart far
    below the viewport is drawn when it comes near: it is scrolled into view first."""
    deadline = time.time() + timeout
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
    deadline = time.time() + 30
    while True:  # a rerun may redraw the chart between the two looks: look again
        wait_for_chart(page, prefix)
        z = page.evaluate(CHART_Z, prefix)
        if z is not None or time.time() > deadline:
            return z
        time.sleep(0.1)


def settled(page, quiet: float = 1.0, timeout: float = 30) -> None:
    """Until no frame of the page has changed for `quiet` seconds (a rerun updates its charts in turn)."""
    arm = """() => { window.__drawn = Date.now();
      new MutationObserver(() => { window.__drawn = Date.now(); })
        .observe(document.body, {subtree: true, childList: true, attributes: true}); }"""
    across_frames(page, arm)
    deadline = time.time() + timeout
    while time.time() < deadline:
        latest = max((t for t in across_frames(page, "window.__drawn ?? 0") if t), default=0)
        if time.time() * 1000 - latest > quiet * 1000:
            return
        time.sleep(0.2)


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # from npm: package.json, installed by `make test`
# Where the app's readers see serious trouble: axe-core's impacts "serious" and "critical" (WCAG 2 A and AA and
# best practice), each as its rule, how many elements, and the first three of them with what to fix.
AXE_RUN = """async () => {
  const found = await axe.run(document, {resultTypes: ["violations"]});
  return found.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
    `${v.id} (${v.impact}, ${v.nodes.length}): ` +
    v.nodes.slice(0, 3).map(n => `${n.target.join(" ")}: ${n.failureSummary.replace(/\\s+/g, " ")}`).join(" | "));
}"""


def accessibility_problems(page) -> list[str]:
    """The serious and critical violations axe-core finds on the page as it is now (injected from npm's copy)."""
    if not AXE.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run the accessibility checks: `npm ci` installs axe-core (see the Makefile)")
        pytest.skip("axe-core is not installed here (npm ci); `make test` installs it")
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN)


def no_traceback(page):
    assert page.locator("[data-testid='stException']").count() == 0
    assert "Traceback" not in page.content()


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def toggle(page, label):
    """A sidebar toggle by its label (the same words can also be a link or an emphasis on the page)."""
    return page.get_by_test_id("stSidebarUserContent").get_by_text(label, exact=True)
