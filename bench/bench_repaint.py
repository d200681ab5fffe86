"""How fast a d_k step repaints, as a ratio to a trivial one-slider, one-heatmap Streamlit app measured in the
same run, interleaved (machines differ by 2x or more; the ratio travels). Issue 12's targets, at the default
sentence: first changed chart <= 2x the trivial app, whole walkthrough settled <= 4x.

Both apps run on their own server; one Chromium, one tab each. Each step: press ArrowRight (or ArrowLeft) on
the d_k slider; in the page, requestAnimationFrame watches for the first chart title that shows the new d_k
("first changed chart") and a MutationObserver notes the last change to any chart ("settled": nothing drawn
for 0.7 s after it). Steps alternate between the two apps.

Run: .venv/bin/python bench/bench_repaint.py [--steps 10] [--tokens 5 16 128]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, running_app, wait_for_chart  # noqa: E402

# The yardstick: the workspace's shared trivial app, copied beside this file (tests/test_bench.py holds the two equal).
YARDSTICK = Path(__file__).with_name("trivial_app.py")
QUIET_MS = 700
TOP = """() => (document.querySelector('[data-testid="stMain"]') || document.scrollingElement).scrollTo(0, 0)"""

# Runs in every frame of the page before the key press (the charts are in the page itself; the yardstick's
# st.plotly_chart too): notes, in epoch milliseconds, when a chart title first shows `text` and when any
# chart last changed, and the key press.
WATCH = """text => {
  window.__first = null; window.__last = null; window.__pressed = null;
  document.addEventListener('keydown', () => { window.__pressed ??= Date.now(); }, {capture: true, once: true});
  const shown = () => [...document.querySelectorAll('.gtitle, .gtitle-subtitle, .annotation-text')]
    .some(t => t.textContent.includes(text));
  const check = () => { if (shown()) window.__first = Date.now(); else requestAnimationFrame(check); };
  requestAnimationFrame(check);
  window.__observer?.disconnect();
  window.__observer = new MutationObserver(records => {
    if (records.some(r => r.target.closest?.('.js-plotly-plot, .live-chart, [data-testid="stPlotlyChart"]')))
      window.__last = Date.now();
  });
  window.__observer.observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def _frames_value(page, name: str) -> list[float]:
    values = []
    for frame in page.frames:
        try:
            value = frame.evaluate(f"window.{name}")
        except Exception:  # a frame that went away with the rerun
            continue
        if value is not None:
            values.append(value)
    return values


def timed(page, press, text: str) -> tuple[float, float]:
    """Run `press()` (a key press) and time it: (ms to the first chart title showing `text`, ms to the last
    chart change, nothing drawn for QUIET_MS after it)."""
    page.bring_to_front()  # a background tab gets no animation frames
    for frame in page.frames:
        frame.evaluate(WATCH, text)
    press()
    deadline = time.time() + 120
    while not _frames_value(page, "__first") and time.time() < deadline:
        time.sleep(0.05)
    quiet_since, last_seen = time.time(), None
    while time.time() < deadline:  # until no chart has changed for QUIET_MS
        last = max(_frames_value(page, "__last"), default=None)
        if last != last_seen:
            last_seen, quiet_since = last, time.time()
        elif time.time() - quiet_since > QUIET_MS / 1000:
            break
        time.sleep(0.05)
    pressed = page.evaluate("window.__pressed")
    return min(_frames_value(page, "__first")) - pressed, (last_seen or pressed) - pressed


def step(page, slider_name: str, text_for) -> tuple[float, float]:
    """One d_k step on a page (ArrowRight, or ArrowLeft from an odd d_k): see `timed`."""
    slider = page.get_by_role("slider", name=slider_name)
    d_k = int(slider.input_value())
    key, target = ("ArrowRight", d_k + 1) if d_k % 2 == 0 else ("ArrowLeft", d_k - 1)
    slider.focus()
    return timed(page, lambda: slider.press(key), text_for(target))


# Charts below the fold are drawn when they come within a screen of the viewport (ui/live_chart/frontend):
# after a change, scrolling down finds them out of date for a moment. Each chart notes the figure it has
# drawn (__spec) and the one the server sent last (__latest).
BOTTOM_DRAWN = """() => new Promise(resolve => {
  const pane = document.querySelector('[data-testid="stMain"]') || document.scrollingElement;
  pane.scrollTo(0, pane.scrollHeight);
  const scrolled = Date.now();
  const check = () => {
    const onScreen = [...document.querySelectorAll('.live-chart')].filter(chart => {
      const box = chart.getBoundingClientRect();
      return box.bottom > 0 && box.top < innerHeight;
    });
    if (onScreen.length && onScreen.every(chart => chart.__spec === chart.__latest)) resolve(Date.now() - scrolled);
    else if (Date.now() - scrolled > 60000) resolve(null);
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})"""


def scroll_in(page) -> float:
    """Scroll from the top to the bottom of the page: ms until every chart then on screen shows the newest
    figure."""
    drawn = page.evaluate(BOTTOM_DRAWN)
    if drawn is None:
        raise AssertionError("charts scrolled into view were not drawn within 60 s")
    return drawn


@contextlib.contextmanager
def beside_the_yardstick():
    """The trivial app and this app, each on its own server, in two tabs of one Chromium (1400x1000), the trivial
    app's chart drawn; yields (trivial tab, app tab, the app's address)."""
    from playwright.sync_api import sync_playwright

    with running_app(str(YARDSTICK)) as trivial_url, running_app("app.py") as app_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        trivial = browser.new_page(viewport={"width": 1400, "height": 1000})
        app = browser.new_page(viewport={"width": 1400, "height": 1000})
        trivial.goto(trivial_url)
        wait_for_chart(trivial, "Q [5x")
        try:
            yield trivial, app, app_url
        finally:
            browser.close()


def main(steps: int, token_counts: list[int]) -> None:
    with beside_the_yardstick() as (trivial, app, url):
        cores = subprocess.check_output(["nproc"]).decode().strip()
        print(f"machine: {platform.machine()}, {cores} cores; Chromium and both servers on it; {steps} steps each,"
              f" interleaved; yardstick {YARDSTICK.name}")  # fmt: skip
        for n in token_counts:
            text = "The next day is bright" if n == 5 else " ".join(f"w{i}" for i in range(n))
            app.goto(f"{url}/?text={quote(text)}")
            wait_for_chart(app, "attention weights", timeout=180)
            app.evaluate(TOP)  # back to the top: the first stages are what a reader sees after the change
            step(app, "d_k (query/key width per head)", lambda d: f"[8x{d}]")  # warm both once
            step(trivial, "d_k", lambda d: f"[5x{d}]")
            base_first, first, last, below = [], [], [], []
            for _ in range(steps):
                base_first.append(step(trivial, "d_k", lambda d: f"[5x{d}]")[0])
                f, s = step(app, "d_k (query/key width per head)", lambda d: f"[8x{d}]")  # W_Q [8 x d_k]
                first.append(f)
                last.append(s)
                below.append(scroll_in(app))  # then the charts below the fold, scrolled to
                app.evaluate(TOP)
                time.sleep(0.3)
            yard = statistics.median(base_first)
            first, last, below = (statistics.median(times) for times in (first, last, below))
            print(
                f"{n:>4} tokens: trivial app {yard:4.0f} ms | walkthrough: first changed chart {first:4.0f} ms ="
                f" {first / yard:3.1f}x (target 2x), settled {last:4.0f} ms = {last / yard:3.1f}x (target 4x);"
                f" then scrolled to the bottom, its charts drawn in {below:4.0f} ms"
            )  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--tokens", type=int, nargs="+", default=[5, 16, 128])
    args = parser.parse_args()
    main(args.steps, args.tokens)
