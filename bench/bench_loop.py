"""The loop a lecturer and a student live in: turn a knob, see the pictures change. How long after the key press
the first chart changes and the charts on screen settle, on the Walkthrough, Multi-head, Decoding and Compare,
for a d_k step, a heads step, the causal mask and a new sentence, and presented, → to the next slide; each as a
ratio to the yardstick (`bench/trivial_app.py`, one slider and one small heatmap) measured in the
same run, interleaved: each row's steps against the yardstick's steps taken between them (machines differ by 2x or
more, and a shared machine's pace from minute to minute; the ratio travels). Every step is counted: one that timed
out or drew nothing fails its row (and the run), never dropped from a median.

    .venv/bin/python bench/bench_loop.py [--steps 8] [--pages walkthrough multihead decoding compare]

Keeps its result in bench/results/loop.json (bench/record.py), which bench/perf_table.py writes into the README.

How it measures, inside the page (WATCH, installed before the page's own scripts): the key press's own time stamp
(keydown, capture phase), and a MutationObserver on the whole page that notes, for every chart (the app's live
chart, the yardstick's st.plotly_chart), when its SVG text first changed and when anything in it last changed, and
whether it was on screen then. "First" = key press -> the first chart whose SVG text changes (a title, a tick, a
number in a cell). "Settled" = key press -> the last change to a chart on screen, once no chart has changed for
0.7 s. The yardstick is timed the same way (its title carries d_k). Both servers and Chromium share this machine's
cores: say so beside every figure.

The Walkthrough is measured twice: at the top, as a link opens it (the issue's original figure: there the first
changed chart is W_Q, just below the fold, and no chart on screen changes for d_k), and scrolled to its attention
weights, where every action changes what is on screen.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_repaint import YARDSTICK  # noqa: E402  (bench/ is on the path when this file runs)
from record import commit, machine, write  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, LOOP_WATCH, running_app, settled, wait_for_chart  # noqa: E402

WATCH = LOOP_WATCH

QUIET_S = 0.7
VIEWPORT = {"width": 1400, "height": 1000}


STEP_MOST_S = 60  # a step still changing after this long has timed out
NOTHING_S = 10  # ... and one that changed nothing for this long drew nothing


def measure(page, act) -> dict:
    """Arm the watch, act (a key press), wait until no chart has changed for QUIET_S: ms from the press to the first
    SVG text change, to the last change on screen and anywhere; and how the step ended: "settled", "timed out"
    (still changing after STEP_MOST_S) or "drew nothing" (no chart changed for NOTHING_S, or the press unseen)."""
    page.bring_to_front()  # a background tab gets no animation frames
    page.evaluate("window.__loop.arm()")
    act()
    started = time.time()
    deadline, last, quiet_since, ended = started + STEP_MOST_S, None, started, "timed out"
    while time.time() < deadline:
        now = page.evaluate("window.__loop.read()")
        if now["last"] != last:
            last, quiet_since = now["last"], time.time()
        elif now["pressed"] is not None and now["last"] is not None and time.time() - quiet_since > QUIET_S:
            ended = "settled"
            break
        elif now["last"] is None and time.time() - quiet_since > NOTHING_S:
            ended = "drew nothing"
            break
        time.sleep(0.05)
    page.evaluate("window.__loop.armed = false")
    pressed = now["pressed"]
    if pressed is None or now["first"] is None:
        ended = "drew nothing" if ended == "settled" else ended
    return {
        name: (now[name] - pressed if now[name] is not None and pressed is not None else None)
        for name in ("first", "screen", "last")
    } | {"ended": ended, "changed": now["changed"], "changed_on_screen": now["changedOnScreen"],
         "charts": now["charts"]}  # fmt: skip


def slider_step(label: str):
    def act(page):
        slider = page.get_by_role("slider", name=label)
        value = int(slider.input_value())
        slider.focus()
        return lambda: slider.press("ArrowRight" if value % 2 == 1 else "ArrowLeft")

    return act


def toggle(label: str):
    def act(page):
        switch = page.get_by_role("switch", name=label, exact=True)
        switch.focus()
        return lambda: switch.press("Space")

    return act


SENTENCES = ("The cat sat on the mat", "A dog ran to the park")


def new_sentence(page):
    box = page.get_by_label("Sentence", exact=True)
    now = box.input_value()
    box.fill(SENTENCES[1] if now == SENTENCES[0] else SENTENCES[0])
    return lambda: box.press("Control+Enter")


def next_slide(page):
    page.locator("body").focus()
    forward = page.evaluate("window.__slideForward = !(window.__slideForward ?? false)")
    return lambda: page.keyboard.press("ArrowRight" if forward else "ArrowLeft")


YARD_STEP = slider_step("d_k")  # the yardstick's step: its one slider
ACTIONS = {
    "d_k step": slider_step("d_k (query/key width per head)"),
    "heads step": slider_step("heads"),
    "causal mask": toggle("causal mask"),
    "new sentence": new_sentence,
}
# Each page: its address, where it is measured from (a chart to scroll to the top of the screen, or None), and the
# actions that apply (Decoding is causal whatever the switch says: it reads no causal mask).
PAGES = {
    "Walkthrough (top)": ("/?d_k=4&heads=1", None, ["d_k step"]),
    "Walkthrough": ("/?d_k=4&heads=1", "attention weights", list(ACTIONS)),
    "Multi-head": ("/multihead?d_k=4&heads=2", None, list(ACTIONS)),
    "Decoding": ("/decoding?d_k=4&heads=1", None, ["d_k step", "heads step", "new sentence"]),
    "Compare": ("/compare?d_k=4&heads=1&cmp_what=two+seeds", None, list(ACTIONS)),
    "Walkthrough, presented": ("/?present=true", None, ["next slide"]),
}
SLUG = {"walkthrough": ["Walkthrough (top)", "Walkthrough", "Walkthrough, presented"], "multihead": ["Multi-head"],
        "decoding": ["Decoding"], "compare": ["Compare"]}  # fmt: skip

SCROLL_TO = """prefix => {
  const chart = [...document.querySelectorAll('.live-chart')].find(c => (c.getAttribute('aria-label') || '')
    .startsWith(prefix));
  const pane = document.querySelector('[data-testid="stMain"]');
  pane.scrollTo(0, pane.scrollTop + chart.getBoundingClientRect().top - 60);
}"""
TOP = """() => document.querySelector('[data-testid="stMain"]')?.scrollTo(0, 0)"""


def open_page(page, url: str, address: str, scroll_to: str | None) -> None:
    page.goto(url + address)
    wait_for_chart(page, "", timeout=180)
    settled(page, quiet=1.0, timeout=120)
    page.evaluate(SCROLL_TO if scroll_to else TOP, scroll_to) if scroll_to else page.evaluate(TOP)
    time.sleep(0.5)


@contextlib.contextmanager
def beside_the_yardstick():
    """The app's server and the yardstick's, and a page of each in one browser (the watch installed): yields
    (the app's page, the app's address, the yardstick's page), the yardstick warmed by one step."""
    from playwright.sync_api import sync_playwright

    with running_app(str(YARDSTICK)) as yard_url, running_app("app.py") as app_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(WATCH)
        yard, app = context.new_page(), context.new_page()
        yard.goto(yard_url)
        wait_for_chart(yard, "Q [5x")
        measure(yard, YARD_STEP(yard))  # warm once
        yield app, app_url, yard
        browser.close()


def interleaved(app, act, yard, steps: int, scroll_to: str | None) -> tuple[list[dict], list[dict]]:
    """`steps` of the action on the app, each after one of the yardstick's (its pace then): (the app's, the
    yardstick's). One step first, not counted: the first of a kind fills caches every later one finds. `scroll_to`:
    the chart brought back to the top of the screen before each step."""
    measure(app, act(app))
    times, beside = [], []
    for _ in range(steps):
        app.evaluate(SCROLL_TO, scroll_to) if scroll_to else None
        beside.append(measure(yard, YARD_STEP(yard)))
        times.append(measure(app, act(app)))
    return times, beside


def run(steps: int, pages: list[str]) -> dict:
    rows, yardstick = [], []
    with beside_the_yardstick() as (app, app_url, yard):
        for name in [name for slug in pages for name in SLUG[slug]]:
            address, scroll_to, actions = PAGES[name]
            open_page(app, app_url, address, scroll_to)
            for action in actions:
                act = next_slide if action == "next slide" else ACTIONS[action]
                times, beside = interleaved(app, act, yard, steps, scroll_to)
                rows.append(summarise(name, action, times, beside))
                yardstick += [step["first"] for step in beside if step["ended"] == "settled"]
                print(line(rows[-1]), flush=True)
    return {"yardstick_ms": median(yardstick), "yardstick_spread_ms": [min(yardstick), max(yardstick)],
            "steps": steps, "viewport": f"{VIEWPORT['width']}x{VIEWPORT['height']}", "rows": rows,
            "worst": worst(rows), "failed": [f"{r['page']}: {r['action']}" for r in rows if r["failed"]],
            "where": "Chromium, the app's server and the yardstick's on the same cores"}  # fmt: skip


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(page: str, action: str, times: list[dict], beside: list[dict]) -> dict:
    """A row: the medians of its steps, each as a ratio to the yardstick's steps taken beside them (interleaved, one
    before each: the machine's pace then, not the run's), and every step counted. A step that timed out or drew
    nothing (on the page or the yardstick) fails the row: its medians would leave out the slow ones, so it has no
    ratio, and says how many of how many."""
    row = {"page": page, "action": action, "steps": len(times),
           "ended": [t["ended"] for t in times], "yardstick_ended": [b["ended"] for b in beside]}  # fmt: skip
    row["failed"] = sum(t["ended"] != "settled" for t in times) + sum(b["ended"] != "settled" for b in beside)
    row["yardstick_ms"] = median([b["first"] for b in beside])
    for kind in ("first", "screen", "last"):
        row[f"{kind}_ms"] = median([t[kind] for t in times])
        ratio = row[f"{kind}_ms"] / row["yardstick_ms"] if row[f"{kind}_ms"] and row["yardstick_ms"] else None
        row[f"{kind}_x"] = None if row["failed"] else ratio
    return row


def worst(rows: list[dict]) -> dict:
    """Each page's worst ratio, first changed chart and charts on screen settled, with the action that gave it (a
    failed row is none: it is listed as failed instead)."""
    pages = {}
    for row in rows:
        page = pages.setdefault(row["page"], {})
        for kind in ("first", "screen"):
            if row[f"{kind}_x"] is not None and row[f"{kind}_x"] > page.get(kind, (0, ""))[0]:
                page[kind] = (row[f"{kind}_x"], row["action"])
    return pages


def line(row: dict) -> str:
    def part(kind):
        ms, ratio = row[f"{kind}_ms"], row[f"{kind}_x"]
        return "    -" if ms is None else f"{ms:4.0f} ms" + (f" {ratio:4.1f}x" if ratio is not None else "")

    failed = f" | FAILED: {row['failed']} of {2 * row['steps']} steps (page and yardstick) timed out or drew nothing"
    return (f"{row['page']:24s} {row['action']:13s} | first changed chart {part('first')} | charts on screen settled"
            f" {part('screen')} | every chart drawn {part('last')} | yardstick beside {row['yardstick_ms'] or 0:.0f} ms"
            + (failed if row["failed"] else ""))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--pages", nargs="+", default=list(SLUG), choices=list(SLUG))
    args = parser.parse_args()
    result = run(args.steps, args.pages)
    print(f"\nEach as a ratio to the yardstick's steps beside it (all of them: median {result['yardstick_ms']:.0f} ms,"
          f" spread {result['yardstick_spread_ms'][0]:.0f}-{result['yardstick_spread_ms'][1]:.0f} ms):")  # fmt: skip
    for row in result["rows"]:
        print(line(row))
    for page, kinds in result["worst"].items():
        said = ", ".join(f"{kind} {ratio:.1f}x ({action})" for kind, (ratio, action) in kinds.items())
        print(f"  worst on {page}: {said}")
    print(f"machine: {machine()}; commit {commit()}; medians of {args.steps} steps each; {result['where']}")
    print(f"kept in {write('loop', result).relative_to(ROOT)}")
    if result["failed"]:
        sys.exit(f"failed rows (a step timed out or drew nothing): {', '.join(result['failed'])}")
