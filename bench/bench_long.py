"""Long texts on SmolLM2 (attention_core/models/long.py): what the issue's goals ask, measured on this machine.

- The pass that keeps every layer's q and k, against a stock transformers forward pass (SDPA, no weights returned)
  on the same tokens, at 2,048 and 4,096 tokens, the two interleaved, `--repeats` times each: the ratio of medians
  (goal ≤ 1.3).
- The memory that pass keeps (goal ≤ 512 MB at 4,096 tokens).
- One head's overview (at most 256 × 256 cells, max-pooled) on the server after the pass (goal ≤ 1 s), and the
  layer × head summaries at 4,096 tokens (goal ≤ 10 s).

    .venv/bin/python bench/bench_long.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import record  # noqa: E402  (bench/ is on the path)

from attention_core.long_maps import grid, overview  # noqa: E402
from attention_core.models import load_model  # noqa: E402
from attention_core.models.long import long_text, trace_long_ids  # noqa: E402

LENGTHS = (2048, 4096)


def timed(work, *args, **kwargs) -> float:
    started = time.perf_counter()
    with torch.inference_mode():
        work(*args, **kwargs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    loaded = load_model("smollm2", device="cpu")
    stock = transformers.AutoModel.from_pretrained(loaded.model.name_or_path, dtype=torch.float32,
                                                   attn_implementation="sdpa").eval()  # fmt: skip
    ids = loaded.tokenizer(long_text())["input_ids"]
    ids = (ids * (max(LENGTHS) // len(ids) + 1))[: max(LENGTHS)]  # the guide again and again, to 4,096 tokens
    result = {"threads": torch.get_num_threads(), "lengths": {}}
    for n in LENGTHS:
        x = torch.tensor([ids[:n]])
        ours, theirs = [], []
        for _ in range(args.repeats):  # interleaved: the machine's drift falls on both
            theirs.append(timed(stock, input_ids=x, use_cache=False))
            ours.append(timed(trace_long_ids, loaded, ids[:n]))
        trace = trace_long_ids(loaded, ids[:n])
        heads = [(layer, head) for layer in (0, 15, 29) for head in (0, 4, 8)]
        maps = [timed(overview, trace, layer, head) for layer, head in heads]
        row = {
            "stock_sdpa_s": theirs, "kept_pass_s": ours,
            "ratio_of_medians": statistics.median(ours) / statistics.median(theirs),
            "kept_mb": trace.kept_bytes / 2**20,
            "overview_s": {"median": statistics.median(maps), "max": max(maps), "count": len(maps)},
        }  # fmt: skip
        if n == max(LENGTHS):
            row["summaries_grid_s"] = timed(grid, trace)
        result["lengths"][str(n)] = row
        print(n, {k: v for k, v in row.items() if not k.endswith("pass_s") and k != "stock_sdpa_s"}, flush=True)
    print("wrote", record.write("long", result))


if __name__ == "__main__":
    main()
