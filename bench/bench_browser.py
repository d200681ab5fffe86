"""What a person waits for, in a real browser (Debian's Chromium driven by Playwright). Issue 3's targets:

- `streamlit run` -> first heatmap painted: <= 10 s
- widget change (d_k slider, one step) -> the updated heatmap painted: median <= 300 ms at the
  default sentence, <= 1 s at 128 tokens
- (also) presentation mode: the → key -> the next stage painted
- bytes sent to the browser per rerun at the token cap (4096 tokens; the Real model page at its
  128-token cap with SmolLM2): <= 2 MB

Bytes are the websocket frames the browser received between the change and the paint.
Run: .venv/bin/python bench/bench_browser.py [--default-only]
"""

import statistics
import string
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attention_core import MAX_TOKENS  # noqa: E402
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, wait_for_chart  # noqa: E402

REPEATS = 10


def start_server(port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


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


def settle(page, slider, timeout=10.0):
    """Wait until the rerun is over: while it runs the old widget can still be in the page beside the new one."""
    deadline = time.perf_counter() + timeout
    while slider.count() != 1 and time.perf_counter() < deadline:
        time.sleep(0.05)


# Runs in the page: note when a key goes down, then check every animation frame (cheap: titles only)
# until the chart's painted title contains `text`. Polling from Python would steal the page's time.
# Also notes the last time any chart's drawing changed (window.__settled): when the whole page is repainted.
WATCH = """([prefix, text]) => {
  window.__latency = null;
  window.__settled = null;
  let pressed = null;
  document.addEventListener('keydown', () => { pressed = pressed ?? performance.now(); }, {capture: true, once: true});
  const check = () => {
    const done = [...document.querySelectorAll('.gtitle')].some(
      t => t.textContent.startsWith(prefix) && t.textContent.includes(text));
    if (pressed !== null && done) window.__latency = performance.now() - pressed; else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
  window.__observer?.disconnect();
  window.__observer = new MutationObserver(records => {
    if (pressed !== null && records.some(r => r.target.closest?.('.js-plotly-plot')))
      window.__settled = performance.now() - pressed;
  });
  window.__observer.observe(document.body, {subtree: true, childList: true});
}"""


def slider_steps(page, frames, n_steps: int, quiet: float = 0.5):
    """Move d_k one step at a time; time each key press until the new Q title is painted, and
    until the last chart of the page is redrawn. Returns (median to Q, median to all, largest rerun)."""
    slider = page.get_by_role("slider", name="d_k (query/key width per head)")
    times, settled, sizes = [], [], []
    for step in range(n_steps):
        settle(page, slider)
        d_k = int(slider.input_value())
        key, target = ("ArrowRight", d_k + 1) if step % 2 == 0 else ("ArrowLeft", d_k - 1)
        slider.focus()
        frames.bytes = 0
        page.evaluate(WATCH, ["Q = X·W_Q", f"x{target}] = ["])
        slider.press(key)
        page.wait_for_function("window.__latency !== null", timeout=300_000, polling=200)
        times.append(page.evaluate("window.__latency"))
        frames.wait_quiet(page, quiet)  # the rest of the page is still arriving; count all of this rerun
        sizes.append(frames.bytes)
        settled.append(page.evaluate("window.__settled"))
    return statistics.median(times), statistics.median(settled), max(sizes)


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
            while True:
                try:
                    if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                        break
                except OSError:
                    time.sleep(0.05)
            healthy = time.perf_counter() - started
            page.goto(url)
            wait_for_chart(page, "attention weights", lambda s: len(s["ticks"]) == 5)
            first = time.perf_counter() - started
            print(f"streamlit run -> healthy {healthy:.1f} s, -> first heatmap painted {first:.1f} s (target 10 s)")

            median, whole, _ = slider_steps(page, frames, REPEATS)
            print(
                f"d_k change -> Q painted, default sentence (5 tokens): median {median:.0f} ms (target 300 ms); "
                f"whole walkthrough repainted: median {whole:.0f} ms"
            )
            if only == "default":
                return

            page.goto(f"{url}/?present=true")
            wait_for_chart(page, "X  [", lambda s: True)
            steps = []
            for prefix in ("W_Q", "Q = X·W_Q", "scores = Q·Kᵀ", "scaled scores", "W_Q", "Q = X·W_Q"):
                if prefix == "W_Q" and steps:  # back to the start: X is the first stage again
                    page.goto(f"{url}/?present=true")
                    wait_for_chart(page, "X  [", lambda s: True)
                page.evaluate(WATCH, [prefix, ""])
                page.keyboard.press("ArrowRight")
                page.wait_for_function("window.__latency !== null", timeout=60_000, polling=100)
                steps.append(page.evaluate("window.__latency"))
                frames.wait_quiet(page)
            print(f"presentation mode, → (next stage) -> painted: median {statistics.median(steps):.0f} ms")

            words = " ".join(f"w{i}" for i in range(128))
            page.goto(f"{url}/?text={quote(words)}")
            wait_for_chart(page, "attention weights", lambda s: "[128x128]" in s["title"], timeout=180)
            median, whole, _ = slider_steps(page, frames, REPEATS)
            print(
                f"d_k change -> Q painted, 128 tokens: median {median:.0f} ms (target 1000 ms); "
                f"whole walkthrough repainted: median {whole:.0f} ms"
            )

            words = " ".join(string.ascii_lowercase[i % 26] for i in range(MAX_TOKENS))  # within the 20,000 characters
            page.goto(f"{url}/?text={quote(words)}")
            wait_for_chart(page, "attention weights", lambda s: "[4096x4096]" in s["title"], timeout=300)
            median, _, largest = slider_steps(page, frames, 4, quiet=3.0)  # seconds pass between its messages
            print(
                f"d_k change at the {MAX_TOKENS}-token cap: median {median:.0f} ms; "
                f"largest rerun sent {largest / 1e6:.2f} MB (target 2 MB)"
            )

            page.goto(f"{url}/real_model?text={quote(' '.join(['the quick brown fox'] * 60))}")
            wait_for_chart(page, "attention weights", lambda s: s["ticks"][0] == "[CLS]", timeout=120)
            frames.bytes = 0
            model = quote("SmolLM2-135M-Instruct (Llama-style decoder)")
            start = time.perf_counter()
            page.goto(f"{url}/real_model?text={quote(' '.join(['the quick brown fox'] * 60))}&rm_model={model}")
            wait_for_chart(page, "Attention weights of all 30 layers", lambda s: True, timeout=120)
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
