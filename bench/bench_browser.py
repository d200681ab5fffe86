"""What a person waits for, in a real browser (Debian's Chromium driven by Playwright), beyond the d_k repaint
that bench_repaint.py measures as a ratio to a trivial app:

- `streamlit run` -> first heatmap painted: <= 10 s
- presentation mode: the → key -> the next stage painted
- bytes sent to the browser per rerun at the token cap (4096 tokens; the Real model page at its
  128-token cap with SmolLM2): <= 2 MB, and the time of a d_k step there

Bytes are the websocket frames the browser received between the change and the end of the rerun.
Run: .venv/bin/python bench/bench_browser.py [--default-only]
"""

import statistics
import string
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_repaint import TOP, step  # noqa: E402  (bench/ is on the path when this file runs)

from attention_core import MAX_TOKENS  # noqa: E402
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, start_server, wait_for_chart, wait_healthy  # noqa: E402

REPEATS = 10


class Frames:
    """Counts the bytes of websocket frames the page receives."""

    def __init__(self, page):
        self.bytes = 0
        self.last = time.perf_counter()
        page.on("websocket", lambda ws: ws.on("framereceived", self._count))

    def _count(self, payload):
        self.bytes += len(payload)
        self.last = time.perf_counter()

    def wait_quiet(self, page, quiet=0.5, timeout=120.0):
        """Until no frame has come for `quiet` seconds: the rerun has sent everything."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() - self.last < quiet and time.perf_counter() < deadline:
            page.wait_for_timeout(50)


def dk_steps(page, frames, n_steps: int, quiet: float = 0.5) -> tuple[float, float, int]:
    """Move d_k one step at a time: (median ms to the first changed chart, median ms to settled, largest rerun's
    bytes)."""
    first, settled, sizes = [], [], []
    for _ in range(n_steps):
        frames.bytes = 0
        f, s = step(page, "d_k (query/key width per head)", lambda d: f"[8x{d}]")
        frames.wait_quiet(page, quiet)  # the rest of the rerun may still be arriving; count all of it
        first.append(f)
        settled.append(s)
        sizes.append(frames.bytes)
    return statistics.median(first), statistics.median(settled), max(sizes)


# Presentation mode: each → shows the next stage in a chart made after the key press. The page watches its
# charts on every animation frame and notes when one has drawn a map whose full title (its trace's name: a
# narrow slide moves the formula into a subtitle) holds `target`.
NEXT_STAGE_WATCH = """target => {
  window.__first = null;
  const drawn = chart => chart.__spec && chart.__spec === chart.__latest &&
    (chart.data || []).some(trace => (trace.name || '').includes(target));
  const check = () => {
    if ([...document.querySelectorAll('.live-chart')].some(drawn)) window.__first = Date.now();
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
  return Date.now();
}"""


def next_stage_times(browser, url: str, rounds: int = 2) -> list[float]:
    """ms from the → key to the next stage's chart painted, from X through the scaled scores, `rounds` times."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    times = []
    for _ in range(rounds):
        page.goto(f"{url}/?present=true")
        wait_for_chart(page, "X  [", timeout=60)
        for following in ("W_Q  [", "Q = X·W_Q", "scores = Q·Kᵀ", "scaled scores"):
            pressed = page.evaluate(NEXT_STAGE_WATCH, following)
            page.keyboard.press("ArrowRight")
            page.wait_for_function("window.__first !== null", timeout=60_000, polling=100)
            times.append(page.evaluate("window.__first") - pressed)
            page.wait_for_timeout(500)
    page.close()
    return times


def main(only: str | None = None):
    """All cases, or with only="default" the start and the default sentence (a quick check)."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        frames = Frames(page)
        started = time.perf_counter()
        server = start_server(port)
        try:
            wait_healthy(url)
            healthy = time.perf_counter() - started
            page.goto(url)
            wait_for_chart(page, "X  [", timeout=120)
            first = time.perf_counter() - started
            wait_for_chart(page, "attention weights", lambda s: len(s["ticks"]) == 5, timeout=120)
            weights = time.perf_counter() - started
            print(f"streamlit run -> healthy {healthy:.1f} s, -> first heatmap (X) painted {first:.1f} s (target 10 s),"
                  f" -> the weights (scrolled to) {weights:.1f} s")  # fmt: skip
            loads = []
            for _ in range(3):  # a reader opening the link on a warm server: a new session, the page's own files
                started = time.perf_counter()
                page.goto(url)
                wait_for_chart(page, "X  [", timeout=120)
                loads.append(time.perf_counter() - started)
            print(f"page load on a warm server -> first heatmap painted: median {statistics.median(loads):.1f} s"
                  f" ({', '.join(f'{t:.1f}' for t in loads)})")  # fmt: skip
            page.evaluate(TOP)
            first, settled, largest = dk_steps(page, frames, REPEATS)
            print(f"d_k change, default sentence: first changed chart {first:.0f} ms, settled {settled:.0f} ms, "
                  f"{largest / 1e3:.0f} kB sent (bench_repaint.py gives these as ratios)")  # fmt: skip
            if only == "default":
                return

            steps = next_stage_times(browser, url)
            print(f"presentation mode, → (next stage) -> painted: median {statistics.median(steps):.0f} ms"
                  f" ({len(steps)} steps)")  # fmt: skip

            words = " ".join(string.ascii_lowercase[i % 26] for i in range(MAX_TOKENS))  # within the 20,000 characters
            page.goto(f"{url}/?text={quote(words)}")
            wait_for_chart(page, "attention weights", lambda s: "[4096x4096]" in s["title"], timeout=300)
            page.evaluate(TOP)
            first, settled, largest = dk_steps(page, frames, 4, quiet=3.0)  # seconds pass between its messages
            print(
                f"d_k change at the {MAX_TOKENS}-token cap: first changed chart {first:.0f} ms, settled {settled:.0f}"
                f" ms; largest rerun sent {largest / 1e6:.2f} MB (target 2 MB)"
            )

            text = quote(" ".join(["the quick brown fox"] * 60))
            page.goto(f"{url}/real_model?text={text}")
            wait_for_chart(page, "attention weights", lambda s: s["ticks"][0] == "[CLS]", timeout=120)
            frames.bytes = 0
            model = quote("SmolLM2-135M-Instruct (Llama-style decoder)")
            start = time.perf_counter()
            page.goto(f"{url}/real_model?text={text}&rm_model={model}")
            wait_for_chart(page, "Attention weights of all 30 layers", timeout=120)
            wait_for_chart(page, "attention weights", lambda s: s["ticks"][0] == "the", timeout=120)
            seconds = time.perf_counter() - start
            frames.wait_quiet(page)
            print(
                f"Real model page, SmolLM2 at the 128-token cap (page load, model already cached): "
                f"{seconds:.1f} s, {frames.bytes / 1e6:.2f} MB sent (target 2 MB)"
            )
        finally:
            server.terminate()
            server.wait(timeout=20)
            browser.close()


if __name__ == "__main__":
    main(only="default" if "--default-only" in sys.argv[1:] else None)
