"""Reading a trained model (issue 28): the Real model page with head roles, sinks and rollout at the 128-token
cap, and what the two bundled models do.

Server side, through Streamlit's AppTest (the page's script as the server runs it, model worker included): a
first load of the page, then a rerun for each of its reading actions (a role, the induction probe, hiding the
first token, words, the rollout's depth), each timed (median of REPEATS after a first, uncached one), and the
bytes of every chart the page sends. Targets: a rerun ≤ 1.5 s, ≤ 2 MB.
Then the measurements the README reports: SmolLM2's top induction heads on the probe, MiniLM's weight on [CLS]
and [SEP] by layer, and each model's sink mass.
Run: .venv/bin/python bench/bench_reading.py
"""

import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from streamlit.testing.v1 import AppTest  # noqa: E402

from attention_core.models import load_model, trace_text  # noqa: E402
from attention_core.models.capture import trace_probe  # noqa: E402
from attention_core.statistics import top_heads  # noqa: E402
from bench.bench_models import text_of  # noqa: E402
from figures.reading import special_shares  # noqa: E402

REPEATS = 3
SMOLLM2 = "smollm2"


def page_bytes(at) -> int:
    return sum(len(chart.proto.json) for chart in at.get("bidi_component"))


def timed(at, act) -> float:
    start = time.perf_counter()
    act(at)
    at.run()
    return time.perf_counter() - start


def main():
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    loaded = load_model(SMOLLM2, device="cpu")
    text = text_of(loaded, 140)  # over the cap: the page shows the first 128 tokens
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
    at.text_area(key="text").set_value(text).run()
    at.switch_page("app_pages/real_model/real_model.py").run()
    start = time.perf_counter()
    at.selectbox(key="rm_model").set_value(SMOLLM2).run()
    print(f"SmolLM2 at the 128-token cap, first load (model run included): {time.perf_counter() - start:.2f} s, "
          f"{page_bytes(at) / 1e6:.2f} MB")  # fmt: skip
    actions = {
        "role: duplicate token": lambda at: at.segmented_control(key="rm_role").set_value("duplicate"),
        "role: induction (the probe)": lambda at: at.segmented_control(key="rm_role").set_value("induction"),
        "role: previous token": lambda at: at.segmented_control(key="rm_role").set_value("previous"),
        "hide the first token": lambda at: at.toggle(key="rm_hide_first").set_value(True),
        "show it again": lambda at: at.toggle(key="rm_hide_first").set_value(False),
        "words, not pieces": lambda at: at.toggle(key="rm_words").set_value(True),
        "rollout through layer 15": lambda at: at.slider(key="rm_upto").set_value(15),
        "rollout through layer 30": lambda at: at.slider(key="rm_upto").set_value(30),
    }
    print("| action | first | median of the next | bytes |")
    print("|---|---|---|---|")
    for name, act in actions.items():
        first = timed(at, act)
        again = []
        for _ in range(REPEATS):
            at.run()  # the same state: a plain rerun, as another reader's or a repeated click
            again.append(timed(at, lambda at: None))
        print(f"| {name} | {first:.2f} s | {statistics.median(again):.2f} s | {page_bytes(at) / 1e6:.2f} MB |")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the app's worker runs
    try:
        probe = trace_probe(loaded)
        best = top_heads(probe.grid("induction"), 5)
        print("SmolLM2 induction on the probe:", ", ".join(f"layer {a + 1} head {h + 1}: {v:.2f}" for a, h, v in best))
        print(f"SmolLM2 median head's induction score: {float(probe.grid('induction').nanmedian()):.3f}")
        for key, sentence in ((SMOLLM2, "The next day is bright"), ("minilm", "The next day is bright")):
            traced = trace_text(load_model(key, device="cpu"), sentence)
            grid = traced.grid("first")
            print(f"{key}: sink mass (rows 2 onward, on the first token) {float(grid.mean()):.2f} over all heads; "
                  f"{int((grid >= 0.5).sum())} of {grid.numel()} heads at 0.5 or more")  # fmt: skip
        minilm = load_model("minilm", device="cpu")
        for sentence in ("The next day is bright", "The cat sat on the mat because it was tired of the long day"):
            print(f"MiniLM, '{sentence}': weight on special tokens by layer")
            for row in special_shares(trace_text(minilm, sentence)):
                print("  ", row)
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
