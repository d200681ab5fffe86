"""Inference one token at a time (issue 27): what a reader waits for, and what it costs.

- SmolLM2-135M-Instruct writing 16 new tokens with every layer's attention captured at every step, on one
  thread as the model worker runs it and on the machine's cores: with its KV cache (DynamicCache), and without
  one (each step the whole forward pass over every token so far). Target: <= 5 s with the cache on 2 cores.
- A decode step on the Decoding page in the browser (the step slider, → on it): ms to the first changed chart,
  as a ratio to the trivial app's slider step measured in the same run, interleaved. Target: <= 2x.
- Bytes sent to the browser per rerun at the caps: the Decoding page at 256 tokens (its cap), 4 heads, a step
  moved; the Real model page after 32 new tokens (the cap), the scrubber moved. Target: <= 2 MB.

Run: .venv/bin/python bench/bench_decoding.py [--steps 10]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_browser import Frames  # noqa: E402  (bench/ is on the path when this file runs)
from bench_repaint import beside_the_yardstick, step, timed  # noqa: E402

from attention_core.decoding import MAX_DECODE_TOKENS  # noqa: E402
from attention_core.models import capture, load_model  # noqa: E402
from attention_core.models.generation import MAX_NEW_TOKENS, generate  # noqa: E402
from tests.browser import wait_for_chart  # noqa: E402

PROMPT = "One, two, three, four,"
SMOLLM2 = "SmolLM2-135M-Instruct (Llama-style decoder)"


def without_cache(loaded, text: str, new_tokens: int) -> list[int]:
    """Greedy generation with no cache: every step runs (and captures) the whole pass over all tokens so far."""
    ids = loaded.tokenizer(text)["input_ids"]
    for _ in range(new_tokens):
        capture(loaded.model, torch.tensor([ids]), tuple(str(i) for i in ids))  # every layer's maps, as with the cache
        with torch.inference_mode():
            logits = loaded.lm(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
        ids.append(int(logits.argmax()))
    return ids


def generation_seconds(repeats: int = 3) -> None:
    loaded = load_model("smollm2", device="cpu")
    cores = torch.get_num_threads()
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        generate(loaded, PROMPT, 2)  # warm
        cached, full = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            generation = generate(loaded, PROMPT, 16)
            cached.append(time.perf_counter() - started)
            started = time.perf_counter()
            ids = without_cache(loaded, PROMPT, 16)
            full.append(time.perf_counter() - started)
        assert ids[generation.prompt :] == list(generation.new_ids)  # the same tokens either way
        with_cache, again = statistics.median(cached), statistics.median(full)
        print(f"SmolLM2, 16 new tokens, every step captured, {threads} thread{'s' if threads > 1 else ''}: "
              f"with its KV cache {with_cache:.2f} s (target 5 s), without {again:.2f} s: {again / with_cache:.1f}x "
              f"faster with the cache")  # fmt: skip
    torch.set_num_threads(cores)


def browser_figures(steps: int) -> None:
    with beside_the_yardstick() as (trivial, app, url):
        frames = Frames(app)
        tokens = ["The", "next", "day", "is", "bright"]
        app.goto(f"{url}/decoding?dec_step=5")
        wait_for_chart(app, "q of", timeout=120)
        slider = app.locator("input[aria-label=step]")

        def decode_step() -> float:
            t = int(slider.input_value())
            key, target = ("ArrowLeft", t - 1) if t == 5 else ("ArrowRight", t + 1)
            slider.focus()
            return timed(app, lambda: slider.press(key), f"q of “{tokens[target - 1]}”")[0]

        decode_step()  # warm both once
        step(trivial, "d_k", lambda d: f"[5x{d}]")
        ours, yard = [], []
        for _ in range(steps):
            yard.append(step(trivial, "d_k", lambda d: f"[5x{d}]")[0])
            ours.append(decode_step())
            time.sleep(0.3)
        first, base = statistics.median(ours), statistics.median(yard)
        print(f"Decoding page, one step (→ on the step slider), default sentence: first changed chart {first:.0f} ms"
              f" = {first / base:.1f}x the trivial app's slider step ({base:.0f} ms; target 2x)")  # fmt: skip

        words = " ".join(f"w{i}" for i in range(MAX_DECODE_TOKENS))
        app.goto(f"{url}/decoding?text={quote(words)}&heads=4&dec_step=200")
        wait_for_chart(app, "q of", timeout=300)
        time.sleep(2)
        frames.bytes = 0
        slider = app.locator("input[aria-label=step]")
        slider.focus()
        slider.press("ArrowRight")
        wait_for_chart(app, "q of “w200”", timeout=120)
        frames.wait_quiet(app, quiet=1.0)
        print(f"Decoding page at its {MAX_DECODE_TOKENS}-token cap, 4 heads, one step: {frames.bytes / 1e6:.2f} MB "
              "sent (target 2 MB)")  # fmt: skip

        app.goto(f"{url}/real_model?rm_model={quote(SMOLLM2)}&text={quote(PROMPT)}&rm_new={MAX_NEW_TOKENS}")
        app.get_by_role("button", name="▶ Generate").click(timeout=180_000)
        app.locator("p", has_text="Written (").wait_for(timeout=180_000)
        time.sleep(2)
        frames.bytes = 0
        scrubber = app.get_by_role("slider", name="position")
        for _ in range(2):  # the first key press after the focus may only wake the slider: both counted
            scrubber.press("ArrowLeft")
            time.sleep(0.5)
            frames.wait_quiet(app, quiet=1.5)
        print(f"Real model page after {MAX_NEW_TOKENS} new tokens, the scrubber moved two positions: "
              f"{frames.bytes / 1e6:.2f} MB sent in all (target 2 MB a rerun)")  # fmt: skip


def main(steps: int) -> None:
    cores = subprocess.check_output(["nproc"]).decode().strip()
    print(f"machine: {platform.machine()}, {cores} cores, {platform.processor() or 'cpu'}; torch {torch.__version__}")
    generation_seconds()
    browser_figures(steps)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    main(parser.parse_args().steps)
