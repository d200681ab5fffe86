"""What a run learned, on held-out sentences; and the trained layer on a sentence of one's own: its trace, its
greedy continuation, and lecture 002's one step of gradient descent."""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.engine import compute_attention
from attention_core.training.grammar import GROUPS, OBJECT, POSITIONS, SUBJECT, VERB, Grammar, encode
from attention_core.training.loop import Checkpoint, Run, learning_rate, model_at

# "The run learned it", one definition for the page, the tests and the bench: over the held-out sentences the
# verb puts at least LEARNED_WEIGHT of its attention on its subject (evenly over the 3 words it sees: 1/3), and
# the model predicts the object of at least LEARNED_PREDICTED of them (subject-verb pairs it never saw).
LEARNED_WEIGHT = 0.6
LEARNED_PREDICTED = 0.9


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """What the model at a checkpoint does over sentences (held_out_attention). by_position: the weights
    averaged over the sentences, [heads, 4, 4], rows and columns the positions subject, modal, verb, object.
    by_group: the verb's mean weight on the subject (over heads) for the subjects of each group in turn.
    predicted: the share of the sentences whose object is the model's most probable next word after the verb;
    predicted_by_group: the same for the subjects of each group in turn."""

    by_position: torch.Tensor
    by_group: list[float]
    predicted: float
    predicted_by_group: list[float]

    @property
    def verb_to_subject(self) -> float:
        """The verb's mean weight on its subject, over the sentences and heads."""
        return self.by_position[:, VERB, SUBJECT].mean().item()

    @property
    def learned(self) -> bool:
        return self.verb_to_subject >= LEARNED_WEIGHT and self.predicted >= LEARNED_PREDICTED


def held_out_attention(checkpoint: Checkpoint, run: Run, sentences, grammar: Grammar = Grammar()) -> HeldOut:
    """The layer at `checkpoint` measured over `sentences` (see HeldOut)."""
    ids = encode(run.vocabulary, sentences)
    model = model_at(checkpoint, run.vocabulary, run.config)
    with torch.no_grad():
        _, stages = model(ids)
        logits, _ = model(ids[:, :OBJECT])  # the object is never an input to its own prediction (nor in training)
    weights = stages["weights"]  # [sentences, heads, 4, 4]
    verb = weights[:, :, VERB, SUBJECT].mean(dim=1)  # [sentences]
    right = (logits[:, VERB].argmax(dim=-1) == ids[:, OBJECT]).float()  # [sentences]: 1 where the object is predicted
    group = torch.tensor([grammar.subjects.index(s[SUBJECT]) % GROUPS for s in sentences])

    def by_group(values: torch.Tensor) -> list[float]:
        return [values[group == g].mean().item() if (group == g).any() else float("nan") for g in range(GROUPS)]

    return HeldOut(weights.mean(dim=0), by_group(verb), right.mean().item(), by_group(right))


def sentence_words(tokens, vocabulary: tuple[str, ...]) -> tuple[str, ...]:
    """The training vocabulary's spelling of each token (case does not matter: "alice" is Alice). Raises
    ValueError naming the tokens it does not know, or when there are more tokens than learned positions."""
    spelling = {word.lower(): word for word in vocabulary}
    unknown = [t for t in tokens if t.lower() not in spelling]
    if unknown:
        raise ValueError(
            f"the training vocabulary has no {', '.join(map(repr, dict.fromkeys(unknown)))}: "
            f"the trained model knows only the {len(vocabulary)} words of its grammar"
        )
    if not 1 <= len(tokens) <= POSITIONS:
        raise ValueError(
            f"the sentence has {len(tokens)} tokens; the trained model has learned {POSITIONS} "
            f"positions (its sentences are subject, modal, verb, object)"
        )
    return tuple(spelling[t.lower()] for t in tokens)


def sentence_x(checkpoint: Checkpoint, vocabulary: tuple[str, ...], words) -> torch.Tensor:
    """X [n, d_model] of a sentence at a checkpoint: each word's trained embedding plus its position's."""
    rows = [checkpoint.embed[vocabulary.index(w)] for w in words]
    return torch.stack(rows) + checkpoint.position[: len(words)]


