"""Your own attention, your own weights, your own model (issue 41): its figures, median of repeated runs.

- Checking an upload at the caps (n = 128 tokens, 12 heads, d_model 768, d_k 64): every stage of a correct
  implementation, then one with a mistake (the catalogue computed), target <= 1 s on 2 cores.
- Opening a checkpoint: a nanoGPT-small layer (768 wide, 12 heads) read, found and cut into heads.
- Loading a 135M-parameter local folder (SmolLM2-135M-Instruct as converted to safetensors, named in
  ATTENTION_MODEL_DIRS), in a fresh Python process, transformers' import included: time recorded.
Run: .venv/bin/python bench/bench_own.py
"""

import io
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attention_core import AttentionConfig, trace_sentence  # noqa: E402
from attention_core.checking import check, inputs_arrays, inputs_settings, read_outputs  # noqa: E402
from attention_core.checkpoints import find_layers, read_checkpoint, split  # noqa: E402
from tests.test_checking import student  # noqa: E402  (the test's independent numpy implementation)

RUNS = 5
COLD_LOAD = """
import time; start = time.perf_counter()
from attention_core.models import load_model
loaded = load_model("dir:{folder}", device="cpu")
print(loaded.load_seconds, time.perf_counter() - start)
"""


def median_seconds(work, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def check_at_the_caps() -> tuple[float, float]:
    words = " ".join(["word"] * 128)
    trace = trace_sentence(words, AttentionConfig(d_model=768, d_k=64, heads=12, causal=True))
    inputs = {name: value.numpy() for name, value in inputs_arrays(trace).items()}
    settings = inputs_settings(trace)
    files = {}
    for mistake in (None, "no_scaling"):
        buffer = io.BytesIO()
        np.savez(buffer, **student(inputs, settings, mistake))
        files[mistake] = buffer.getvalue()
    # what is timed does what it says: all right, and the mistake found
    assert check(trace, read_outputs("mine.npz", files[None])).all_right
    assert [m.key for m in check(trace, read_outputs("mine.npz", files["no_scaling"])).mistakes] == ["no_scaling"]
    right = median_seconds(lambda: check(trace, read_outputs("mine.npz", files[None])))
    wrong = median_seconds(lambda: check(trace, read_outputs("mine.npz", files["no_scaling"])))
    return right, wrong


def open_a_checkpoint() -> float:
    state = {"h.0.attn.c_attn.weight": torch.randn(3 * 768, 768), "h.0.attn.c_proj.weight": torch.randn(768, 768)}
    buffer = io.BytesIO()
    torch.save({"model": state, "model_args": {"n_head": 12}}, buffer)
    data = buffer.getvalue()
    return median_seconds(lambda: split(find_layers(read_checkpoint("ckpt.pt", data))[0], 12))


def load_a_local_folder() -> tuple[float, float]:
    from attention_core.models.sources import _smollm2_folder

    folder = _smollm2_folder(print)  # the bundled GGUF converted once into a folder of safetensors
    runs = []
    for _ in range(3):
        env = {**os.environ, "ATTENTION_MODEL_DIRS": folder}
        out = subprocess.run([sys.executable, "-c", COLD_LOAD.format(folder=folder)], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
        runs.append(tuple(float(v) for v in out.stdout.split()[-2:]))
    return tuple(statistics.median(run[i] for run in runs) for i in range(2))


def main() -> None:
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}")
    right, wrong = check_at_the_caps()
    print(f"check at the caps (128 tokens, 12 heads): all right {right:.3f} s, a mistake named {wrong:.3f} s")
    print(f"open a nanoGPT-small layer (768, 12 heads): {open_a_checkpoint():.3f} s")
    load, total = load_a_local_folder()
    print(f"load a 135M local folder (SmolLM2) in a fresh process: load {load:.2f} s, with imports {total:.2f} s")


if __name__ == "__main__":
    main()
