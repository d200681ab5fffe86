"""The training engine (issue 14): gradients, the loss it reaches, determinism, and what attention learns."""

import io
import statistics
import time

import numpy as np
import pytest
import torch

from attention_core import trace_sentence
from attention_core.config import MAX_TRAIN_STEPS
from attention_core.matrices import fit_typed, typed_from_npz
from attention_core.training import (
    GROUPS,
    HELD_OUT,
    OBJECT,
    SUBJECT,
    VERB,
    Grammar,
    TinyLM,
    Training,
    TrainingConfig,
    checkpoint_npz,
    checkpoint_trace,
    encode,
    held_out_attention,
    held_out_sentences,
    next_word_loss,
    saturated_share,
    sentence_words,
    train,
    verb_to_subject,
)
from figures.training import LAST_STEPS, sqrt_dk_notes

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
    loss, _ = next_word_loss(model, ids)
    loss.backward()
    eps = 1e-6
    for name in ("w_q", "w_k", "w_v", "w_o", "embed"):
        parameter = getattr(model, name)
        for index in [(0,) * parameter.dim(), tuple(s - 1 for s in parameter.shape)]:
            with torch.no_grad():
                original = parameter[index].item()
                parameter[index] = original + eps
                up = next_word_loss(model, ids)[0].item()
                parameter[index] = original - eps
                down = next_word_loss(model, ids)[0].item()
                parameter[index] = original
            assert parameter.grad[index].item() == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8), name


def test_the_loss_falls_to_near_the_lowest_possible_within_the_default_budget(trained):
    _, run = trained
    best = Grammar().best_loss()
    assert run.loss[0] > best + 1.0  # random weights: far from it
    assert run.loss[-1] < best + LOSS_ABOVE_BEST
    assert run.checkpoints[0].step == 0 and run.checkpoints[-1].step == TrainingConfig().steps
    assert [c.loss for c in run.checkpoints] == [run.loss[c.step] for c in run.checkpoints]
    assert len(run.loss) == len(run.saturated) == len(run.grad_w_q) == TrainingConfig().steps + 1


def test_the_same_seed_gives_the_same_run_bit_for_bit_on_the_cpu():
    config = TrainingConfig(steps=30)
    _, first = train(config)
    _, second = train(config)
    assert first.loss == second.loss and first.grad_w_q == second.grad_w_q
    for a, b in zip(first.checkpoints, second.checkpoints, strict=True):
        for name in a.weights:
            assert torch.equal(a.weights[name], b.weights[name])
    _, other = train(TrainingConfig(steps=30, seed=1))
    assert not torch.equal(other.checkpoints[-1].weights["w_q"], first.checkpoints[-1].weights["w_q"])


def test_held_out_pairs_are_never_trained_on_and_every_subject_has_one():
    grammar = Grammar()
    training = grammar.sentences(TrainingConfig().sentences, seed=0)
    assert not any(grammar.held_out(s[SUBJECT], s[VERB]) for s in training)
    held = held_out_sentences(grammar)
    assert len(held) == HELD_OUT and all(grammar.held_out(s[SUBJECT], s[VERB]) for s in held)
    for subject in grammar.subjects:
        assert sum(grammar.held_out(subject, verb) for verb, _ in grammar.objects) == 1


def test_trained_the_verb_looks_at_its_subject_on_sentences_it_never_saw(trained):
    model, run = trained
    grammar = Grammar()
    held_out = held_out_sentences(grammar)
    random_model = TinyLM(grammar.vocabulary, TrainingConfig())
    assert verb_to_subject(random_model, held_out) < 0.5
    assert verb_to_subject(model, held_out) > VERB_TO_SUBJECT_MIN
    # The page's numbers are the model's: by position and by group, from the checkpoint alone.
    last = run.checkpoints[-1]
    measured = held_out_attention(last, run, held_out)
    by_position, groups = measured.by_position, measured.by_group
    assert by_position[:, VERB, SUBJECT].mean().item() == pytest.approx(verb_to_subject(model, held_out), abs=1e-6)
    assert len(groups) == GROUPS and max(groups) > 0.9
    # And it predicts the object there, for subject-verb pairs it never saw together.
    with torch.no_grad():
        logits, _ = model(encode(grammar.vocabulary, held_out)[:, :OBJECT])
    predicted = [grammar.vocabulary[i] for i in logits[:, VERB].argmax(-1).tolist()]
    assert sum(p == s[OBJECT] for p, s in zip(predicted, held_out, strict=True)) / len(held_out) > 0.9


def test_a_checkpoint_is_what_compute_attention_takes_and_gives_the_models_own_weights(trained):
    model, run = trained
    last = run.checkpoints[-1]
    groups = held_out_attention(last, run, held_out_sentences()).by_group
    subject = Grammar().subjects[groups.index(max(groups))]  # as the page picks its sentence
    sentence = sentence_words([subject.lower(), "WILL", "eat", Grammar().object_of(subject, "eat")], model.vocabulary)
    trace = checkpoint_trace(last, run, sentence)
    with torch.no_grad():
        _, stages = model(encode(model.vocabulary, [sentence]))
    torch.testing.assert_close(trace.weights, stages["weights"][0], rtol=1e-5, atol=1e-6)
    row = trace.weights[0, VERB, : VERB + 1]  # "eat" sees the subject, "will", itself
    assert row.argmax() == SUBJECT and row[SUBJECT] > 0.9


