"""Does this head matter? (attention_core/models/intervene.py) on SmolLM2, in this process on every core: the
classic prompt pair, "When Mary and John went to the store, John gave a drink to" (clean) and the same with the
second John a Mary (corrupted), target " Mary" against " John".

- a knock-out's answer (the text's stock run, then the run with one head knocked out; goal ≤ 1 s);
- the whole layer × head patching map, 30 × 9 = 270 patched runs in batches of a layer (goal ≤ 15 s).

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

from attention_core.models import load_model  # noqa: E402
from attention_core.models.intervene import Head, knock_out, patch  # noqa: E402

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


def main() -> None:
    loaded = load_model("smollm2", device="cpu")
    patch(loaded, CLEAN, CORRUPTED, " Mary", " John")  # once first: the first run's allocations are not the goal's
    knocks = []
    for _ in range(5):
        started = time.perf_counter()
        knocked = knock_out(loaded, CLEAN, (Head(8, 3),), "zero", " Mary")
        knocks.append(time.perf_counter() - started)
    maps = []
    for _ in range(3):
        started = time.perf_counter()
        found = patch(loaded, CLEAN, CORRUPTED, " Mary", " John")
        maps.append(time.perf_counter() - started)
    best = divmod(int(found.recovered.argmax()), loaded.info.heads)
    result = {
        "tokens": len(loaded.tokenizer(CLEAN, add_special_tokens=False)["input_ids"]),
        "stock p(' Mary')": round(float(knocked.before.probabilities[knocked.target]), 3),
        "knock-out s (median of 5; goal 1)": round(statistics.median(knocks), 3),
        "patching map s (median of 3, 270 runs; goal 15)": round(statistics.median(maps), 2),
        "logit difference clean, corrupted": [round(found.clean, 3), round(found.corrupted, 3)],
        "most recovered": f"{Head(*best)}: {float(found.recovered.max()):.2f}",
        "machine": record.machine(),
    }
    for key, value in result.items():
        print(f"{key}: {value}")
    print("wrote", record.write("patch", result))


if __name__ == "__main__":
    main()
