"""The training engine (issue 14): gradients, the loss it reaches, determinism, and what attention learns."""

import pytest
import torch

from attention_core import compute_attention
from attention_core.training import (
    GROUPS,
    OBJECT,
    SUBJECT,
    VERB,
    Grammar,
    TinyLM,
    TrainingConfig,
    encode,
    next_word_loss,
    train,
    verb_to_subject,
)

LOSS_ABOVE_BEST = 0.1  # nats: how close to the lowest possible loss the default budget gets
VERB_TO_SUBJECT_MIN = 0.6  # the verb sees 3 words (causal): chance is 1/3


@pytest.fixture(scope="module")
def trained():
    return train(TrainingConfig())


def test_the_grammar_makes_the_object_depend_on_the_verb_and_the_subject():
    grammar = Grammar()
    sentences = grammar.sentences(300, seed=1)
    assert sentences == grammar.sentences(300, seed=1) and sentences != grammar.sentences(300, seed=2)
    for subject, _modal, verb, obj in sentences:
        assert obj == dict(grammar.objects)[verb][grammar.subjects.index(subject) % GROUPS]
    # The same verb takes different objects after subjects of different groups: the verb alone cannot tell.
    assert grammar.object_of(grammar.subjects[0], "eat") != grammar.object_of(grammar.subjects[1], "eat")
    assert len(grammar.vocabulary) == len(set(grammar.vocabulary))


def test_gradients_match_finite_differences_on_a_tiny_model():
    config = TrainingConfig(d_model=4, d_k=3, n_heads=2, seed=3)
    grammar = Grammar()
    model = TinyLM(grammar.vocabulary, config).double()
    ids = encode(grammar.vocabulary, grammar.sentences(6, seed=0))
    loss = next_word_loss(model, ids)
    loss.backward()
    eps = 1e-6
    for name in ("w_q", "w_k", "w_v", "w_o", "embed"):
        parameter = getattr(model, name)
        for index in [(0,) * parameter.dim(), tuple(s - 1 for s in parameter.shape)]:
            with torch.no_grad():
                original = parameter[index].item()
                parameter[index] = original + eps
                up = next_word_loss(model, ids).item()
                parameter[index] = original - eps
                down = next_word_loss(model, ids).item()
                parameter[index] = original
            assert parameter.grad[index].item() == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8), name


def test_the_loss_falls_to_near_the_lowest_possible_within_the_default_budget(trained):
    _, checkpoints, losses = trained
    best = Grammar().best_loss()
    assert losses[0] > best + 1.0  # random weights: far from it
    assert losses[-1] < best + LOSS_ABOVE_BEST
    assert checkpoints[0].step == 0 and checkpoints[-1].step == TrainingConfig().steps
    assert [c.loss for c in checkpoints] == [losses[c.step] for c in checkpoints]


def test_the_same_seed_gives_the_same_run_bit_for_bit_on_the_cpu():
    config = TrainingConfig(steps=30)
    _, first, losses_1 = train(config)
    _, second, losses_2 = train(config)
    assert losses_1 == losses_2
    for a, b in zip(first, second, strict=True):
        for name in a.weights:
            assert torch.equal(a.weights[name], b.weights[name])
    _, other, _ = train(TrainingConfig(steps=30, seed=1))
    assert not torch.equal(other[-1].weights["w_q"], first[-1].weights["w_q"])


def test_trained_the_verb_looks_at_its_subject_on_sentences_it_never_saw(trained):
    model, _, _ = trained
    grammar = Grammar()
    seen = set(grammar.sentences(TrainingConfig().sentences, seed=TrainingConfig().seed))
    held_out = [s for s in grammar.sentences(400, seed=12345) if s not in seen][:100]
    assert len(held_out) >= 50
    random_model = TinyLM(grammar.vocabulary, TrainingConfig())
    assert verb_to_subject(random_model, held_out) < 0.5
    assert verb_to_subject(model, held_out) > VERB_TO_SUBJECT_MIN
    # And it predicts the object there: the verb's position puts most probability on the right word.
    with torch.no_grad():
        logits, _ = model(encode(grammar.vocabulary, held_out)[:, :OBJECT])
    predicted = [grammar.vocabulary[i] for i in logits[:, VERB].argmax(-1).tolist()]
    assert sum(p == s[OBJECT] for p, s in zip(predicted, held_out, strict=True)) / len(held_out) > 0.9


def test_a_checkpoint_is_what_compute_attention_takes_and_gives_the_models_own_weights(trained):
    model, checkpoints, _ = trained
    last = checkpoints[-1]
    sentence = ("Alice", "will", "eat", "pizza")
    ids = encode(model.vocabulary, [sentence])
    x = last.embed[ids[0]] + last.position[: len(sentence)]
    trace = compute_attention(x, model.config.attention(), weights=last.weights, tokens=list(sentence))
    with torch.no_grad():
        _, stages = model(ids)
    torch.testing.assert_close(trace.weights, stages["weights"][0], rtol=1e-5, atol=1e-6)
    row = trace.weights[0, VERB, : VERB + 1]  # "eat" sees Alice, will, eat
    assert row.argmax() == SUBJECT and row[SUBJECT] > 1 / 3  # eat looks at Alice most, above chance
