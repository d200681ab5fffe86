"""Training page figures (README, "Watch attention learn"): time to train the default run on this CPU, when the
verb's attention to its subject first beats chance visibly, the memory of the kept checkpoints, the server's
cost of one scrub step (the layer at a checkpoint, its figures), the √d_k experiment over three seeds, and how
reliably the recipe teaches it: seeds x CPU kernel paths x d_model (issue 24).

A run is chaotic in the last bits of its arithmetic, and those bits depend on the CPU's kernels: the same seed on
AVX-512, AVX2 or no vector kernels at all can end elsewhere. The table trains every seed under each kernel path
on this one machine (ATEN_CPU_CAPABILITY, and MKL's own switch MKL_CBWR for a second matrix-product path, as on
another vendor's CPU), each path in a process of its own.

    .venv/bin/python bench/bench_training.py [--seeds 10] [--table-only]
"""

from __future__ import annotations

import argparse
import json
import os
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

from attention_core.device import cpu_kernels  # noqa: E402
from attention_core.limits import (  # noqa: E402
    MAX_TRAIN_D_K,
    MAX_TRAIN_DIM,
    MAX_TRAIN_HEADS,
    MAX_TRAIN_STEPS,
)
from attention_core.training import (  # noqa: E402
    LEARNED_PREDICTED,
    LEARNED_WEIGHT,
    TrainingConfig,
    checkpoint_trace,
    held_out_attention,
    held_out_sentences,
    train,
)
from figures.stages import stage_view  # noqa: E402
from figures.training import LAST_STEPS, loss_figure  # noqa: E402

