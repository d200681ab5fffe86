"""Long texts as the Real model page serves them (issue 64): the model worker (one thread a run, as the app runs
it) reads the text once, and every view is a request to it. What a reader waits for, on this machine:

- the pass at 2,048 and 4,096 tokens, and the estimate the page said before it (goal: the estimate within 2× of it);
- after the pass, one head's overview and a 64 × 64 region at full resolution, each from the request to the
  figure's JSON as the browser receives it (goal ≤ 1 s, ≤ 1 MB), the median and the largest of 9 heads;
- a second reader of the same text: the read asked again (goal: no wait);
- every head's four numbers (the layer × head grid) at 4,096 tokens (goal ≤ 10 s);
- the needle: the pass with a needle and SmolLM2's 8 answer tokens, against the pass alone.

    .venv/bin/python bench/bench_long_page.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import record  # noqa: E402  (bench/ is on the path)

from attention_core.models.long import LongRequest, long_text  # noqa: E402
from attention_core.models.needle import NEEDLE, QUESTION  # noqa: E402
from attention_core.models.worker import ModelWorker  # noqa: E402
from figures.long import overview_figure, region_figure  # noqa: E402

MODEL, DEVICE = "smollm2", "cpu"


def timed(work, *args):
    started = time.perf_counter()
    answer = work(*args)
    return time.perf_counter() - started, answer


def main() -> None:
    worker = ModelWorker()
    worker.load(MODEL, DEVICE)
    result = {"lengths": {}}
    for n in (2048, 4096):
        request = LongRequest(long_text(), n)
        estimate, kept = worker.long(MODEL, DEVICE, request, "estimate", n)
        seconds, read = timed(worker.long, MODEL, DEVICE, request, "read")
        again, _ = timed(worker.long, MODEL, DEVICE, request, "read")
        views = {"overview": [], "region": []}
        sizes = {"overview": [], "region": []}
        for layer, head in [(layer, head) for layer in (0, 15, 29) for head in (0, 4, 8)]:
            started = time.perf_counter()
            cells = worker.long(MODEL, DEVICE, request, "overview", layer, head, "max")
            spec = overview_figure(cells, n, "max", "bench", causal=True).to_json()
            views["overview"].append(time.perf_counter() - started)
            sizes["overview"].append(len(spec))
            started = time.perf_counter()
            rows, keys = (n - 64, n), (0, 64)
            values = worker.long(MODEL, DEVICE, request, "region", layer, head, rows, keys)
            spec = region_figure(values, read.tokens, rows, keys, "bench").to_json()
            views["region"].append(time.perf_counter() - started)
            sizes["region"].append(len(spec))
        row = {
            "estimate_s": estimate, "pass_s": seconds, "estimate_over_pass": estimate / seconds,
            "kept_mb": kept / 1e6, "second_reader_s": again,
            **{f"{name}_s": {"median": statistics.median(times), "max": max(times), "count": len(times)}
               for name, times in views.items()},
            **{f"{name}_mb": max(size) / 1e6 for name, size in sizes.items()},
        }  # fmt: skip
        if n == 4096:
            row["grid_s"], _ = timed(worker.long, MODEL, DEVICE, request, "grid")
            needled = LongRequest(long_text(), n, NEEDLE, QUESTION, 0.5)
            row["needle_pass_s"], answer = timed(worker.long, MODEL, DEVICE, needled, "read")
            row["needle_answer"] = answer.answer
            row["needle_heads_s"], _ = timed(worker.long, MODEL, DEVICE, needled, "needle")
        result["lengths"][str(n)] = row
        print(n, row, flush=True)
    worker.close()
    print("wrote", record.write("long_page", result))


if __name__ == "__main__":
    main()
