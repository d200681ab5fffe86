"""Engine speed: a full trace with statistics, median of repeated runs.

CPU targets (issue 2): n=32, d_model 512, 8 heads <= 5 ms; n=512 <= 150 ms.
With CUDA present it also times n=4096, d_model 768, 12 heads, causal, against torch's fused
scaled_dot_product_attention for the context alone (the floor), as a ratio.
Run: .venv/bin/python bench/bench_engine.py
"""

import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention_core import AttentionConfig, compute_attention, embed  # noqa: E402


def median_ms(fn, repeats: int, sync=lambda: None) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    threads = torch.get_num_threads()
    print(f"machine: {platform.machine()}, {threads} threads, torch {torch.__version__}")
    for n, repeats in ((32, 200), (512, 30)):
        config = AttentionConfig(d_model=512, d_k=64, heads=8, causal=True, device="cpu")
        x = embed([f"w{i}" for i in range(n)], 512)
        ms = median_ms(lambda x=x, config=config: compute_attention(x, config), repeats)
        print(f"CPU  n={n:<5} d_model 512, 8 heads, causal: {ms:8.2f} ms")
    if torch.cuda.is_available():
        sync = torch.cuda.synchronize
        config = AttentionConfig(d_model=768, d_k=64, heads=12, causal=True, device="cuda")
        x = embed([f"w{i}" for i in range(4096)], 768).cuda()
        full = median_ms(lambda: compute_attention(x, config, memory_budget=16 * 2**30), 20, sync)
        trace = compute_attention(x, config, memory_budget=16 * 2**30)
        fused = median_ms(lambda: F.scaled_dot_product_attention(trace.q, trace.k, trace.v, is_causal=True), 20, sync)
        print(
            f"CUDA n=4096 d_model 768, 12 heads, causal ({torch.cuda.get_device_name()}): full trace {full:.2f} ms, "
            f"fused SDPA {fused:.2f} ms, ratio {full / fused:.1f}x"
        )
    else:
        print("CUDA: not present on this machine")


if __name__ == "__main__":
    main()