VISIBLE = 0.5  # the verb's mean weight on its subject (held out); evenly would be 1/3
WIDTHS = (8, 16, 32)
# Kernel paths: the name in the table, and the environment that forces it ({} = this machine's own).
PATHS = {
    "default (no vector kernels)": {"ATEN_CPU_CAPABILITY": "default"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "avx2, MKL_CBWR=COMPATIBLE": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"},
    "this machine's own": {},
}


def default_run() -> None:
    """The page's default run, as the page trains it (torch's thread count): time, and what it learned when."""
    held = held_out_sentences()
    times = []
    for _ in range(3):
        started = time.perf_counter()
        _, run = train(TrainingConfig())
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    per_step = seconds / len(run.loss)
    config = run.config
    print(f"default run (d_model {config.d_model}, d_k {config.d_k}, {config.heads} head, {config.steps} steps, "
          f"{torch.get_num_threads()} threads, {cpu_kernels()} kernels): {seconds:.2f} s median of 3 "
          f"({', '.join(f'{t:.2f}' for t in times)}; {per_step * 1e3:.2f} ms/step)")  # fmt: skip
    measured = [held_out_attention(c, run, held) for c in run.checkpoints]
    first = next((c for c, m in zip(run.checkpoints, measured, strict=True) if m.verb_to_subject >= VISIBLE), None)
    if first is not None:
        print(f"verb->subject >= {VISIBLE} first at step {first.step}: ~{first.step * per_step:.2f} s")
    last = measured[-1]
    print(f"end: verb->subject {last.verb_to_subject:.2f}, held-out objects {last.predicted:.0%}, by group "
          f"{', '.join(f'{g:.2f}' for g in last.by_group)}; fingerprint {run.fingerprint()}")  # fmt: skip
    memory = sum(c.nbytes() for c in run.checkpoints)
    print(f"checkpoints kept: {len(run.checkpoints)}, {memory / 1024:.0f} KiB")
    largest = TrainingConfig(d_model=MAX_TRAIN_DIM, d_k=MAX_TRAIN_D_K, heads=MAX_TRAIN_HEADS, steps=MAX_TRAIN_STEPS)
    _, big = train(largest, stop=lambda: True)  # step 0 only: one checkpoint of the largest size
    count = sum(largest.keeps(step) for step in range(largest.steps + 1))
    print(f"largest allowed (d_model {largest.d_model}, d_k {largest.d_k}, {largest.heads} heads, {largest.steps} "
          f"steps): {count} checkpoints x {big.checkpoints[0].nbytes() / 2**20:.2f} MiB = "
          f"{count * big.checkpoints[0].nbytes() / 2**20:.1f} MiB")  # fmt: skip
    words = ("Bob", "will", "eat", "salad")
    costs = []
    for checkpoint in run.checkpoints:
        started = time.perf_counter()
        trace = checkpoint_trace(checkpoint, run, words)
        held_out_attention(checkpoint, run, held)
        loss_figure(run.loss, checkpoint.step, 1.07, run.config.steps)
        for key in ("weights", "projections"):
            stage_view(trace, key)
        costs.append(time.perf_counter() - started)
    print(
        f"server cost of one scrub step (trace, held-out map, figures): median {statistics.median(costs) * 1e3:.0f} ms"
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    _, one = train(TrainingConfig())
    torch.set_num_threads(threads)
    print(f"the same run on one thread: fingerprint {one.fingerprint()} "
          f"({'the same numbers' if one.fingerprint() == run.fingerprint() else 'OTHER numbers'})")  # fmt: skip


def sqrt_dk() -> None:
    for seed in range(3):
        runs = {scaled: train(TrainingConfig(d_k=64, seed=seed, scaled=scaled))[1] for scaled in (True, False)}
        line = []
        for scaled, r in runs.items():
            line.append(f"{'scaled' if scaled else 'unscaled'}: loss {statistics.fmean(r.loss[-LAST_STEPS:]):.3f}, "
                        f"saturated {statistics.fmean(r.saturated[-LAST_STEPS:]):.0%}, "
                        f"median |grad W_Q| {statistics.median(r.grad_w_q):.2g}")  # fmt: skip
        print(f"sqrt(d_k) experiment d_k 64 seed {seed}: " + " | ".join(line))


def one_path(seeds: int) -> None:
    """In a child process under one kernel path: every width and seed, one JSON line each."""
    torch.set_num_threads(1)  # two paths at once on two cores (at 100 sentences a step, one thread or two
    held = held_out_sentences()  # compute the same numbers: default_run checks it)
    for d_model in WIDTHS:
        for seed in range(seeds):
            started = time.perf_counter()
            _, run = train(TrainingConfig(d_model=d_model, seed=seed))
            measured = held_out_attention(run.checkpoints[-1], run, held)
            print(json.dumps({"d_model": d_model, "seed": seed, "weight": measured.verb_to_subject,
                              "predicted": measured.predicted, "learned": measured.learned,
                              "groups": measured.by_group, "kernels": cpu_kernels(),
                              "seconds": time.perf_counter() - started}), flush=True)  # fmt: skip


def table(seeds: int) -> None:
    """Seeds x kernel paths x d_model: each path's runs in a child process, two at once."""

    def child(env):
        command = [sys.executable, __file__, "--one-path", "--seeds", str(seeds)]
        out = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(PATHS, pool.map(child, PATHS.values()), strict=True))
    print(f"\nlearned = verb->subject >= {LEARNED_WEIGHT} and held-out objects >= {LEARNED_PREDICTED:.0%} "
          f"(held-out sentences; evenly: 0.33). Seeds 0-{seeds - 1}, {TrainingConfig().steps} steps.\n")  # fmt: skip
    print(
        "| d_model | kernel path | learned | median weight | lowest weight | lowest objects predicted | "
        "seed 0 | each seed's weight |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for d_model in WIDTHS:
        for path, rows in results.items():
            rows = sorted((r for r in rows if r["d_model"] == d_model), key=lambda r: r["seed"])
            learned = sum(r["learned"] for r in rows)
            seed0 = rows[0]
            each = " ".join(f"{r['weight']:.2f}" + ("" if r["learned"] else "*") for r in rows)
            print(f"| {d_model} | {path} ({rows[0]['kernels']}) | {learned}/{len(rows)} | "
                  f"{statistics.median(r['weight'] for r in rows):.2f} | {min(r['weight'] for r in rows):.2f} | "
                  f"{min(r['predicted'] for r in rows):.0%} | {seed0['weight']:.2f}, {seed0['predicted']:.0%}"
                  f"{'' if seed0['learned'] else ' (not learned)'} | "
                  f"{each} |")  # fmt: skip
    every = [r for rows in results.values() for r in rows]
    print(
        f"\n{sum(r['learned'] for r in every)} of {len(every)} runs learned it (* = a run that did not); "
        f"median {statistics.median(r['seconds'] for r in every):.1f} s a run on one thread, two at once."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--one-path", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_path:
        one_path(args.seeds)
        return
    cores = subprocess.check_output(["nproc"]).decode().strip()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {cores} cores, torch {torch.__version__}, "
          f"own kernels {cpu_kernels()}")  # fmt: skip
    if not args.table_only:
        default_run()
        sqrt_dk()
    table(args.seeds)


if __name__ == "__main__":
    main()
