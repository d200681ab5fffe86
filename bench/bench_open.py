"""How long the app takes to open, as ratios to the trivial app (bench/trivial_app.py, one slider and
one Plotly heatmap) measured in the same run, on the same machine, the same way (issue 29's targets):

- cold start: `streamlit run` started -> the first heatmap painted in a fresh browser page (<= 1.2x);
- warm page load: a new page on the running server -> the first heatmap painted (<= 2x).

"Painted" is the same test for both apps: Plotly has drawn a heatmap's image. The apps take turns, ROUNDS times
each, so that a slow moment of the machine falls on both; the medians are compared. The browser and the server
share the machine's cores (say so beside the figures).
Run: .venv/bin/python bench/bench_open.py
"""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from record import write  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, free_port, start_server  # noqa: E402

TRIVIAL = ROOT / "bench" / "trivial_app.py"  # the yardstick (the workspace's shared one, copied: tests/test_bench.py)
ROUNDS = 5
WARM_LOADS = 3  # per round
PAINTED = "() => !!document.querySelector('.js-plotly-plot .heatmaplayer image')"


def open_times(browser, script: str) -> tuple[float, list[float]]:
    """(cold start, [warm page loads]) of one app, in seconds."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    server = start_server(port, script=str(script))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        while True:  # the browser asks until the server answers, as a reader's reload would
            try:
                page.goto(url, timeout=2000)
                break
            except Exception:
                time.sleep(0.05)
        page.wait_for_function(PAINTED, timeout=120000, polling=20)
        cold = time.perf_counter() - started
        warm = []
        for _ in range(WARM_LOADS):
            fresh = browser.new_page(viewport={"width": 1400, "height": 1000})
            started = time.perf_counter()
            fresh.goto(url)
            fresh.wait_for_function(PAINTED, timeout=120000, polling=20)
            warm.append(time.perf_counter() - started)
            fresh.close()
        return cold, warm
    finally:
        page.close()
        server.terminate()
        server.wait(timeout=20)


def main():
    from playwright.sync_api import sync_playwright

    times = {"app": ([], []), "trivial": ([], [])}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            for _ in range(ROUNDS):
                for name, script in (("trivial", TRIVIAL), ("app", ROOT / "app.py")):
                    cold, warm = open_times(browser, script)
                    times[name][0].append(cold)
                    times[name][1].extend(warm)
        finally:
            browser.close()
    kept = {}
    for kind, index, target in (("cold", 0, 1.2), ("warm", 1, 2.0)):
        app, trivial = statistics.median(times["app"][index]), statistics.median(times["trivial"][index])
        what = "cold start -> first heatmap" if kind == "cold" else "warm page load -> first heatmap"
        print(f"{what}: app {app:.2f} s, trivial app {trivial:.2f} s: {app / trivial:.2f}x (target {target}x); "
              f"app {', '.join(f'{t:.2f}' for t in times['app'][index])}")  # fmt: skip
        kept[kind] = {"app_s": app, "yardstick_s": trivial, "ratio": app / trivial, "app_all_s": times["app"][index],
                      "yardstick_all_s": times["trivial"][index]}  # fmt: skip
    print(f"kept in {write('open', {'rounds': ROUNDS, **kept}).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
