"""A deck as one HTML file (app_pages/decks/export.py), lecture 000's: the goals of issue 67.

- the export, as `make decks` runs it (`python -m app_pages.decks.export`, a process of its own), ROUNDS times:
  ≤ 10 s on 2 cores;
- the file's size: ≤ 8 MB;
- opened from disk in Chromium: the first view painted (every chart of it drawn, every formula set) ≤ 2 s;
- each → (the next view's charts drawn), as a ratio to the yardstick app's step (bench/trivial_app.py, a slider
  pressed) measured beside it, press for press, in the same browser: ≤ 3x.

Run: .venv/bin/python bench/bench_deck_file.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_loop import measure, slider_step  # noqa: E402
from bench_repaint import YARDSTICK  # noqa: E402
from record import write  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, LOOP_WATCH, running_app, wait_for_chart  # noqa: E402

DECK = ROOT / "decks" / "lecture-000.json"
ROUNDS = 3
LOADS = 5
DRAWN = """() => document.getElementById('counter')?.textContent.startsWith('view 1 of')
  && [...document.querySelectorAll('#stage .chart')].every(c => c.querySelector('.main-svg'))
  && document.querySelectorAll('#stage .tex').length === document.querySelectorAll('#stage .tex .katex').length"""


def export_times(out: Path) -> list[float]:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "app_pages.decks.export", str(DECK), str(out)], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        times.append(time.perf_counter() - started)
    return times


def browser_times(path: Path) -> dict:
    from playwright.sync_api import sync_playwright

    with running_app(str(YARDSTICK)) as yard_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.add_init_script(LOOP_WATCH)
        loads = []
        for _ in range(LOADS):
            page = context.new_page()
            started = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_function(DRAWN, timeout=60_000, polling=20)
            loads.append(time.perf_counter() - started)
            page.close()
        yard, deck = context.new_page(), context.new_page()
        yard.goto(yard_url)
        wait_for_chart(yard, "Q [5x")
        step = slider_step("d_k")
        measure(yard, step(yard))  # warm once
        deck.goto(path.as_uri())
        deck.wait_for_function(DRAWN, timeout=60_000)
        # How many charts each view draws: a step to a view without one (words and a formula) draws no chart, and
        # is counted apart, not as a step that failed.
        charts = deck.evaluate(
            "JSON.parse(document.getElementById('deck').textContent).views.map(v => v.charts.length)"
        )
        steps, beside, wordless = [], [], 0
        for index in range(1, len(charts)):
            beside.append(measure(yard, step(yard)))
            deck.bring_to_front()
            done = measure(deck, lambda: deck.keyboard.press("ArrowRight"))
            if charts[index]:
                steps.append(done)
            else:
                wordless += 1
        browser.close()
    settled = [s["last"] for s in steps if s["ended"] == "settled"]
    yardstick = [s["first"] for s in beside if s["ended"] == "settled"]
    step, yard = statistics.median(settled), statistics.median(yardstick)
    return {
        "first_view_s": statistics.median(loads),
        "first_view_all_s": loads,
        "step_ms": step,
        "step_all_ms": settled,
        "steps": len(steps),
        "steps_failed": len(steps) - len(settled),
        "steps_to_views_without_charts": wordless,
        "yardstick_ms": yard,
        "ratio": step / yard,
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "lecture-000.html"
        exports = export_times(out)
        size = out.stat().st_size
        shown = browser_times(out)
    export = statistics.median(exports)
    print(f"export of lecture 000: {export:.1f} s (target ≤ 10 s; {', '.join(f'{t:.1f}' for t in exports)})")
    print(f"the file: {size / 1e6:.2f} MB (target ≤ 8 MB)")
    print(f"opened from disk, the first view painted: {shown['first_view_s']:.2f} s (target ≤ 2 s)")
    print(
        f"→ to the next view drawn: {shown['step_ms']:.0f} ms, the yardstick's step {shown['yardstick_ms']:.0f} ms: "
        f"{shown['ratio']:.2f}x (target ≤ 3x; {shown['steps']} steps to a view with charts, {shown['steps_failed']} "
        f"not settled; {shown['steps_to_views_without_charts']} to a view without)"
    )
    kept = write("deck_file", {"export_s": export, "export_all_s": exports, "size_bytes": size, **shown})
    print(f"kept in {kept.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
