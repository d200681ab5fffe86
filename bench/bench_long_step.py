"""The browser's step on a long text (issue 64): 4,096 tokens of SmolLM2 read on the Real model page, then a knob
turned under the head's overview (at most 256 × 256 cells, 0.88 MB of figure): how long after the key press the
overview changes and the charts on screen settle, as a ratio to the yardstick's steps taken beside them (goal ≤ 3×).
Measured as bench/bench_loop.py measures every page (its watch, its steps, every step counted):

- "head step": another head typed into the head's menu and chosen with Enter (timed from Enter): its weights
  recomputed from the kept q and k, pooled, sent and drawn;
- "pooling": max-pooled ↔ mean-pooled (→ or ← on the radio): the same head pooled the other way.

The 4,096-token pass itself is not in a step: the page is opened and read once before (bench/bench_long_page.py
times the pass).

    .venv/bin/python bench/bench_long_step.py [--steps 8]

Keeps its result in bench/results/long_step.json (bench/record.py), which bench/perf_table.py writes into the README.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_loop import SCROLL_TO, VIEWPORT, beside_the_yardstick, interleaved, line, median, summarise  # noqa: E402
from record import commit, machine, write  # noqa: E402

from tests.browser import settled, wait_for_chart  # noqa: E402

ADDRESS = "/real_model?rm_model=smollm2&rm_long=true&rm_long_tokens=4096&rm_long_layer=layer+26&rm_long_head=head+6"
OVERVIEW = "weights = the"  # the overview's title, whichever pooling: "weights = the max of each 16×16 block…"
PASS_S = 600  # the first visit waits for the 4,096-token pass (about 20 s alone on 2 cores)


def head_step(page):
    """The head's menu: the other of heads 3 and 4 typed into it (no key press: typed text alone), then Enter, the
    one key the step is timed from, chooses it."""
    menu = page.locator(".st-key-rm_long_head [role='combobox']")
    other = "head 4" if menu.input_value() == "head 3" else "head 3"
    page.bring_to_front()  # a menu in a background tab opens no list
    settled(page)  # typed into a menu that the last step's rerun is still drawing, the text would be lost
    menu.evaluate("input => input.blur()")  # still focused from the last step, its list would not open
    menu.focus()
    menu.select_text()  # the head shown, replaced by what is typed
    page.keyboard.insert_text(other)

    def act():
        page.locator("[role='option']", has_text=other).first.wait_for()
        menu.press("Enter")

    return act


def pooling(page):
    """The radio "pooled by": → from max-pooled to mean-pooled, ← back."""
    chosen = page.locator(".st-key-rm_long_pool input[type='radio']:checked")
    forward = chosen.evaluate("radio => radio.nextElementSibling?.textContent ?? radio.value") != "mean-pooled"
    chosen.focus()
    return lambda: page.keyboard.press("ArrowRight" if forward else "ArrowLeft")


ACTIONS = {"head step": head_step, "pooling": pooling}


def run(steps: int) -> dict:
    rows = []
    with beside_the_yardstick() as (app, app_url, yard):
        app.goto(app_url + ADDRESS)
        wait_for_chart(app, OVERVIEW, timeout=PASS_S)
        settled(app, quiet=1.0, timeout=120)
        for action, act in ACTIONS.items():
            app.evaluate(SCROLL_TO, OVERVIEW)
            times, beside = interleaved(app, act, yard, steps, OVERVIEW)
            rows.append(summarise("Real model, 4,096 tokens", action, times, beside))
            print(line(rows[-1]), flush=True)
    yardstick = [step["yardstick_ms"] for step in rows]
    return {"steps": steps, "viewport": f"{VIEWPORT['width']}x{VIEWPORT['height']}", "rows": rows,
            "yardstick_ms": median(yardstick), "failed": [r["action"] for r in rows if r["failed"]],
            "where": "Chromium, the app's server and the yardstick's on the same cores"}  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    result = run(args.steps)
    print(f"machine: {machine()}; commit {commit()}; medians of {args.steps} steps each; {result['where']}")
    print(f"kept in {write('long_step', result).relative_to(ROOT)}")
    if result["failed"]:
        sys.exit(f"failed rows (a step timed out or drew nothing): {', '.join(result['failed'])}")
