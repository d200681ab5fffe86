"""Does this head matter? (attention_core/models/intervene.py, patching.py) on SmolLM2, as the page runs it: in the
model worker (attention_core/models/worker.py), one thread a run, a layer a request, two layers at once
(app_pages/real_model/effects.py AT_ONCE). The classic pair, "When Mary and John went to the store, John gave a drink
to" (clean) and the same with the second John a Mary (corrupted), target " Mary" against " John"; and a longer pair
of 20 tokens, the issue's size.

- a knock-out's answer (the text's stock run, then the run with one head knocked out; goal ≤ 1 s);
- the whole layer × head patching map, 30 × 9 = 270 patched runs (goal ≤ 15 s);
- the residual stream's map, 30 layers × every position (goal ≤ 15 s at 20 tokens).

    .venv/bin/python bench/bench_patch.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import record  # noqa: E402  (bench/ is on the path)

from app_pages.real_model.effects import AT_ONCE, measured_map  # noqa: E402
from attention_core.models.intervene import Head  # noqa: E402
from attention_core.models.worker import ModelWorker  # noqa: E402

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
LONG_CLEAN = "Yesterday afternoon, when Mary and John went to the big store downtown, John gave a drink to"
LONG_CORRUPTED = "Yesterday afternoon, when Mary and John went to the big store downtown, Mary gave a drink to"
LAYERS = 30


class _NoBar:
    def progress(self, done: float, text: str) -> None:
        pass


def whole_map(worker: ModelWorker, pair: tuple[str, str, str, str], kind: str) -> tuple[float, object]:
    """Seconds for a whole map as the page measures it (effects.measured_map: patch_prepare, then every layer's
    rows, AT_ONCE at a time)."""
    started = time.perf_counter()
    measured = measured_map(worker, "smollm2", "cpu", pair, kind, LAYERS, _NoBar())
    return time.perf_counter() - started, measured


def main() -> None:
    worker = ModelWorker()
    try:
        worker.load("smollm2", "cpu")
        knocks = []
        for _ in range(6):  # the worker keeps no knock-out (the server does): each is run again
            started = time.perf_counter()
            knocked = worker.knock_out("smollm2", "cpu", CLEAN, (Head(8, 3),), "zero", " Mary")
            knocks.append(time.perf_counter() - started)
        knocks = knocks[1:]  # the first: the model's first run in the worker
        maps = {}
        for name, (clean, corrupted) in {
            "classic": (CLEAN, CORRUPTED),
            "20 tokens": (LONG_CLEAN, LONG_CORRUPTED),
        }.items():
            maps[name] = {}
            for kind in ("heads", "residual"):
                # the worker keeps a pair's clean run (two runs of the model, ~0.1 s): the first of the three runs them
                times = [whole_map(worker, (clean, corrupted, " Mary", " John"), kind) for _ in range(3)]
                maps[name][f"{kind}_s"] = round(statistics.median(t for t, _ in times), 2)
                maps[name]["tokens"] = len(times[0][1].tokens)
        result = {
            "stock_p_mary": round(float(knocked.before.probabilities[knocked.target]), 3),
            "knock_s": round(statistics.median(knocks), 3),  # median of 5
            "maps": maps,  # each map's seconds, median of 3
            "layers_at_once": AT_ONCE,
        }
    finally:
        worker.close()
    for key, value in result.items():
        print(f"{key}: {value}")
    print("wrote", record.write("patch", result))


if __name__ == "__main__":
    main()
