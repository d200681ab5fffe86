"""The attention variants (issue 26): what an MLA trace costs next to MHA's, and the 4096-token cap.

1. Time: a full trace (every intermediate kept) at n = 512, d_model 512, 8 heads of 64, causal, on the CPU,
   for MHA, GQA (2 key/value heads), MQA and MLA (d_c 256, d_h^R 32, rotary positions; as DeepSeek-V2's
   d_c = 4·d_h). The variants are timed in turn, round after round, so that the machine's noise falls on all
   of them alike; the figure is each one's median and its ratio to MHA's (target: MLA <= 1.5x MHA).
2. Memory: at the cap, n = 4096, each variant's estimate (attention_core.estimate_trace_bytes, by which the
   server refuses a request) beside the peak memory a trace really takes (max RSS of a fresh process, less
   the same process before the trace), and whether the default 2 GiB budget takes it or refuses it with the
   estimate in the message.
Run: .venv/bin/python bench/bench_variants.py
"""

import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attention_core import AttentionConfig, compute_attention, embed  # noqa: E402
from attention_core.config import check_request, estimate_trace_bytes, memory_budget_bytes  # noqa: E402

SIZES = {"d_model": 512, "d_k": 64, "d_v": 64, "heads": 8, "causal": True, "device": "cpu"}
VARIANTS = {
    "MHA": {"variant": "mha"},
    "GQA (2 kv heads)": {"variant": "gqa", "kv_heads": 2},
    "MQA": {"variant": "mqa"},
    "MLA (d_c 256, d_h^R 32, RoPE)": {"variant": "mla", "d_c": 256, "d_rope": 32, "positional": "rotary"},
}

# One trace in a fresh process: its peak memory beyond what the process held before it.
PEAK = """
import json, resource, sys, torch
sys.path.insert(0, {root!r})
from attention_core import AttentionConfig, compute_attention, embed
config = AttentionConfig(**json.loads({config!r}))
x = embed([f"w{{i}}" for i in range({n})], config.d_model)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
trace = compute_attention(x, config, memory_budget=64 * 2**30)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024)
"""


def timings(n: int, rounds: int) -> dict[str, list[float]]:
    x = embed([f"w{i}" for i in range(n)], SIZES["d_model"])
    configs = {name: AttentionConfig(**SIZES, **extra) for name, extra in VARIANTS.items()}
    for config in configs.values():
        compute_attention(x, config)  # warm up
    times = {name: [] for name in configs}
    for _ in range(rounds):
        for name, config in configs.items():
            start = time.perf_counter()
            compute_attention(x, config)
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def peak_bytes(n: int, extra: dict) -> int:
    config = json.dumps({**SIZES, **extra})  # extra may change the heads
    script = PEAK.format(root=str(ROOT), config=config, n=n)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def main():
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}")  # fmt: skip
    n = 512
    times = timings(n, rounds=15)
    mha = statistics.median(times["MHA"])
    print(f"\nTrace time, n = {n}, d_model 512, 8 heads of 64, causal, CPU (median of 15, interleaved):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<32} {median:8.1f} ms   {median / mha:4.2f}x MHA")

    n, budget = 4096, memory_budget_bytes()
    print(f"\nAt the cap, n = {n} (budget {budget / 2**20:,.0f} MB):")
    for heads in (8, 4):
        for name, extra in VARIANTS.items():
            extra = {**extra, "heads": heads}
            config = AttentionConfig(**{**SIZES, **extra})
            estimate = estimate_trace_bytes(n, config)
            peak = peak_bytes(n, extra)
            try:
                check_request(n, config)
                verdict = "built"
            except ValueError as error:
                verdict = f"refused: {error}"
            print(f"  {heads} heads, {name:<32} estimate {estimate / 2**20:6,.0f} MB, peak {peak / 2**20:6,.0f} MB: "
                  f"{verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
