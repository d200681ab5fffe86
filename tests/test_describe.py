"""Every chart in words (figures/describe.py): the name and summary a screen reader gets are computed from the
numbers the chart draws, and say nothing false at the edges (one token, a row with one key, every cell masked,
values that round to 0.00, a constant map)."""

import re

import numpy as np
import pytest

from attention_core import AttentionConfig, trace_sentence
from attention_core.decoding import decode_sentence
from figures.decoding import cache_and_rows_figure, step_figure
from figures.describe import describe, is_weights, map_summary, number, weight
from figures.stages import stage_view
from figures.style import Style
from tests.test_figures import _every_figure


def test_every_figure_the_app_builds_has_a_name_and_a_summary():
    decoding = decode_sentence("the cat saw the dog", AttentionConfig(heads=2, causal=True))
    figures = [*_every_figure(), ("decode step", step_figure(decoding, 2, 1)),
               ("decode cache", cache_and_rows_figure(decoding, 2, 1))]  # fmt: skip
    for where, figure in figures:
        name, summary = describe(figure)
        assert name and summary.endswith("."), where
        # No Plotly markup (<b>, <br>) and no escaped character ("&lt;"): a token "<" is named as it is.
        assert not re.search(r"</?[a-z]+>|&[a-z]+;", name + summary), (where, name, summary)
        assert "nan" not in summary.lower(), (where, name, summary)


def test_a_weights_map_names_its_most_focused_row_and_what_it_looks_at():
    trace = trace_sentence("Alice will eat pizza", AttentionConfig(seed=3))
    name, summary = describe(stage_view(trace, "weights", 0, Style()).figures[0])
    weights = trace.weights[0].numpy()
    row = int(weights.max(axis=1).argmax())
    col = int(weights[row].argmax())
    assert name == "attention weights = softmax(rows)"
    assert (f"4 × 4 weights, each row sums to 1; the most focused row, '{trace.tokens[row]}', puts "
            f"{weight(weights[row, col])} on '{trace.tokens[col]}'") in summary  # fmt: skip
    assert 0.995 <= weights[row, col] < 1 and weight(weights[row, col]) == ">\u00a00.99"  # not a false "1.00"


def test_a_causal_first_row_whose_one_key_takes_all_is_not_called_the_most_focused():
    """Its weight is 1 whatever the numbers: the sentence speaks of rows that could choose."""
    trace = trace_sentence("the cat saw the dog", AttentionConfig(causal=True, seed=1))
    z = trace.weights[0].numpy().copy()
    z[np.triu_indices(5, 1)] = np.nan
    summary = map_summary(z, list(trace.tokens), list(trace.tokens))
    assert "10 cells masked" in summary and "the most focused row, 'the'," not in summary.split(";")[1][:40]
    one_token = map_summary(np.array([[1.0]]), ["cat"], ["cat"])
    assert one_token == "1 × 1 weights, each row sums to 1; the most focused row, 'cat', puts 1.00 on 'cat'"


def test_numbers_are_written_as_the_cells_write_them_never_a_false_zero():
    assert number(0.7049) == "0.70" and number(0.0012) == "0.0012" and number(-0.0) == "0.00"
    assert number(0.0) == "0.00" and number(-0.004) == "-0.004" and number(1966080) == "1,966,080"
    summary = map_summary(np.array([[0.0012, -0.003], [0.5, 0.2]]), ["a", "b"], ["c", "d"])
    assert "smallest -0.003 at row 'a', column 'd'" in summary and "largest 0.50 at row 'b', column 'c'" in summary


def test_constant_and_fully_masked_maps_and_what_counts_as_weights():
    assert map_summary(np.ones((2, 3)), ["a", "b"], ["c", "d", "e"]) == "2 × 3; every value 1.00"
    assert map_summary(np.full((2, 2), np.nan), ["a", "b"], ["a", "b"]) == "2 × 2, every cell masked"
    assert is_weights(np.array([[0.25, 0.75], [1.0, np.nan]]))
    assert not is_weights(np.array([[0.5, 0.4], [1.0, 0.0]]))  # a row that does not sum to 1
    assert not is_weights(np.array([[1.5, -0.5]]))  # sums to 1, but not weights


@pytest.mark.parametrize("text", ["cat", "<b>a</b> b"])
def test_tokens_are_named_as_written_and_markup_is_dropped(text):
    trace = trace_sentence(text, AttentionConfig())
    name, summary = describe(stage_view(trace, "weights", 0, Style()).figures[0])
    weights = trace.weights[0]
    row = int(weights.max(dim=1).values.argmax())  # the most focused row, and where it looks
    column = int(weights[row].argmax())
    said = f"the most focused row, '{trace.tokens[row]}', puts "
    assert said in summary and summary.endswith(f" on '{trace.tokens[column]}'.") and "<b>" not in summary


def test_a_token_escaped_for_plotly_is_named_as_the_reader_typed_it():
    """figures.style.escape writes "<" as "&lt;" for Plotly; the words give "<" back, never the entity."""
    trace = trace_sentence("x < y & z", AttentionConfig())
    summary = map_summary(trace.weights[0].numpy(), list(trace.tokens), list(trace.tokens))
    _, described = describe(stage_view(trace, "weights", 0, Style()).figures[0])
    assert summary in described and "&lt;" not in described and "&amp;" not in described


def test_the_multi_head_grid_names_each_map_as_its_title_says():
    """The keyboard walk (chart.js) and the summary call a head's map as the grid titles it, "head 2"."""
    from figures.multihead import multihead_grid

    trace = trace_sentence("Alice will eat pizza", AttentionConfig(heads=3))
    name, summary = describe(multihead_grid(trace))
    assert name == "weights of all 3 heads"
    assert summary.startswith("head 1: 4 × 4 weights") and "head 3: " in summary
