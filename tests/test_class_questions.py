"""The questions a lecturer asks the class (issue 42, classroom/questions.py): each answer is the one the numbers on
screen give, at the edges too, and a question the view cannot answer is refused by name."""

import types

import numpy as np
import pytest
import torch

from attention_core import AttentionConfig, trace_sentence
from classroom.classes import MAX_OPTIONS, Refused
from classroom.questions import KINDS, SIZES, most_weighed, previous_token_head, size_of_weight


def weights_of(tokens, rows):
    """A view whose weights are `rows` ([heads][n][n]): all a question reads."""
    return types.SimpleNamespace(tokens=tuple(tokens), weights=torch.tensor(rows, dtype=torch.float32))


def test_every_kind_answers_from_the_numbers_the_pages_compute():
    trace = trace_sentence("The animal didn't cross the street because it was tired", AttentionConfig(heads=4))
    weights = trace.weights.numpy().astype(np.float64)
    text, options, answer = most_weighed(trace)
    assert answer == trace.tokens[int(np.argmax(weights[0, -1]))] and answer in options and "'tired'" in text
    assert options == list(dict.fromkeys(trace.tokens))  # each token once ("the" twice in the sentence)
    back = [np.mean([weights[h, i, i - 1] for i in range(1, weights.shape[1])]) for h in range(4)]
    assert previous_token_head(trace)[2] == f"head {int(np.argmax(back)) + 1}"
    assert size_of_weight(trace)[2] in SIZES
    assert len({kind.key for kind in KINDS}) == len(KINDS)


@pytest.mark.parametrize(
    "weight, size",
    [(0.0, SIZES[0]), (0.2949, SIZES[0]), (0.2951, SIZES[1]), (0.3, SIZES[1]), (0.7049, SIZES[1]), (0.7051, SIZES[2])],
)
def test_a_weights_size_is_that_of_the_weight_as_printed_with_two_decimals(weight, size):
    """0.2951 is printed 0.30: the class that saw 0.30 and chose "0.3 to 0.7" is right."""
    view = weights_of(["Alice", "eats"], [[[1.0, 0.0], [weight, 1 - weight]]])
    assert size_of_weight(view) == ("In head 1, how much weight does 'eats' put on 'Alice'?", list(SIZES), size)


def test_the_most_weighed_key_is_kept_among_the_options_when_the_sentence_has_more_tokens_than_options():
    tokens = [f"w{i}" for i in range(MAX_OPTIONS + 3)]
    row = [0.0] * len(tokens)
    row[-2] = 1.0  # the last but one: beyond the first MAX_OPTIONS
    view = weights_of(tokens, [[row] * len(tokens)])
    _, options, answer = most_weighed(view)
    assert answer == tokens[-2] and options[-1] == answer and len(options) == MAX_OPTIONS


def test_the_previous_token_head_is_the_one_built_to_look_back():
    look_back = [[1, 0, 0], [1, 0, 0], [0, 1, 0]]
    look_first = [[1, 0, 0], [1, 0, 0], [1, 0, 0]]
    assert previous_token_head(weights_of("abc", [look_first, look_back]))[2] == "head 2"
    assert previous_token_head(weights_of("abc", [look_back, look_first]))[2] == "head 1"


@pytest.mark.parametrize(
    "build, view, refusal",
    [
        (most_weighed, weights_of(["solo"], [[[1.0]]]), "two different tokens"),
        (size_of_weight, weights_of(["it", "it"], [[[1, 0], [0.5, 0.5]]]), "two different tokens"),
        (previous_token_head, weights_of("ab", [[[1, 0], [1, 0]]]), "2 to 12 heads and two tokens; this view has 1"),
        (previous_token_head, weights_of("a", [[[1.0]], [[1.0]]]), "this view has 2 head(s) and 1 token(s)"),
        (previous_token_head, weights_of("ab", [[[1, 0], [0.5, 0.5]]] * 2), "two heads weigh the previous token alike"),
    ],
)
def test_a_question_the_view_cannot_answer_is_refused_by_name(build, view, refusal):
    with pytest.raises(Refused, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        build(view)
