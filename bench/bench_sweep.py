"""The masks after MLA on SmolLM2 (issue 43): the whole sweep's time and what it measures.

Target: the sweep at 512 tokens (1 reference + 4 masks x 5 budgets = 21 forward passes) <= 30 s on 2 cores,
run as the Real model page runs it: through the app's model worker, each pass on one thread, as many at once
as the worker runs. The model's load is not counted (the page has loaded it before). Prints every point, the
heads that lose most, and StreamingLLM's comparison (the README's table is this output).
Then what a rerun of the page costs once the points are kept: the section's figures and words built from them
(what the Real model page's masks section draws), against the page's overview of every head (its thumbnails) for
the default sentence, both as the page builds them and written to JSON, median of 20. And a server started again:
its new worker reads the points the first one kept on disk (attention_core/models/kept.py; each measured round
starts from an empty folder, so that it measures).
With a length (1,024 or 2,048 tokens, issue 64: the masks at length), the sweep at that length, once per round.
Run: .venv/bin/python bench/bench_sweep.py [rounds, default 3] [tokens, default 512]
"""

import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from attention_core.models.kept import FOLDER_ENV  # noqa: E402
from attention_core.models.sparse import SWEEP_TOKENS, plan, sweep  # noqa: E402
from attention_core.models.worker import ModelWorker  # noqa: E402
from bench.bench_engine import median_ms  # noqa: E402
from figures.overview import thumbnails_figure  # noqa: E402
from figures.sweep import (  # noqa: E402
    heads_losing_most,
    lost_figure,
    rows_lost_figure,
    sparse_sentence,
    streaming_sentence,
    sweep_figure,
)

DEFAULT_TEXT = "The next day is bright"  # the sidebar's sentence


def section(points) -> None:
    """What the masks section builds on a rerun: its three figures as JSON, and its words."""
    chosen = points[1]
    for made in (sweep_figure(points), lost_figure(chosen), rows_lost_figure(chosen)):
        made.to_json()
    streaming_sentence(points), sparse_sentence(points), heads_losing_most(chosen)


def main(rounds: int = 3, tokens: int = SWEEP_TOKENS) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    os.environ[FOLDER_ENV] = str(folder)  # the workers' kept points (they inherit it)
    worker = ModelWorker()
    try:
        worker.load("smollm2", "cpu")
        times = []
        for _ in range(rounds):
            shutil.rmtree(folder)  # nothing kept: the round measures every point
            folder.mkdir()
            started = time.perf_counter()
            points = sweep(worker, "smollm2", "cpu", progress=lambda done, total: None, tokens=tokens)
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        kept = {(p.mask, p.budget): p for p in points}
        sweep(worker, "smollm2", "cpu", kept, progress=lambda done, total: None, tokens=tokens)
        again = time.perf_counter() - started
        overview = worker.trace("smollm2", "cpu", DEFAULT_TEXT)
    finally:
        worker.close()
    restarted = ModelWorker()  # a server started again: a new worker, the points on disk
    try:
        restarted.load("smollm2", "cpu")
        started = time.perf_counter()
        sweep(restarted, "smollm2", "cpu", progress=lambda done, total: None, tokens=tokens)
        from_disk = time.perf_counter() - started
    finally:
        restarted.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    each = ", ".join(f"{t:.1f} s" for t in times)
    print(f"sweep of {len(plan())} passes at {tokens} tokens: {each} (median {statistics.median(times):.1f} s;")
    print(f"target <= 30 s at {SWEEP_TOKENS}); the kept points asked again: {again * 1000:.0f} ms; a server started")
    print(f"again, every point read from disk by its new worker: {from_disk * 1000:.0f} ms")
    full = points[0].loss
    print("\n| mask | budget | keys kept | loss (nats) | vs full | mean weight lost | heads losing most |")
    print("|---|---|---|---|---|---|---|")
    for p in points:
        worst = p.lost.flatten().argsort(descending=True)[:3].tolist()
        heads = ", ".join(f"L{i // p.lost.shape[1] + 1}H{i % p.lost.shape[1] + 1}" for i in worst) if p.budget else ""
        print(f"| {p.mask} | {p.budget or ''} | {p.keys_kept or 'all'} | {p.loss:.3f} | {p.loss - full:+.3f} | "
              f"{float(p.lost.mean()):.3f} | {heads} |")  # fmt: skip
    print("\nStreamingLLM's comparison:", streaming_sentence(points))
    drawn, thumbs = median_ms(lambda: section(points), 20), median_ms(lambda: thumbnails_figure(overview).to_json(), 20)
    print(f"\na rerun with the points kept: the section's figures and words {drawn:.1f} ms; the page's overview of")
    print(f"every head (thumbnails, {DEFAULT_TEXT!r}) {thumbs:.1f} ms: {drawn / thumbs:.2f}x")


if __name__ == "__main__":
    main(*(int(argument) for argument in sys.argv[1:3]))
