"""Streamlit's own floor for a knob's step: the yardstick app with the Walkthrough's other elements beside it,
none of which changes and none of which computes anything; and the Walkthrough itself, in the same run.

    .venv/bin/python bench/bench_floor.py [--steps 10]

Eleven apps, served at once and stepped in turn in one Chromium, timed by bench_loop.py's watch (key press -> the
first chart's SVG text changing; here the only chart that changes, at the top of the page, on screen):
- "yardstick": `../shared/yardstick/trivial_app.py` as it is (one slider, one st.plotly_chart);
- "+ sidebar": the same, with the Walkthrough's other sidebar controls (6 sliders, 7 select boxes, 7 toggles, a
  text area, a number, ...), none changed by the step;
- "+ stages": the same, with the Walkthrough's 11 stages below the chart as text: each a heading, a formula (the
  Walkthrough's own, through st.latex), a paragraph and a divider;
- "+ both": the sidebar and the stages;
- "live chart", "live + both", "live + both + 11 charts": the yardstick's figure through the app's own chart
  (ui/chart.py's component, as show_figure sends it), then with the sidebar and the stages, then with 11 more
  charts that do not change (as the Walkthrough's stages have); then with 20 ms of Python's CPU in the script,
  between the sidebar and the stages (the Walkthrough's script takes ~19 ms for a d_k step);
- "the words as one element": the stages' headings, formulas and paragraphs in one markdown element whose text
  changes with the step (as five of the Walkthrough's eleven paragraphs do), and "the same, unchanged": whether
  fewer elements make a cheaper page, and what words that change cost;
- "the Walkthrough": the app, scrolled to its attention weights, as bench_loop.py measures it.
Each line gives the elements the page holds (counted in the page), so the floor apps can be seen to hold about
as many as the Walkthrough. The gap from the yardstick to "live + both + 11 charts" is what Streamlit costs for
a page of that many elements; from there to the Walkthrough is the app's own (its script, its figures' drawing).
docs/design-notes.md says what it found.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_loop import PAGES, SCROLL_TO, VIEWPORT, WATCH, measure, open_page, slider_step  # noqa: E402
from bench_repaint import YARDSTICK  # noqa: E402
from record import commit, machine  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_FLAGS, running_app, wait_for_chart  # noqa: E402

SIDEBAR = """
with st.sidebar:
    st.text_area("Sentence", "The next day is bright")
    st.selectbox("Lecture example", ["000 · The next day is bright", "002 · Friends love travel"])
    for label, value in [("d_model", 8), ("d_v", 4), ("heads", 1), ("window", 0), ("top-k", 0), ("steps", 2000)]:
        st.slider(label, 0, 4096, value)
    for label in ["variant", "bend", "positional", "init", "colours", "device"]:
        st.selectbox(label, ["one", "two", "three"])
    for label in ["causal", "sinks", "scale", "numbers", "count from 1", "presentation", "train causal"]:
        st.toggle(label, value=label == "scale")
    st.number_input("seed", 0, 2**32 - 1, 0)
    st.text_input("compose a mask", "")
    st.button("new random weights")
    for i in range(4):
        st.caption(f"A caption under the controls, number {i}.")
"""
STAGES = """
FORMULAS = {formulas!r}
for i, formula in enumerate(FORMULAS):
    st.header(f"{{i + 1}} · Stage number {{i + 1}}")
    st.latex(formula)
    st.markdown("A paragraph of the stage's sentences, about as long as the Walkthrough's: what the matrix is, "
                "its shape, what each row means, which token looks at which, and why the numbers are what they "
                "are; **bold** where the lecture puts its weight.")
    st.divider()
"""


def formulas() -> list[str]:
    """The Walkthrough's own formulas, for its default settings (one trace, no Streamlit)."""
    from attention_core import AttentionConfig, trace_sentence
    from figures.stages.registry import stages_for

    trace = trace_sentence("The next day is bright", AttentionConfig(d_model=8, d_k=4, d_v=4, n_heads=1))
    return [stage.formula_for(trace) for stage in stages_for(trace)]


LIVE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from ui.chart import _live_chart, preload, sent_number, FILES

def live(figure, key):
    spec = figure.to_json()
    _live_chart(data={{"spec": spec, "config": "{{}}", "plotly": f"{{FILES}}/plotly.min.js",
                      "name": figure.layout.title.text, "summary": "", "height": "300", "maps": "0",
                      "sent": sent_number(key, spec)}}, key=key, height="content")

