"""What building a new sentence's figures costs the server, in-process (no Streamlit).

    .venv/bin/python bench/bench_figures.py

Two figures, each the median of 15 sentences no one typed before:
- every Walkthrough stage's view for a from-scratch trace (d_k 8, 2 heads, 11 tokens), each figure written
  to JSON, as a rerun with a new sentence does;
- the Real model page's two overview figures (every layer x head: entropies and thumbnails) for a SmolLM2
  trace (30 layers x 9 heads), written to JSON.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_core import AttentionConfig, trace_sentence  # noqa: E402
from attention_core.models import load_model, trace_text  # noqa: E402
from figures.overview import entropy_grid_figure, thumbnails_figure  # noqa: E402
from figures.stages import STAGES, stage_view  # noqa: E402
from figures.style import Style  # noqa: E402

STYLE = Style()
CONFIG = AttentionConfig(d_k=8, heads=2, device="cpu")


def walkthrough(sentence: str) -> None:
    trace = trace_sentence(sentence, CONFIG).to("cpu")
    for stage in STAGES:
        for figure in stage_view(trace, stage.key, 0, STYLE, 0 if stage.per_query else None).figures:
            figure.to_json()


def real_model_overview(model_trace) -> None:
    thumbnails_figure(model_trace, STYLE).to_json()
    entropy_grid_figure(model_trace, STYLE).to_json()


def median_ms(work, runs: int = 15) -> float:
    work(-1)  # imports, first-call caches
    times = []
    for k in range(runs):
        started = time.perf_counter()
        work(k)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    smollm2 = load_model("smollm2", "cpu")
    traces = {k: trace_text(smollm2, f"Today Bruno {k} will eat the pizza, and then the cake.") for k in range(-1, 15)}
    walk = median_ms(lambda k: walkthrough(f"Today Bruno {k} will eat the pizza with his friends"))
    real = median_ms(lambda k: real_model_overview(traces[k]))
    print(f"every Walkthrough stage's figures, new sentence: median {walk:.1f} ms")
    print(f"Real model overview figures (SmolLM2, 30 x 9 maps), new sentence: median {real:.1f} ms")


if __name__ == "__main__":
    main()
