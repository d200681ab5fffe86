"""Training page figures (README, "Watch attention learn"): time to train the default run on this CPU, when the
verb's attention to its subject first beats chance visibly, the memory of the kept checkpoints, the server's
cost of one scrub step (the layer at a checkpoint, its figures), and the √d_k experiment over three seeds.

    .venv/bin/python bench/bench_training.py
"""

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_core.config import (  # noqa: E402
    MAX_TRAIN_D_K,
    MAX_TRAIN_DIM,
    MAX_TRAIN_HEADS,
    MAX_TRAIN_STEPS,
    TRAIN_CHECKPOINTS,
)
from attention_core.training import (  # noqa: E402
    OBJECT,
    SUBJECT,
    VERB,
    Grammar,
    TrainingConfig,
    checkpoint_trace,
    encode,
    held_out_attention,
    held_out_sentences,
    train,
)
from figures.stages import stage_view  # noqa: E402
from figures.training import LAST_STEPS, loss_figure  # noqa: E402

VISIBLE = 0.5  # the verb's mean weight on its subject (held out); evenly would be 1/3


def main() -> None:
    held = held_out_sentences()
    times = []
    for _ in range(3):
        started = time.perf_counter()
        _, run = train(TrainingConfig())
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    per_step = seconds / len(run.loss)
    looks = [held_out_attention(c, run, held).by_position[:, VERB, SUBJECT].mean() for c in run.checkpoints]
    first = next((c for c, weight in zip(run.checkpoints, looks, strict=True) if weight >= VISIBLE), None)
    print(
        f"default run (d_model 8, d_k 4, 1 head, 400 steps): {seconds:.2f} s median of 3 ({per_step * 1e3:.1f} ms/step)"
    )
    if first is not None:
        print(f"verb->subject >= {VISIBLE} first at step {first.step}: ~{first.step * per_step:.2f} s")
    memory = sum(c.nbytes() for c in run.checkpoints)
    print(f"checkpoints kept: {len(run.checkpoints)}, {memory / 1024:.0f} KiB")
    largest = TrainingConfig(d_model=MAX_TRAIN_DIM, d_k=MAX_TRAIN_D_K, n_heads=MAX_TRAIN_HEADS,
                             steps=MAX_TRAIN_STEPS, checkpoint_every=MAX_TRAIN_STEPS // TRAIN_CHECKPOINTS)  # fmt: skip
    _, big = train(largest, stop=lambda: True)  # step 0 only: one checkpoint of the largest size
    count = largest.steps // largest.checkpoint_every + 1
    print(f"largest allowed (d_model {largest.d_model}, d_k {largest.d_k}, {largest.n_heads} heads, {largest.steps} "
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
    for d_k in (64,):
        for seed in range(3):
            runs = {scaled: train(TrainingConfig(d_k=d_k, seed=seed, scaled=scaled))[1] for scaled in (True, False)}
            line = []
            for scaled, r in runs.items():
                line.append(f"{'scaled' if scaled else 'unscaled'}: loss {statistics.fmean(r.loss[-LAST_STEPS:]):.3f}, "
                            f"saturated {statistics.fmean(r.saturated[-LAST_STEPS:]):.0%}, "
                            f"median |grad W_Q| {statistics.median(r.grad_w_q):.2g}")  # fmt: skip
            print(f"sqrt(d_k) experiment d_k {d_k} seed {seed}: " + " | ".join(line))

    robustness(held)


def robustness(held) -> None:
    """How reliably the default recipe teaches the lecture's point, over seeds and widths: the verb's weight on
    its subject over the held-out sentences (and its lowest subject group), and how often the model predicts
    their object (subject-verb pairs it never saw together)."""
    vocabulary = Grammar().vocabulary
    for d_model in (8, 16, 32):
        for seed in range(5):
            model, run = train(TrainingConfig(d_model=d_model, seed=seed))
            measured = held_out_attention(run.checkpoints[-1], run, held)
            with torch.no_grad():
                logits, _ = model(encode(vocabulary, held)[:, :OBJECT])
            predicted = logits[:, VERB].argmax(-1).tolist()
            right = sum(vocabulary[i] == s[OBJECT] for i, s in zip(predicted, held, strict=True)) / len(held)
            print(f"d_model {d_model:2} seed {seed}: verb->subject {measured.by_position[:, VERB, SUBJECT].mean():.2f}"
                  f" (lowest group {min(measured.by_group):.2f}), held-out objects {right:.0%},"
                  f" loss {statistics.fmean(run.loss[-LAST_STEPS:]):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
