"""Real-model speed and size (issue 4), median of repeated runs.

Targets: MiniLM, 32 tokens, every layer captured <= 150 ms on CPU; SmolLM2, 32 tokens <= 1.5 s;
first load from the cache <= 5 s for each (timed in a fresh Python process, import of
transformers included); the Real model page's overview <= 2 MB at the 128-token cap.
With CUDA present the 32- and 128-token captures are also timed on the GPU.
Then the app's model worker (issue 13): a 12-token SmolLM2 run on one thread and on torch's default threads,
and the worker's wall time per run with one reader, then with as many readers at once as it runs.
Run: .venv/bin/python bench/bench_models.py
"""

import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attention_core.models import load_model, model_cache_dir, trace_text  # noqa: E402
from attention_core.models.worker import RUN_THREADS, ModelWorker, runs_at_once  # noqa: E402
from bench.bench_engine import median_ms  # noqa: E402
from figures.overview import entropy_grid_figure, thumbnails_figure  # noqa: E402

SENTENCE = "the cat saw the dog and it ran after the ball because it was happy to play outside today"
WORDS = SENTENCE.split(" ")
COLD_LOAD = """
import time; start = time.perf_counter()
from attention_core.models import load_model
imported = time.perf_counter()
loaded = load_model("{key}", device="cpu")
print(imported - start, loaded.load_seconds, time.perf_counter() - start)
"""


def text_of(loaded, n_tokens: int) -> str:
    """A sentence that the model's tokenizer turns into exactly n_tokens tokens (special tokens included)."""
    words = []
    while len(loaded.tokenizer(" ".join(words))["input_ids"]) < n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    while len(loaded.tokenizer(" ".join(words))["input_ids"]) > n_tokens:
        words.pop()
    return " ".join(words)


def cold_load(key: str) -> tuple[float, float, float]:
    """(import s, load s, total s) in a fresh process, median of 3."""
    runs = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", COLD_LOAD.format(key=key)], cwd=ROOT, capture_output=True, text=True, check=True
        )
        runs.append(tuple(float(v) for v in out.stdout.split()[-3:]))
    return tuple(statistics.median(run[i] for run in runs) for i in range(3))


def main():
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"model cache: {model_cache_dir()}")
    for key, repeats in (("minilm", 30), ("smollm2", 10)):
        loaded = load_model(key, device="cpu")  # converts SmolLM2's GGUF first if the cache is empty
        imported, load, total = cold_load(key)
        print(f"{key}: fresh process: import {imported:.1f} s + load {load:.2f} s = {total:.1f} s")
        for n in (32, 128):
            text = text_of(loaded, n)
            ms = median_ms(lambda text=text, loaded=loaded: trace_text(loaded, text), repeats)
            print(f"{key}: {n} tokens, all {loaded.info.n_layers} layers captured, CPU: {ms:8.1f} ms")
        at_cap = trace_text(loaded, text_of(loaded, 400))
        sizes = [len(figure.to_json()) for figure in (entropy_grid_figure(at_cap), thumbnails_figure(at_cap))]
        print(f"{key}: overview at the {len(at_cap.tokens)}-token cap: {sum(sizes) / 1e6:.2f} MB of figure JSON")
        if torch.cuda.is_available():
            sync = torch.cuda.synchronize
            gpu = load_model(key, device="cuda")
            for n in (32, 128):
                text = text_of(gpu, n)
                ms = median_ms(lambda text=text, gpu=gpu: trace_text(gpu, text), repeats, sync)
                print(f"{key}: {n} tokens, CUDA ({torch.cuda.get_device_name()}): {ms:8.1f} ms")
    if not torch.cuda.is_available():
        print("CUDA: not present on this machine")
    side_by_side()


def side_by_side(key: str = "smollm2", runs: int = 12) -> None:
    """A reader's sentence is a dozen tokens: what one run costs on one thread and on all, and what the
    worker does per run when readers ask at once (every sentence different: no cache)."""
    loaded, default_threads = load_model(key, device="cpu"), torch.get_num_threads()
    text = "Reader {} says that the next day is bright".format
    for threads in sorted({RUN_THREADS, default_threads}):
        torch.set_num_threads(threads)
        ms = median_ms(lambda: trace_text(loaded, text("zero")), runs)
        print(f"{key}: 12 tokens in this process, {threads} thread(s): {ms:6.0f} ms")
    torch.set_num_threads(default_threads)
    worker, together = ModelWorker(), runs_at_once(default_threads)
    worker.load(key, "cpu")
    for readers in sorted({1, together}):
        texts = [text(f"{readers}-{i}") for i in range(runs * readers)]
        start = time.perf_counter()
        with ThreadPoolExecutor(readers) as pool:
            list(pool.map(lambda one: worker.trace(key, "cpu", one), texts))
        per_run = (time.perf_counter() - start) / len(texts)
        print(f"{key}: the model worker, {readers} reader(s) at once: {per_run * 1000:6.0f} ms of wall time per run")
    worker.close()


if __name__ == "__main__":
    main()
