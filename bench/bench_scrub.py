"""How fast one scrub step on the Training page repaints in a real browser (issue 14's target: <= 300 ms), beside
a trivial one-slider, one-heatmap Streamlit app measured in the same run, interleaved (machines differ by 2x or
more; the ratio travels).

The default run is trained once (TrainingConfig's steps, 57 checkpoints), then the page steps back through the
checkpoints two ways, as a lecturer would: the "training step" slider with the arrow keys, and presentation
mode's ← key.
Each step is timed from the key press to the first chart showing the new step ("first changed chart": the mean
map's title says "at step N") and to the last chart change ("settled": nothing drawn for 0.7 s after it). The
first pass over the steps computes them on the server; the passes after it find them cached (for every session),
as every student after the first does.

Run: .venv/bin/python bench/bench_scrub.py [--steps 10]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_repaint import TOP, YARDSTICK, beside_the_yardstick, step, timed  # noqa: E402

from attention_core.training import TrainingConfig  # noqa: E402
from tests.browser import wait_for_chart  # noqa: E402

TEXT = "Bob will eat salad"
TRAINED, EVERY = TrainingConfig().steps, TrainingConfig().checkpoint_every  # the default run's last step, checkpoints


def scrub(page, focus, target: int) -> tuple[float, float]:
    """One step back (ArrowLeft) to checkpoint `target`: see bench_repaint.timed."""
    focus()
    return timed(page, lambda: page.keyboard.press("ArrowLeft"), f"at step {target}")


def main(steps: int) -> None:
    with beside_the_yardstick() as (trivial, app, url):
        app.goto(f"{url}/training?text={quote(TEXT)}")
        wait_for_chart(app, "mean attention weights at step 0", timeout=60)
        app.get_by_role("button", name="▶ Train").click()
        app.get_by_text(f"Trained: {TRAINED} steps").wait_for(timeout=120_000)
        wait_for_chart(app, f"mean attention weights at step {TRAINED}", timeout=60)
        cores = subprocess.check_output(["nproc"]).decode().strip()
        print(f"machine: {platform.machine()}, {cores} cores; Chromium and both servers on it; {steps} steps per"
              f" pass, interleaved with the trivial app; yardstick {YARDSTICK.name}")  # fmt: skip

        def slider():
            app.locator("input[aria-label='training step']").focus()

        def presentation():
            app.get_by_role("button", name="← earlier").focus()

        slider_url = f"{url}/training?t_step={TRAINED}&text={quote(TEXT)}"
        passes = (  # the server caches each step's numbers for every session: only the first pass computes
            ("slider, arrow keys", "computed", slider_url, slider),
            ("slider, arrow keys", "cached", slider_url, slider),
            ("presentation, ← key", "cached", slider_url + "&present=true", presentation),
        )
        for name, visit, address, focus in passes:
            app.goto(address)
            wait_for_chart(app, f"mean attention weights at step {TRAINED}", timeout=60)
            app.evaluate(TOP)
            yard, first, last = [], [], []
            for target in range(TRAINED - EVERY, TRAINED - EVERY * (steps + 1), -EVERY):
                yard.append(step(trivial, "d_k", lambda d: f"[5x{d}]")[0])
                f, s = scrub(app, focus, target)
                first.append(f)
                last.append(s)
            y, f, s = statistics.median(yard), statistics.median(first), statistics.median(last)
            print(f"{name:20} {visit:8}: trivial app {y:4.0f} ms | first changed chart {f:4.0f} ms ="
                  f" {f / y:3.1f}x, settled {s:4.0f} ms = {s / y:3.1f}x (target 300 ms);"
                  f" worst first {max(first):4.0f} ms")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    main(parser.parse_args().steps)
