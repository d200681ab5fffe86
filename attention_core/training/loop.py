"""The training loop: mini-batches in a seeded order, AdamW with a step size that falls at the end, and a
checkpoint of every matrix at TRAIN_CHECKPOINTS steps (docs/training-recipe.md says why each choice)."""

from __future__ import annotations

import dataclasses
import hashlib

import torch

from attention_core.training.grammar import Grammar, encode
from attention_core.training.model import TinyLM, TrainingConfig, next_word_loss, saturated_share


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    step: int
    loss: float
    weights: dict[str, torch.Tensor]  # w_q, w_k, w_v, w_o
    embed: torch.Tensor  # [vocabulary, d]
    position: torch.Tensor  # [positions, d]
    unembed: torch.Tensor  # [d, vocabulary]: what the model predicts from, for the next-word probabilities

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (*self.weights.values(), self.embed, self.position, self.unembed)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())


@dataclasses.dataclass
class Run:
    """What a run has made so far; one entry per step in each list (lists only grow, so a reader in another
    thread may take a copy at any time). loss: the step's mini-batch loss; grad_w_q: the norm of its
    gradient with respect to W_Q."""

    config: TrainingConfig
    vocabulary: tuple[str, ...]
    checkpoints: list[Checkpoint] = dataclasses.field(default_factory=list)
    loss: list[float] = dataclasses.field(default_factory=list)
    saturated: list[float] = dataclasses.field(default_factory=list)
    grad_w_q: list[float] = dataclasses.field(default_factory=list)

    def checkpoint_at(self, step: int) -> Checkpoint:
        """The last checkpoint at or before `step` (the first one if none is)."""
        kept = list(self.checkpoints)
        return next((c for c in reversed(kept) if c.step <= step), kept[0])

    def fingerprint(self) -> str:
        """Eight hex digits of every number of the last checkpoint. Two runs of one config have the same
        fingerprint only if they computed the same weights, bit for bit (a run is one chain of steps: equal
        at its end means equal all along)."""
        digest = hashlib.sha256()
        for tensor in self.checkpoints[-1].tensors():
            digest.update(tensor.contiguous().numpy().tobytes())
        return digest.hexdigest()[:8]


DECAY_FROM = 0.8  # the step size stays config.lr for this share of the steps, then falls ...
LAST_LR = 0.1  # ... in a straight line to this share of it at the last step


def learning_rate(config: TrainingConfig, step: int) -> float:
    """η at `step` (the η of lecture 002's update W ← W − η·∂L/∂W; AdamW divides the gradient by its running
    size first): config.lr, then over the last fifth of the steps falling to LAST_LR of it."""
    start = DECAY_FROM * config.steps
    if step <= start:
        return config.lr
    return config.lr * (1 - (1 - LAST_LR) * (step - start) / (config.steps - start))


def batches(count: int, config: TrainingConfig):
    """Index tensors of the mini-batches, step after step: each pass over the `count` sentences in an order
    drawn from the seed (the same seed, the same batches), cut into batches of config.batch."""
    generator = torch.Generator().manual_seed(config.seed)
    per_pass = count // config.batch
    while True:
        order = torch.randperm(count, generator=generator)
        for i in range(per_pass):
            yield order[i * config.batch : (i + 1) * config.batch]


def train(
    config: TrainingConfig = TrainingConfig(), grammar: Grammar = Grammar(), stop=lambda: False, run: Run | None = None
) -> tuple[TinyLM, Run]:
    """Train from the seed; returns (model, run). `stop()`: asked before every step; `run`: filled as it goes
    (a new one by default). The same config gives the same run bit for bit on the same machine (its CPU
    kernels and thread count); elsewhere another run that learns the same (see the module's docstring)."""
    vocabulary = grammar.vocabulary
    run = run or Run(config, vocabulary)
    model = TinyLM(vocabulary, config)
    ids = encode(vocabulary, grammar.sentences(config.sentences, seed=config.seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    for step, batch in zip(range(config.steps + 1), batches(len(ids), config), strict=False):
        optimizer.zero_grad()
        loss, stages = next_word_loss(model, ids[batch])
        loss.backward()  # also at the last step: its gradient is measured, not used
        run.saturated.append(saturated_share(stages["weights"].detach(), config.causal))
        run.grad_w_q.append(model.w_q.grad.norm().item())
        last = step == config.steps or stop()
        if last or config.keeps(step):
            kept = (model.embed, model.position, model.unembed)
            run.checkpoints.append(Checkpoint(step, loss.item(), model.weights(), *(t.detach().clone() for t in kept)))
        run.loss.append(loss.item())  # after the checkpoint: a reader that sees step s's loss sees its checkpoint
        if last:
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        optimizer.step()
    return model, run


def model_at(checkpoint: Checkpoint, vocabulary: tuple[str, ...], config: TrainingConfig) -> TinyLM:
    """The model as it was at the checkpoint."""
    model = TinyLM(vocabulary, config)
    with torch.no_grad():
        for name, value in checkpoint.weights.items():
            getattr(model, name).copy_(value)
        model.embed.copy_(checkpoint.embed)
        model.position.copy_(checkpoint.position)
        model.unembed.copy_(checkpoint.unembed)
    return model