preload()
d_k = st.slider("d_k", 1, 64, 4)
z = np.random.default_rng(d_k).standard_normal((5, d_k))
live(go.Figure(go.Heatmap(z=z), layout_title_text=f"Q [5x{{d_k}}]", layout_height=300), "q")
"""
# The same words as one element: every stage's heading, formula ($$...$$, KaTeX as st.latex draws it) and paragraph
# in one markdown, whose text changes with the knob (as the Walkthrough's sentences do): what a page would cost whose
# stages were one element each, or one for all of them.
ONE_ELEMENT = """
FORMULAS = {formulas!r}
st.markdown("\\n\\n".join(
    f"## {{i + 1}} · Stage number {{i + 1}}\\n\\n$$\\n{{formula}}\\n$$\\n\\nA paragraph of the stage's sentences, "
    f"about as long as the Walkthrough's, with d_k = {{d_k}} in it: what the matrix is, its shape, what each row "
    f"means, which token looks at which; **bold** where the lecture puts its weight.\\n\\n---"
    for i, formula in enumerate(FORMULAS)))
"""
SCRIPT = """
import time
spent = time.thread_time() + 0.020  # the Walkthrough's script: ~19 ms of CPU for a d_k step, its trace cached
while time.thread_time() < spent:
    pass
"""
STILL_CHARTS = """
for i in range(11):
    live(go.Figure(go.Heatmap(z=np.random.default_rng(i).standard_normal((5, 5)), texttemplate="%{z:.2f}"),
                   layout_title_text=f"still {i}", layout_height=300), f"still-{i}")
"""


def apps(folder: Path) -> dict[str, Path]:
    """The yardstick's own code, and that code with the sidebar and the stages added after it; then the same
    figure through the app's live chart, with the rest added."""
    base = YARDSTICK.read_text()
    head = "\n".join(line for line in base.splitlines() if line.startswith(("import", '"""')))
    stages = STAGES.format(formulas=formulas())
    made = {"yardstick": YARDSTICK}
    variants = {"+ sidebar": base + SIDEBAR, "+ stages": base + stages, "+ both": base + SIDEBAR + stages,
                "live chart": head + LIVE, "live + both": head + LIVE + SIDEBAR + stages,
                "live + both + 11 charts": head + LIVE + SIDEBAR + stages + STILL_CHARTS,
                "+ 20 ms of script": head + LIVE + SIDEBAR + SCRIPT + stages + STILL_CHARTS,
                "the words as one element": head + LIVE + SIDEBAR + ONE_ELEMENT.format(formulas=formulas())
                + STILL_CHARTS,
                "the same, unchanged": head + LIVE + SIDEBAR
                + ONE_ELEMENT.format(formulas=formulas()).replace("{d_k}", "4") + STILL_CHARTS}  # fmt: skip
    for name, code in variants.items():
        path = folder / f"floor_{len(made)}.py"
        path.write_text(textwrap.dedent(code))
        made[name] = path
    return made


WALKTHROUGH = "the Walkthrough"  # the app itself, scrolled to its weights, as bench_loop.py measures it
ELEMENTS = """() => ['stMain', 'stSidebar'].map(where => document.querySelectorAll(
  `[data-testid=${where}] [data-testid=stElementContainer]`).length)"""


def run(steps: int) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """Each app's first changed chart, per step, and its elements (main, sidebar) as the page counts them."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        scripts = {**apps(Path(folder)), WALKTHROUGH: ROOT / "app.py"}
        urls = {name: stack.enter_context(running_app(str(path))) for name, path in scripts.items()}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(WATCH)
            pages, acts, counts = {}, {}, {}
            for name, url in urls.items():
                page = pages[name] = context.new_page()
                if name == WALKTHROUGH:
                    open_page(page, url, PAGES["Walkthrough"][0], "attention weights")
                    acts[name] = slider_step("d_k (query/key width per head)")
                else:
                    page.goto(url)
                    try:
                        wait_for_chart(page, "Q [5x", timeout=120)
                    except AssertionError as error:
                        raise AssertionError(f"{name}: {error}") from None
                    acts[name] = slider_step("d_k")
                measure(page, acts[name](page))  # warm once
                counts[name] = page.evaluate(ELEMENTS)
            times = {name: [] for name in pages}
            for i in range(steps):
                for name in list(pages) if i % 2 == 0 else list(pages)[::-1]:
                    if name == WALKTHROUGH:
                        pages[name].evaluate(SCROLL_TO, "attention weights")
                    times[name].append(measure(pages[name], acts[name](pages[name]))["first"])
            browser.close()
    return times, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    times, counts = run(args.steps)
    yard = statistics.median(t for t in times["yardstick"] if t is not None)
    print(f"d_k step -> the first chart changed, medians of {args.steps} steps, in turn:")
    for name, values in times.items():
        seen = [t for t in values if t is not None]
        main_count, side_count = counts[name]
        print(f"  {name:24s} {statistics.median(seen):5.0f} ms = {statistics.median(seen) / yard:.1f}x  "
              f"(spread {min(seen):.0f}-{max(seen):.0f} ms, {len(seen)} of {len(values)} steps seen; elements: "
              f"{main_count} on the page, {side_count} in the sidebar)")  # fmt: skip
    print(f"machine: {machine()}; commit {commit()}; Chromium and the {len(times)} servers on the same cores")


if __name__ == "__main__":
    main()
