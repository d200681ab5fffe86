"""Lecture 002's model: the run that makes the lecture's pattern, searched for once and shipped with the app;
and a checkpoint as numbers to download."""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from attention_core.training.evaluation import LEARNED_WEIGHT, checkpoint_trace, held_out_attention, lesson, sentence_x
from attention_core.training.grammar import OBJECT, SUBJECT, VERB, Grammar, held_out_sentences
from attention_core.training.loop import Checkpoint, Run, train
from attention_core.training.model import TrainingConfig

# Lecture 002's example with trained weights: "eat" looks at "Alice" (the lecture prints 0.70). One run of the
# Training page's default config learns the verb-subject rule, but where it ends is chaotic: a run may
# leave one subject group without attention and predict it by default (HeldOut.by_group, app_pages/training/), and
# on some CPUs that group is Alice's. So the lecture's model was searched for once (lecture_model: the first seed
# whose run learned the rule and makes the lecture's pattern), by scripts/train_lecture_model.py, and ships with
# the app (LECTURE_MODEL_FILE): every machine shows the same picture, whichever CPU serves it.
LECTURE_SENTENCE = ("Alice", "will", "eat", "pizza")
LECTURE_SEEDS = 8
LECTURE_MODEL_FILE = Path(__file__).parents[1] / "data" / "lecture-002.safetensors"
CHECKPOINT_TENSORS = ("w_q", "w_k", "w_v", "w_o", "embed", "position", "unembed")


@dataclasses.dataclass(frozen=True)
class LectureModel:
    """The lecture's trained model (see lecture_model): its run, and for every seed tried in turn, the verb's
    weight on the subject of LECTURE_SENTENCE and whether the run made the pattern; the last is the one kept.
    made_on: where the search ran (CPU kernels, torch, date), for a model loaded from LECTURE_MODEL_FILE."""

    run: Run
    tried: tuple[tuple[int, float, bool], ...]
    made_on: str = ""

    @property
    def seed(self) -> int:
        return self.run.config.seed

    @property
    def found(self) -> bool:
        return self.tried[-1][2]


def makes_the_pattern(checkpoint: Checkpoint, run: Run, grammar: Grammar = Grammar()) -> tuple[float, bool]:
    """The verb's weight on its subject in LECTURE_SENTENCE, and whether the model has lecture 002's pattern:
    that weight is at least LEARNED_WEIGHT, the model predicts the sentence's object, and the run learned the
    rule over the held-out sentences (HeldOut.learned)."""
    weight = checkpoint_trace(checkpoint, run, LECTURE_SENTENCE).weights[:, VERB, SUBJECT].mean().item()
    predicted = run.vocabulary[int(lesson(checkpoint, run, LECTURE_SENTENCE).probabilities.argmax())]
    learned = held_out_attention(checkpoint, run, held_out_sentences(grammar), grammar).learned
    return weight, weight >= LEARNED_WEIGHT and predicted == LECTURE_SENTENCE[OBJECT] and learned


def lecture_model(config: TrainingConfig = TrainingConfig(), grammar: Grammar = Grammar()) -> LectureModel:
    """Train `config` with seeds config.seed, config.seed + 1, ... (at most LECTURE_SEEDS) until a run makes
    lecture 002's pattern (makes_the_pattern); if none does, the run whose verb looked at Alice the most. This is
    the search scripts/train_lecture_model.py runs once; the app loads its result (load_lecture_model)."""
    tried, runs = [], []
    for seed in range(config.seed, config.seed + LECTURE_SEEDS):
        _, run = train(dataclasses.replace(config, seed=seed), grammar)
        weight, made = makes_the_pattern(run.checkpoints[-1], run, grammar)
        tried.append((seed, weight, made))
        runs.append(run)
        if made:
            return LectureModel(run, tuple(tried))
    best = max(range(len(runs)), key=lambda i: tried[i][1])
    return LectureModel(runs[best], (*tried[:best], *tried[best + 1 :], tried[best]))


def save_lecture_model(model: LectureModel, path: Path, made_on: str) -> None:
    """The run (every checkpoint, and the loss, saturation and gradient of every step) as safetensors; the config,
    vocabulary, seeds tried and where it was made in its metadata."""
    run = model.run
    tensors = {
        f"{c.step}/{name}": t.contiguous()
        for c in run.checkpoints
        for name, t in zip(CHECKPOINT_TENSORS, c.tensors(), strict=True)
    }
    for series in ("loss", "saturated", "grad_w_q"):
        tensors[series] = torch.tensor(getattr(run, series), dtype=torch.float64)
    tensors["checkpoint_loss"] = torch.tensor([c.loss for c in run.checkpoints], dtype=torch.float64)
    metadata = {
        "config": json.dumps(dataclasses.asdict(run.config)),
        "vocabulary": json.dumps(list(run.vocabulary)),
        "steps": json.dumps([c.step for c in run.checkpoints]),
        "tried": json.dumps(model.tried),
        "fingerprint": run.fingerprint(),
        "made_on": made_on,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata)


@functools.cache
def load_lecture_model(path: Path = LECTURE_MODEL_FILE) -> LectureModel:
    """Lecture 002's model as it ships (scripts/train_lecture_model.py made it): the same run, bit for bit, on
    every machine. Refuses a file whose numbers are not the ones its fingerprint names."""
    with safe_open(str(path), framework="pt") as file:
        metadata = file.metadata()
        tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118 (safe_open has no iteration)
    stored = json.loads(metadata["config"])
    # The bundled file was made when the config called its heads n_heads (its numbers, and so its fingerprint, are
    # the same under either name): the old name is read here, at the door, and nowhere else.
    stored.setdefault("heads", stored.pop("n_heads", 1))
    config = TrainingConfig(**stored)
    run = Run(config, tuple(json.loads(metadata["vocabulary"])))
    for step, loss in zip(json.loads(metadata["steps"]), tensors["checkpoint_loss"].tolist(), strict=True):
        w_q, w_k, w_v, w_o, embed, position, unembed = (tensors[f"{step}/{name}"] for name in CHECKPOINT_TENSORS)
        run.checkpoints.append(
            Checkpoint(step, loss, {"w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o}, embed, position, unembed)
        )
    for series in ("loss", "saturated", "grad_w_q"):
        getattr(run, series).extend(tensors[series].tolist())
    if run.fingerprint() != metadata["fingerprint"]:
        raise ValueError(
            f"{path} does not hold the numbers its fingerprint names: make it again with scripts/train_lecture_model.py"
        )
    tried = tuple((int(seed), float(weight), bool(made)) for seed, weight, made in json.loads(metadata["tried"]))
    return LectureModel(run, tried, metadata["made_on"])


def checkpoint_npz(checkpoint: Checkpoint, run: Run, words) -> bytes:
    """The layer at a checkpoint as an .npz: X of the sentence and W_Q, W_K, W_V, W_O as compute_attention takes
    them (the Walkthrough loads these), the embeddings, the vocabulary and tokens (JSON) and the settings."""
    arrays = {name: w.numpy() for name, w in checkpoint.weights.items()}
    arrays["x"] = sentence_x(checkpoint, run.vocabulary, words).numpy()
    arrays["embed"], arrays["position"] = checkpoint.embed.numpy(), checkpoint.position.numpy()
    text = {
        "tokens_json": list(words),
        "vocabulary_json": list(run.vocabulary),
        "config_json": dataclasses.asdict(run.config) | {"step": checkpoint.step, "loss": checkpoint.loss},
    }
    for name, value in text.items():
        arrays[name] = np.frombuffer(json.dumps(value).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
