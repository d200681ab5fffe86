"""The model a run trains: embeddings and positions, one attention layer of this package's own (`attend`), and
the unembedding; its loss, and how saturated its softmax is."""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.composed import causal_mask
from attention_core.config import AttentionConfig
from attention_core.engine import attend
from attention_core.limits import (
    MAX_TRAIN_D_K,
    MAX_TRAIN_DIM,
    MAX_TRAIN_HEADS,
    MAX_TRAIN_SENTENCES,
    MAX_TRAIN_STEPS,
    TRAIN_CHECKPOINTS,
)
from attention_core.training.grammar import POSITIONS
from attention_core.weights import init_weights


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """The layer's knobs (the sidebar's: the same sizes as the Walkthrough's default) and the run's.
    steps: the budget, one mini-batch of `batch` training sentences each (of `sentences`, drawn from the seed);
    lr: AdamW's first step size (see learning_rate), weight_decay: its decay; checkpoint_every: steps between
    kept weights (0: about TRAIN_CHECKPOINTS over the run, every 10 steps or more; see keeps)."""

    d_model: int = 8
    d_k: int = 4
    heads: int = 1
    causal: bool = True
    scaled: bool = True
    seed: int = 0
    steps: int = 2000
    lr: float = 0.05
    weight_decay: float = 0.1
    batch: int = 100
    sentences: int = 2000
    checkpoint_every: int = 0

    def __post_init__(self):
        def whole(value) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        if self.checkpoint_every == 0 and whole(self.steps):
            object.__setattr__(self, "checkpoint_every", max(10, self.steps // TRAIN_CHECKPOINTS))
        for field, value, high in (
            ("d_model", self.d_model, MAX_TRAIN_DIM),
            ("d_k", self.d_k, MAX_TRAIN_D_K),
            ("heads", self.heads, MAX_TRAIN_HEADS),
            ("training steps", self.steps, MAX_TRAIN_STEPS),
            ("checkpoint_every", self.checkpoint_every, MAX_TRAIN_STEPS),
            ("sentences", self.sentences, MAX_TRAIN_SENTENCES),
            ("batch", self.batch, self.sentences),
        ):
            if not whole(value) or not 1 <= value <= high:
                raise ValueError(
                    f"{field} for training must be a whole number from 1 to {high:,}; got {value!r} "
                    f"(a model this page trains in seconds on a CPU)"
                )
        self.attention()  # the other fields are checked as the attention layer's

    def keeps(self, step: int) -> bool:
        """Whether the weights at `step` are kept: every checkpoint_every steps, and TRAIN_CHECKPOINTS // 2 times
        more over the first tenth of the run, where the map changes fastest (at the default sizes: steps 0-200
        every 10 steps, then every 50)."""
        early = max(1, self.steps // 10 // (TRAIN_CHECKPOINTS // 2))
        return step % self.checkpoint_every == 0 or (step <= self.steps // 10 and step % early == 0)

    def attention(self) -> AttentionConfig:
        """The attention layer's config, as compute_attention takes it (float32, on the CPU)."""
        return AttentionConfig(
            d_model=self.d_model,
            d_k=self.d_k,
            heads=self.heads,
            causal=self.causal,
            scaled=self.scaled,
            seed=self.seed,
            init="xavier",
            device="cpu",
        )


class TinyLM(torch.nn.Module):
    """Embedding + positions -> one attention layer (residual) -> unembedding: next-word logits."""

    def __init__(self, vocabulary: tuple[str, ...], config: TrainingConfig, positions: int = POSITIONS):
        super().__init__()
        self.vocabulary, self.config = vocabulary, config
        generator = torch.Generator().manual_seed(config.seed)
        d = config.d_model
        self.embed = torch.nn.Parameter(torch.randn(len(vocabulary), d, generator=generator) / math.sqrt(d))
        self.position = torch.nn.Parameter(torch.randn(positions, d, generator=generator) / math.sqrt(d))
        # The attention weights start as the from-scratch pages draw them for this seed: step 0 is "random".
        for name, w in init_weights(config.attention()).items():
            self.register_parameter(name, torch.nn.Parameter(w.clone()))
        self.unembed = torch.nn.Parameter(torch.randn(d, len(vocabulary), generator=generator) / math.sqrt(d))
        self.scale = config.attention().scale  # 1/√d_k, or 1 unscaled: the layer's own, as every page reads it

    def x(self, ids: torch.Tensor) -> torch.Tensor:
        """X for token ids [b, n]: word embedding + position embedding, [b, n, d]."""
        # A one-hot product, not embed[ids]: its gradient is a matrix product, the same bit for bit on every run
        # (indexing's gradient adds rows in whatever order the CPU's threads finish).
        one_hot = torch.nn.functional.one_hot(ids, len(self.vocabulary)).to(self.embed.dtype)  # [b, n, vocabulary]
        return one_hot @ self.embed + self.position[: ids.shape[-1]]

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(logits [b, n, vocabulary], the attention stages of `attend` with a batch dimension in front)."""
        x = self.x(ids).unsqueeze(1)  # [b, 1, n, d]: one copy per head
        q, k, v = x @ self.w_q, x @ self.w_k, x @ self.w_v  # [b, h, n, d_k], [b, h, n, d_k], [b, h, n, d_v]
        n = ids.shape[-1]
        stages = attend(q, k, v, scale=self.scale, mask=causal_mask(n) if self.config.causal else None)
        context = stages["context"]  # [b, h, n, d_v]
        concat = context.transpose(1, 2).reshape(ids.shape[0], n, -1)  # [b, n, h*d_v], heads side by side
        out = concat @ self.w_o  # [b, n, d]
        return (x.squeeze(1) + out) @ self.unembed, stages

    def weights(self) -> dict[str, torch.Tensor]:
        """The attention layer's matrices now, detached copies in compute_attention's shapes."""
        return {name: getattr(self, name).detach().clone() for name in ("w_q", "w_k", "w_v", "w_o")}


def next_word_loss(model: TinyLM, ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean cross-entropy (nats) of predicting each word from the ones before it, and the attention stages."""
    logits, stages = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    return loss, stages


SATURATED = 0.99  # a softmax row whose largest weight is above this passes almost no gradient to its scores


def saturated_share(weights: torch.Tensor, causal: bool) -> float:
    """The share of softmax rows [..., n, n] whose largest weight is above SATURATED, counting only rows that
    see two or more keys (under the causal mask the first token sees itself alone: its weight is always 1)."""
    rows = weights.amax(dim=-1)  # [..., n]
    if causal:
        rows = rows[..., 1:]
    return (rows > SATURATED).float().mean().item() if rows.numel() else 0.0
