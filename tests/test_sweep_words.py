"""Every sentence the masks' section says (figures/sweep.py) against the points it is given, at the edges: the
sinks helping at every window, at some, or none; one window only; a budget only some masks have."""

import dataclasses

import numpy as np
import pytest

from figures.sweep import (
    heads_losing_most,
    lost_figure,
    mask_name,
    rows_lost_figure,
    sparse_sentence,
    streaming_sentence,
    sweep_figure,
)
from tests.plotly_spec import decode


@dataclasses.dataclass(frozen=True)
class Point:
    mask: str
    budget: int
    loss: float
    lost: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((2, 3)))
    lost_rows: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(4))

    @property
    def keys_kept(self) -> int:
        return self.budget + 4 if self.mask == "sinks" else self.budget


def points(window: dict, sinks: dict, top_k: dict | None = None, dsa: dict | None = None) -> list[Point]:
    made = [Point("causal", 0, 2.0)]
    for mask, losses in (("window", window), ("sinks", sinks), ("top_k", top_k or {}), ("dsa", dsa or {})):
        made += [Point(mask, budget, loss) for budget, loss in losses.items()]
    return made


def test_the_sinks_helping_at_every_window_is_streamingllms_finding():
    said = streaming_sentence(points({8: 4.5, 16: 3.0}, {8: 2.75, 16: 2.5}))
    assert said == (
        "A window of 8 keys alone raises the loss by 2.50 nats; with the first 4 tokens kept too, by 0.75. With "
        "the sinks the loss is lower at 2 of 2 windows: as StreamingLLM found, the first 4 tokens are worth keeping."
    )
    short = streaming_sentence(points({8: 4.5, 16: 3.0}, {8: 2.75, 16: 2.5}), short=True)
    assert short == (
        "**Window of 8 alone: +2.50 nats; with 4 sinks: +0.75.** Sinks help at 2 of 2 windows, as StreamingLLM found."
    )


@pytest.mark.parametrize(("sinks", "better"), [({8: 2.75, 16: 3.5}, 1), ({8: 4.5, 16: 3.5}, 0)])
def test_sinks_that_do_not_help_everywhere_are_said_not_to(sinks, better):
    said = streaming_sentence(points({8: 4.5, 16: 3.0}, sinks))
    assert f"lower at {better} of 2 windows: unlike StreamingLLM's models" in said
    assert "StreamingLLM found" not in streaming_sentence(points({8: 4.5, 16: 3.0}, sinks), short=True)


def test_no_window_or_no_shared_budget_says_nothing_rather_than_something_false():
    assert streaming_sentence(points({}, {8: 2.5})) == ""
    assert sparse_sentence(points({8: 3.0}, {}, {8: 2.5}, {16: 2.2})) == ""


def test_top_k_and_dsa_are_compared_at_their_smallest_shared_budget():
    said = sparse_sentence(points({8: 4.0, 16: 3.0}, {}, {8: 2.5, 16: 2.25}, {16: 2.5}))
    assert said.startswith("At 16 keys a row: the last 16 (a window) +1.00, the 16 each head scores highest +0.25, "
                           "DSA's one choice for all of a layer's heads +0.50 nats.")  # fmt: skip
    assert "oracle" in said and "oracle" in sparse_sentence(points({}, {}, {16: 2.25}, {16: 2.5}), short=True)


def test_the_heads_losing_most_are_named_in_order_ties_by_position():
    lost = np.array([[0.1, 0.9, 0.2], [0.9, 0.0, 0.5]])
    point = Point("window", 8, 3.0, lost)
    assert heads_losing_most(point) == "layer 1 head 2 (0.90), layer 2 head 1 (0.90), layer 2 head 3 (0.50)"
    assert mask_name(point) == "sliding window w = 8" and mask_name(Point("top_k", 4, 2.0)) == "top-k per head k = 4"
    assert mask_name(Point("causal", 0, 2.0)) == "full causal"


def test_the_chart_draws_each_mask_at_its_keys_and_its_rise():
    made = points({8: 4.0, 16: 3.0}, {8: 2.5}, {8: 2.25}, {8: 2.125})
    chart = sweep_figure(made)
    assert chart.plotly  # Plotly validates every property
    lines = {trace["name"]: (list(trace["x"]), list(trace["y"])) for trace in chart.traces}
    assert lines["sliding window w"] == ([8, 16], [2.0, 1.0])
    assert lines["4 sinks + window w"] == ([12], [0.5])  # drawn at the keys it keeps: 4 + w
    assert lines["DSA top-k (oracle indexer)"] == ([8], [0.125])
    grid = lost_figure(Point("sinks", 8, 2.5, np.array([[0.25, 0.0, 1.0], [0.5, 0.5, 0.5]])))
    assert grid.plotly
    shown = [decode(trace["z"]) for trace in grid.traces if trace.get("type") == "heatmap"]
    assert any(np.allclose(z, [[0.25, 0.0, 1.0], [0.5, 0.5, 0.5]]) for z in shown)


def test_the_weight_each_row_loses_is_drawn_by_its_position_from_1():
    point = Point("window", 2, 3.0, lost_rows=np.array([0.0, 0.0, 0.25, 0.5]))
    chart = rows_lost_figure(point)
    assert chart.plotly
    (line,) = chart.traces
    assert (list(line["x"]), list(line["y"])) == ([1, 2, 3, 4], [0.0, 0.0, 0.25, 0.5])
    assert line["name"] == "sliding window w = 2"
