"""Watch attention learn (issue 14), the engine: W_Q, W_K and W_V trained, from random to "eat looks at Alice".

A tiny next-word model whose one attention layer is this package's own (`attend`, the same stages and weight
shapes as `compute_attention`), trained on generated sentences in the shape of lecture 002's "Alice will eat
pizza". Every checkpoint is a set of {"w_q", "w_k", "w_v", "w_o"} matrices that `compute_attention` takes as
they are, with X the trained embeddings of a sentence: every view of the app can show the layer at any step.

The grammar (`Grammar`): subject, modal, verb, object. The modal and the verb are drawn at random; the object
follows from the verb (what one eats, reads, plays, drinks, drives) and from the subject (each subject has a
taste: subjects fall into groups, and group g takes object g of the verb's list). Predicting the object at the
verb's position therefore needs the subject: that is what the verb's query learns to find. Nothing else in the
sentence tells it which object, so the lowest possible loss is that of the two random choices.

Shapes: b sentences, n tokens, h heads, d = d_model, d_k, d_v; tokens are rows as everywhere here.
"""

from __future__ import annotations

import dataclasses
import math
import random

import torch

from attention_core.config import AttentionConfig
from attention_core.engine import attend, causal_mask
from attention_core.weights import init_weights

SUBJECTS = (  # noqa: SIM905  (names read better as words)
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent Victor "
    "Walter Yvonne Zoe Oscar Quentin Uma"
).split()
MODALS = ("will", "can", "must", "should", "may")
OBJECTS = {  # verb -> the objects it takes; subject group g takes the g-th
    "eat": ("pizza", "salad", "soup", "cake"),
    "read": ("novels", "comics", "poems", "news"),
    "play": ("chess", "tennis", "piano", "cards"),
    "drink": ("tea", "coffee", "juice", "milk"),
    "drive": ("trucks", "buses", "taxis", "vans"),
}
GROUPS = 4  # subject i is in group i % GROUPS
SUBJECT, MODAL, VERB, OBJECT = range(4)  # positions in a sentence


@dataclasses.dataclass(frozen=True)
class Grammar:
    """Sentences "<subject> <modal> <verb> <object>"; the object is OBJECTS[verb][group of the subject]."""

    subjects: tuple[str, ...] = tuple(SUBJECTS)
    modals: tuple[str, ...] = MODALS
    objects: tuple[tuple[str, tuple[str, ...]], ...] = tuple(OBJECTS.items())

    @property
    def vocabulary(self) -> tuple[str, ...]:
        words = [*self.subjects, *self.modals]
        for verb, things in self.objects:
            words += [verb, *things]
        return tuple(dict.fromkeys(words))

    def object_of(self, subject: str, verb: str) -> str:
        return dict(self.objects)[verb][self.subjects.index(subject) % GROUPS]

    def sentences(self, count: int, seed: int) -> list[tuple[str, ...]]:
        """`count` sentences drawn with `seed` (the same seed, the same sentences)."""
        rng = random.Random(seed)
        verbs = [verb for verb, _ in self.objects]
        out = []
        for _ in range(count):
            subject, modal, verb = rng.choice(self.subjects), rng.choice(self.modals), rng.choice(verbs)
            out.append((subject, modal, verb, self.object_of(subject, verb)))
        return out

    def best_loss(self) -> float:
        """The lowest mean next-word loss (nats) any model can reach: after the subject the modal is a uniform
        choice, after the modal the verb is; after the verb the object is certain."""
        return (math.log(len(self.modals)) + math.log(len(self.objects))) / 3


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """The layer's knobs (as in the sidebar) and the run's. lr: Adam's step size; steps: the budget;
    checkpoint_every: steps between kept weights."""

    d_model: int = 16
    d_k: int = 8
    n_heads: int = 1
    causal: bool = True
    scaled: bool = True
    seed: int = 0
    steps: int = 400
    lr: float = 0.05
    sentences: int = 1000
    checkpoint_every: int = 10

    def attention(self) -> AttentionConfig:
        """The attention layer's config, as compute_attention takes it (float32, on the CPU)."""
        return AttentionConfig(d_model=self.d_model, d_k=self.d_k, n_heads=self.n_heads, causal=self.causal,
                               scaled=self.scaled, seed=self.seed, init="xavier", device="cpu")  # fmt: skip


class TinyLM(torch.nn.Module):
    """Embedding + positions -> one attention layer (residual) -> unembedding: next-word logits."""

    def __init__(self, vocabulary: tuple[str, ...], config: TrainingConfig, positions: int = 4):
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
        scale = 1 / math.sqrt(self.config.d_k) if self.config.scaled else 1.0
        stages = attend(q, k, v, scale=scale, mask=causal_mask(n) if self.config.causal else None)
        context = stages["context"]  # [b, h, n, d_v]
        concat = context.transpose(1, 2).reshape(ids.shape[0], n, -1)  # [b, n, h*d_v], heads side by side
        out = concat @ self.w_o  # [b, n, d]
        return (x.squeeze(1) + out) @ self.unembed, stages

    def weights(self) -> dict[str, torch.Tensor]:
        """The attention layer's matrices now, detached copies in compute_attention's shapes."""
        return {name: getattr(self, name).detach().clone() for name in ("w_q", "w_k", "w_v", "w_o")}


def encode(vocabulary: tuple[str, ...], sentences) -> torch.Tensor:
    """Token ids [b, n] of sentences (tuples of words); a word outside the vocabulary raises ValueError."""
    index = {word: i for i, word in enumerate(vocabulary)}
    unknown = sorted({w for s in sentences for w in s} - set(index))
    if unknown:
        raise ValueError(f"words must be from the training vocabulary; got {', '.join(map(repr, unknown))}")
    return torch.tensor([[index[w] for w in s] for s in sentences])


def next_word_loss(model: TinyLM, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of predicting each word from the ones before it."""
    logits, _ = model(ids[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    step: int
    loss: float
    weights: dict[str, torch.Tensor]  # w_q, w_k, w_v, w_o
    embed: torch.Tensor  # [vocabulary, d]
    position: torch.Tensor  # [positions, d]


def train(config: TrainingConfig = TrainingConfig(), grammar: Grammar = Grammar(), stop=lambda: False):
    """Train from the seed; returns (model, checkpoints, losses per step). `stop()`: asked before every step.
    On the CPU the same config gives the same run bit for bit."""
    vocabulary = grammar.vocabulary
    model = TinyLM(vocabulary, config)
    ids = encode(vocabulary, grammar.sentences(config.sentences, seed=config.seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    checkpoints, losses = [], []

    def keep(step: int, loss: float) -> None:
        checkpoints.append(Checkpoint(step, loss, model.weights(), model.embed.detach().clone(),
                                      model.position.detach().clone()))  # fmt: skip

    for step in range(config.steps + 1):
        loss = next_word_loss(model, ids)
        losses.append(loss.item())
        if step % config.checkpoint_every == 0 or step == config.steps:
            keep(step, losses[-1])
        if step == config.steps or stop():
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, checkpoints, losses


def verb_to_subject(model: TinyLM, sentences) -> float:
    """Mean attention weight from the verb's query to the subject's key over the sentences (and heads)."""
    with torch.no_grad():
        _, stages = model(encode(model.vocabulary, sentences))
    return stages["weights"][:, :, VERB, SUBJECT].mean().item()
