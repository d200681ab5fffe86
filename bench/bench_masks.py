"""Masks you compose, measured on SmolLM2, and what the composed mask and the bend add to a rerun.

    .venv/bin/python bench/bench_masks.py [--rounds 15] [--base PATH]

1. SmolLM2-135M-Instruct on the sweep's 512 tokens (attention_core/models/sparse.py: measure_composed), each
   composition in every layer with the model's causal mask: its loss over full causal attention, the keys a row
   keeps (the most, the mean) and the share of FlexAttention's 128 × 128 blocks a kernel skips; one pass each, timed.
2. The Walkthrough's script run (AppTest, the trace cached: the server's part of a knob's step) for a d_k step, on
   this checkout and, with --base, on another checkout (a `git worktree` of the commit before): medians of
   `rounds` steps, in turn, so that the machine's load falls on both alike. The sidebar's two new controls and the
   mask stage's block choice are drawn on every rerun; this says what they cost.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMPOSITIONS = (
    "causal",
    "causal & window 16",
    "causal & (window 16 | sinks 4)",
    "causal & document",
    "causal & (document | sinks 4)",
    "causal & (dilated 2 | window 8)",
)

STEP = """
import statistics, sys, time
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=120).run()
times = []
for i in range({rounds}):
    at.slider(key="d_k").set_value(4 + i % 2)
    start = time.perf_counter()
    at.run()
    times.append(time.perf_counter() - start)
print(statistics.median(times[2:]) * 1000)
"""


def smollm2() -> None:
    import torch

    torch.set_num_threads(1)  # as the model worker runs a pass
    from attention_core.composed import parse_mask
    from attention_core.models import load_model
    from attention_core.models.sparse import SKIP_BLOCK, SWEEP_TOKENS, measure_composed

    model = load_model("smollm2", device="cpu")
    full = measure_composed(model, "causal")
    print(
        f"| composed mask, {SWEEP_TOKENS} tokens | loss over full causal ({full.loss:.3f} nats) | keys a row keeps: "
        f"most, mean | {SKIP_BLOCK}×{SKIP_BLOCK} blocks skipped | one pass |"
    )
    print("|---|---|---|---|---|")
    for written in COMPOSITIONS:
        start = time.perf_counter()
        point = measure_composed(model, written)
        took = time.perf_counter() - start
        print(
            f"| {parse_mask(written).words()} | {point.loss - full.loss:+.3f} | {point.kept_most}, "
            f"{point.kept_mean:.1f} | {point.skipped:.0%} | {took:.2f} s |"
        )


def script_run(folder: Path, rounds: int) -> float:
    code = STEP.format(rounds=rounds)
    out = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--base", type=Path, help="another checkout to compare the script run with")
    parser.add_argument("--skip-model", action="store_true")
    args = parser.parse_args()
    if not args.skip_model:
        smollm2()
    here, base = [], []
    for _ in range(3):  # in turn: the machine's load falls on both alike
        here.append(script_run(ROOT, args.rounds))
        if args.base:
            base.append(script_run(args.base, args.rounds))
    print(
        f"Walkthrough script run, d_k step (AppTest, trace cached): this checkout {statistics.median(here):.1f} ms"
        + (f"; {args.base} {statistics.median(base):.1f} ms" if args.base else "")
    )


if __name__ == "__main__":
    main()
