"""The sentences a run learns from: lecture 002's "Alice will eat pizza", generated (`Grammar`), and the held-out
sentences it is measured on."""

from __future__ import annotations

import dataclasses
import math
import random

import torch

SUBJECTS = (  # noqa: SIM905  (names read better as words)
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent Victor "
    "Walter Yvonne Zoe Oscar Quentin Uma"
).split()
MODALS = ("will", "can", "must", "should", "may")
OBJECTS = {  # verb -> the objects it takes; subject group g takes the g-th
    "eat": ("pizza", "salad", "soup", "cake", "bread", "rice"),
    "read": ("novels", "comics", "poems", "news", "essays", "letters"),
    "play": ("chess", "tennis", "piano", "cards", "golf", "drums"),
    "drink": ("tea", "coffee", "juice", "milk", "water", "cocoa"),
    "drive": ("trucks", "buses", "taxis", "vans", "cars", "tractors"),
}
GROUPS = 6  # subject i is in group i % GROUPS (Alice takes pizza, Bob coffee, as in lecture 002)
SUBJECT, MODAL, VERB, OBJECT = range(4)  # positions in a sentence
POSITIONS = 4  # the grammar's sentences have 4 words, so the model learns 4 positions


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

    def held_out(self, subject: str, verb: str) -> bool:
        """Each subject's one verb that training never pairs it with ("Alice drink ..." is never seen): a
        model that predicts its object has combined the subject's group with the verb, not remembered it."""
        verbs = [v for v, _ in self.objects]
        return self.subjects.index(subject) % len(verbs) == verbs.index(verb)

    def sentences(self, count: int, seed: int, held_out: bool = False) -> list[tuple[str, ...]]:
        """`count` sentences drawn with `seed` (the same seed, the same sentences): for training, or, with
        held_out, only the subject-verb pairs that training never sees."""
        rng = random.Random(seed)
        verbs = [verb for verb, _ in self.objects]
        out = []
        while len(out) < count:
            subject, modal, verb = rng.choice(self.subjects), rng.choice(self.modals), rng.choice(verbs)
            if self.held_out(subject, verb) == held_out:
                out.append((subject, modal, verb, self.object_of(subject, verb)))
        return out

    def best_loss(self) -> float:
        """The lowest mean next-word loss (nats) any model can reach: after the subject the modal is a uniform
        choice, after the modal the verb is; after the verb the object is certain."""
        return (math.log(len(self.modals)) + math.log(len(self.objects))) / 3


def encode(vocabulary: tuple[str, ...], sentences) -> torch.Tensor:
    """Token ids [b, n] of sentences (tuples of words); a word outside the vocabulary raises ValueError."""
    index = {word: i for i, word in enumerate(vocabulary)}
    unknown = sorted({w for s in sentences for w in s} - set(index))
    if unknown:
        raise ValueError(f"words must be from the training vocabulary; got {', '.join(map(repr, unknown))}")
    return torch.tensor([[index[w] for w in s] for s in sentences])


HELD_OUT = 300  # sentences the page and the tests measure on
HELD_OUT_SEED = 10_000


def held_out_sentences(grammar: Grammar = Grammar()) -> list[tuple[str, ...]]:
    return grammar.sentences(HELD_OUT, seed=HELD_OUT_SEED, held_out=True)