def checkpoint_trace(checkpoint: Checkpoint, run: Run, words):
    """Every stage of the layer at the checkpoint on a sentence: the AttentionTrace every view reads."""
    return compute_attention(
        sentence_x(checkpoint, run.vocabulary, words),
        run.config.attention(),
        weights=checkpoint.weights,
        tokens=list(words),
    )


@dataclasses.dataclass(frozen=True)
class Continued:
    """A prompt continued greedily by the trained model: every word, and after each word that predicts another
    (all but a sentence's last) the probabilities of the next word [vocabulary]."""

    words: tuple[str, ...]
    prompt: int  # how many of the words were the prompt
    next_word: tuple[torch.Tensor, ...]


def continue_greedily(checkpoint: Checkpoint, run: Run, prompt) -> Continued:
    """Decode the prompt one word at a time with a KV cache (attention_core/decoding.py), the layer as the
    checkpoint has it, and after the prompt append the most probable next word until the sentence has
    POSITIONS words. A step's next-word logits are the model's: (x_t + attention output_t)·unembed."""
    from attention_core.decoding import decode_step  # decoding imports the engine, as this module does

    words, config = list(prompt), run.config.attention()
    cache, next_word = {}, []
    for t in range(POSITIONS - 1):
        if t >= len(words):
            break
        x_t = sentence_x(checkpoint, run.vocabulary, words[: t + 1])[t : t + 1]  # [1, d]: word + position
        step, cache = decode_step(x_t, t, words[t], cache, checkpoint.weights, config)
        probabilities = torch.softmax((x_t[0] + step.output) @ checkpoint.unembed, dim=-1)  # [vocabulary]
        next_word.append(probabilities)
        if t == len(words) - 1:
            words.append(run.vocabulary[int(probabilities.argmax())])
    return Continued(tuple(words), len(prompt), tuple(next_word))


@dataclasses.dataclass(frozen=True)
class Lesson:
    """Lecture 002's training slide with one checkpoint's numbers: the model reads `prompt` and is scored on
    `answer`, the word that follows it. probabilities: P(next word | prompt) [vocabulary]; loss: L = −log
    P(answer | prompt); gradients: ∂L/∂W for W_Q, W_K, W_V; lr: η; after: L once more, after one step of the
    lecture's rule W ← W − η·∂L/∂W on W_Q, W_K and W_V, on this one sentence."""

    prompt: tuple[str, ...]
    answer: str
    probabilities: torch.Tensor
    loss: float
    gradients: dict[str, torch.Tensor]
    lr: float
    after: float
    probability_after: float

    @property
    def probability(self) -> float:
        return math.exp(-self.loss)


LESSON_WEIGHTS = ("w_q", "w_k", "w_v")  # what lecture 002's rule updates


def lesson(checkpoint: Checkpoint, run: Run, words, lr: float | None = None) -> Lesson:
    """The model at `checkpoint` predicting the last of `words` from the ones before it (two words at least),
    and one plain gradient step on that sentence with step size `lr` (default: the run's η at that step). The
    run itself trains with AdamW (learning_rate, train): this is the rule the lecture writes, applied once."""
    if len(words) < 2:
        raise ValueError("a next-word prediction needs two words at least: the prompt and the word to predict")
    prompt, answer = tuple(words[:-1]), words[-1]
    eta = learning_rate(run.config, checkpoint.step) if lr is None else lr
    model = model_at(checkpoint, run.vocabulary, run.config)
    ids = encode(run.vocabulary, [words])  # [1, n]
    target = ids[:, -1]

    def loss_now() -> tuple[torch.Tensor, torch.Tensor]:
        logits, _ = model(ids[:, :-1])  # the answer is never an input to its own prediction
        return torch.nn.functional.cross_entropy(logits[:, -1], target), torch.softmax(logits[0, -1], dim=-1)

    loss, probabilities = loss_now()
    loss.backward()
    gradients = {name: getattr(model, name).grad.detach().clone() for name in LESSON_WEIGHTS}
    with torch.no_grad():
        for name in LESSON_WEIGHTS:
            getattr(model, name).sub_(eta * gradients[name])  # W ← W − η·∂L/∂W
        after, probabilities_after = loss_now()
    return Lesson(
        prompt,
        answer,
        probabilities.detach(),
        loss.item(),
        gradients,
        eta,
        after.item(),
        probabilities_after[target[0]].item(),
    )