def test_a_sentence_the_model_cannot_read_is_refused_by_name():
    vocabulary = Grammar().vocabulary
    with pytest.raises(ValueError, match="has no 'The', 'cat'"):
        sentence_words(["The", "cat", "will", "eat"], vocabulary)
    with pytest.raises(ValueError, match="5 tokens; the trained model has learned 4 positions"):
        sentence_words(["Alice", "will", "eat", "pizza", "pizza"], vocabulary)
    with pytest.raises(ValueError, match="d_k for training must be a whole number from 1 to 128; got 1000"):
        TrainingConfig(d_k=1000)
    with pytest.raises(ValueError, match="training steps for training must be a whole number"):
        TrainingConfig(steps=0)


def test_saturated_rows_do_not_count_a_row_that_sees_one_key():
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.995, 0.005, 0.0], [0.4, 0.3, 0.3]])
    assert saturated_share(weights, causal=True) == 0.5  # row 1 counts, row 0 (itself alone) does not
    assert saturated_share(weights, causal=False) == pytest.approx(2 / 3)


def test_a_background_run_is_the_same_run_and_stops_when_asked():
    config = TrainingConfig(steps=60)
    _, alone = train(config)
    background = Training(config).start().join(timeout=60)
    assert background.state == "done" and background.run.loss == alone.loss
    stopped = Training(TrainingConfig(steps=MAX_TRAIN_STEPS))
    stopped.start()
    while len(stopped.run.loss) < 5:
        time.sleep(0.01)
    stopped.stop()
    stopped.join(timeout=60)
    assert stopped.state == "stopped" and 5 <= len(stopped.run.loss) < MAX_TRAIN_STEPS
    assert stopped.run.checkpoints[-1].step == len(stopped.run.loss) - 1  # the last step reached is kept
    assert stopped.run.loss == train(TrainingConfig(steps=len(stopped.run.loss) - 1))[1].loss  # a prefix
    capped = Training(TrainingConfig(steps=MAX_TRAIN_STEPS), time_cap=0.2).start().join(timeout=60)
    assert capped.state == "time cap" and len(capped.run.loss) < MAX_TRAIN_STEPS


def test_the_weights_exported_load_as_typed_numbers_and_give_the_same_layer(trained):
    _, run = trained
    last = run.checkpoints[-1]
    words = ("Bob", "will", "drink", "coffee")
    texts, sizes = typed_from_npz(checkpoint_npz(last, run, words))
    assert sizes == {"d_model": 8, "d_k": 4, "d_v": 4, "heads": 1, "text": "Bob will drink coffee"}
    config = run.config.attention()
    typed, refused = fit_typed(texts, config, len(words))
    assert not refused
    walkthrough = trace_sentence(sizes["text"], config, x=typed.pop("x"), weights=typed)
    torch.testing.assert_close(walkthrough.weights, checkpoint_trace(last, run, words).weights, rtol=1e-4, atol=1e-5)


ONES, WIDE = np.ones((2, 2)), np.ones((20, 2))  # WIDE: d_model 20, more than a table can take


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not a zip", "not an .npz"),
        (_npz(w_q=ONES, w_k=ONES, w_v=ONES), "lacks W_O"),
        (_npz(w_q=ONES, w_k=np.ones((3, 2)), w_v=ONES, w_o=ONES), "W_K in the .npz is 1×3×2"),
        (_npz(w_q=np.full((2, 2), np.nan), w_k=ONES, w_v=ONES, w_o=ONES), "not finite"),
        (_npz(w_q=WIDE, w_k=WIDE, w_v=WIDE, w_o=np.ones((2, 20))), "widths up to 8"),
        (_npz(w_q=np.array(["a"]), w_k=ONES, w_v=ONES, w_o=ONES), "must be 3-dimensional numbers"),
    ],
)  # fmt: skip
def test_a_weights_file_that_cannot_be_used_is_refused_by_name(data, message):
    with pytest.raises(ValueError, match=message):
        typed_from_npz(data)


def test_the_sqrt_dk_notes_say_what_the_two_runs_measured():
    scaled = train(TrainingConfig(d_k=64, steps=200))[1]
    unscaled = train(TrainingConfig(d_k=64, steps=200, scaled=False))[1]
    notes = sqrt_dk_notes(scaled, unscaled, 64)
    tail = slice(-LAST_STEPS, None)
    for field, summary, form, note in (("loss", statistics.fmean, ".3f", 0), ("saturated", statistics.fmean, ".0%", 1)):
        shown = summary(getattr(scaled, field)[tail]), summary(getattr(unscaled, field)[tail])
        assert f"scaled {shown[0]:{form}}, not scaled {shown[1]:{form}}" in notes[note]
    medians = statistics.median(scaled.grad_w_q), statistics.median(unscaled.grad_w_q)
    assert f"scaled {medians[0]:.2g}, not scaled {medians[1]:.2g}" in notes[2]
    # What the runs showed on this machine (README): unscaled, the softmax saturates and W_Q gets no gradient.
    assert statistics.fmean(unscaled.saturated[tail]) > statistics.fmean(scaled.saturated[tail])
    assert statistics.median(unscaled.grad_w_q) < statistics.median(scaled.grad_w_q)


def test_without_the_causal_mask_words_copy_the_next_one_and_the_verb_still_finds_its_subject():
    """What the Training page says when its causal mask is off, measured."""
    _, run = train(TrainingConfig(causal=False))
    assert run.loss[-1] < 0.05  # copying the next word: almost no loss left
    by_position = held_out_attention(run.checkpoints[-1], run, held_out_sentences()).by_position[0]
    assert by_position[SUBJECT, SUBJECT + 1] > 0.9 and by_position[SUBJECT + 1, VERB] > 0.5  # each looks at the next
    assert by_position[VERB, SUBJECT] > 0.6  # the object is never an input: the verb still looks at its subject
