"""A long text's maps and summaries (attention_core/long_maps.py) on q and k made here, no model: the overview
against a pooling written here in numpy, a planted sink column and a planted needle that the maximum keeps and the
mean dilutes, and each summary against a float64 computation written here. The weights themselves are checked
against transformers' eager attention in test_long.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attention_core.long_maps import (
    LOCAL,
    LongTrace,
    cell_size,
    distance_bins,
    grid,
    head_numbers,
    overview,
    summaries,
)
from tests import numerics as nm
from tests.numerics import F32, F64, gamma

pytestmark = pytest.mark.numeric


def _trace(n: int, heads: int = 2, kv: int = 1, d: int = 8, causal: bool = True, seed: int = 0) -> LongTrace:
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(heads, n, d, generator=generator), torch.randn(kv, n, d, generator=generator)
    return LongTrace(tuple(f"t{i}" for i in range(n)), (q, q.flip(1)), (k, k.flip(1)), d**-0.5, causal, n)


def _weights(trace: LongTrace, layer: int, head: int) -> np.ndarray:
    return torch.cat([block for _, block in trace.blocks(layer, head, rows=37)]).double().numpy()


def _pooled(weights: np.ndarray, size: int, how) -> np.ndarray:
    """Every size × size block of the map (the last row and column of blocks shorter) reduced by `how`."""
    cells = -(-weights.shape[0] // size)
    return np.array([[how(weights[i * size : (i + 1) * size, j * size : (j + 1) * size]) for j in range(cells)]
                     for i in range(cells)])  # fmt: skip


def test_the_weights_read_in_blocks_are_one_softmax_of_the_causal_scores():
    trace = _trace(50)
    q, k = trace.q[0][1].double(), trace.k[0][0].double()
    scores = (q @ k.T) * trace.scale
    expected = torch.softmax(scores.masked_fill(torch.ones(50, 50, dtype=torch.bool).triu(1), -math.inf), -1)
    ours = torch.from_numpy(_weights(trace, 0, 1))
    # float32 against float64: q·k of 8 products, the scale, a softmax of 50 terms (first order, as numerics.py).
    assert float((ours - expected).abs().max()) < gamma(8 + 4 + 50, F32) * float(scores.abs().max() + 1)
    assert float(ours.triu(1).abs().max()) == 0.0  # no weight on a later key, exactly
    assert trace.kv_head(1) == 0


def _truth(trace: LongTrace, layer: int, head: int) -> nm.Bound:
    """The head's weights in float64 from the same q and k, and how far a float32 computation may be from them."""
    n = trace.n_tokens
    q = nm.exact(trace.q[layer][head : head + 1])
    k = nm.exact(trace.k[layer][trace.kv_head(head) : trace.kv_head(head) + 1])
    mask = torch.ones(n, n, dtype=torch.bool).tril() if trace.causal else None
    return nm.attention(q, k, k, factor=trace.scale, mask=mask, u=F32)["weights"][0]


@pytest.mark.parametrize(("n", "cells"), [(1, 256), (50, 256), (1000, 256), (1001, 100)])
def test_the_overview_is_the_map_pooled_block_by_block(n, cells):
    """Against the float64 map pooled here: a cell's maximum of float32 weights is within the largest bound of the
    weights it covers, and its mean within their mean bound and a float32 mean's own rounding."""
    trace = _trace(n)
    truth, size = _truth(trace, 0, 0), cell_size(n, cells)
    assert size == max(1, math.ceil(n / cells)) and math.ceil(n / size) <= cells
    value, error = truth.value.numpy(), truth.error.numpy()
    ours_max = overview(trace, 0, 0, pool="max", cells=cells).double().numpy()
    assert (np.abs(ours_max - _pooled(value, size, np.max)) <= _pooled(error, size, np.max)).all()
    ours_mean = overview(trace, 0, 0, pool="mean", cells=cells).double().numpy()
    allowed = _pooled(error, size, np.mean) + gamma(size * size + 1, F32) * _pooled(value, size, np.max)
    assert (np.abs(ours_mean - _pooled(value, size, np.mean)) <= allowed).all()
    planted = overview(trace, 0, 0, pool="max", cells=cells).double().numpy() * 1.001  # the check's planted fault
    assert not (np.abs(planted - _pooled(value, size, np.max)) <= _pooled(error, size, np.max)).all()


def test_a_sink_column_and_a_needle_stay_in_the_maximum_and_fade_in_the_mean():
    """Queries made to find key 0 (every row) and, from the last row alone, key 700: the maximum shows both at
    their own strength, the mean of a 4 × 4 cell shows the needle at about 1/16 of it."""
    n, d = 1024, 16
    q, k = torch.zeros(1, n, d), torch.zeros(1, n, d)
    k[0, 0, 0], q[0, :, 0] = 1.0, 40.0  # every query's score on key 0 is 10 (at scale 1/4): a sink
    k[0, 700, 1], q[0, n - 1, 1] = 1.0, 60.0  # the last query's score on key 700 is 15: a needle
    trace = LongTrace(("t",) * n, (q,), (k,), d**-0.5, True, n)
    weights = trace.rows(0, 0, n - 1, n)[0]
    assert weights[700] > 0.99 and weights[0] < 0.01  # the planted needle takes the last row
    size = cell_size(n)
    assert size == 4
    high, mean = overview(trace, 0, 0, "max"), overview(trace, 0, 0, "mean")
    needle = (n - 1) // size, 700 // size
    assert float(high[needle]) == pytest.approx(float(weights[700]), abs=1e-7)
    block = trace.rows(0, 0, n - size, n)[:, 700 : 700 + size]  # the needle's cell: one hot weight of 16
    assert float(mean[needle]) == pytest.approx(float(block.double().mean()), rel=gamma(size * size + 1, F32))
    assert float(mean[needle]) < float(high[needle]) / 15  # the mean of the block hides it
    rows_seeing_sink = trace.rows(0, 0, 0, n)[:, 0]
    column = high[:, 0].numpy()
    expected = [float(rows_seeing_sink[i * size : (i + 1) * size].max()) for i in range(n // size)]
    np.testing.assert_allclose(column, expected, rtol=0, atol=0)
    assert column[10:].min() > 0.9  # the sink column, whole in the maximum


@pytest.mark.parametrize(("n", "causal"), [(1, True), (2, True), (300, True), (300, False)])
def test_each_summary_is_a_float64_computation_written_here(n, causal):
    """Against the float64 weights from the same q and k: each summary within what the float32 weights' bounds
    (tests/numerics.py) carry into it, and its own float64 sums (γ_n of n terms each below 1)."""
    trace = _trace(n, causal=causal)
    truth = _truth(trace, 1, 1)
    value, error = truth.value.numpy(), truth.error.numpy()
    got = summaries(trace, 1, 1)
    sums = gamma(n + 1, F64) * n
    assert abs(got.sink - value[:, 0].mean()) <= error[:, 0].mean() + sums
    assert (np.abs(got.received.numpy() - value.sum(0)) <= error.sum(0) + sums).all()
    # −w·log w moves by at most |1 + log w|·e for a weight off by e (w at its smallest, w − e, where log is
    # steepest), and is computed in float32 (the log, the product: γ₃ of the term).
    smallest = np.maximum(value - error, 1e-300)
    logs = np.log(np.where(value > 0, value, 1.0))
    moved = ((1 + np.abs(np.log(smallest))) * error).sum(1) + gamma(3, F32) * np.abs(value * logs).sum(1)
    assert (np.abs(got.entropy.numpy() + (value * logs).sum(1)) <= moved + sums).all()
    i, j = np.indices(value.shape)
    for (low, high), mass in zip(distance_bins(n), got.by_distance.numpy(), strict=True):
        band = (abs(i - j) >= low) & (abs(i - j) <= high)
        assert abs(mass - value[band].sum() / n) <= error[band].sum() / n + sums, (low, high)
    assert abs(float(got.by_distance.sum()) - 1.0) <= error.sum() / n + sums  # every row sums to 1
    if n == 1:  # one token: all of it on itself, the first token, at distance 0; no choice, no entropy
        assert got.sink == 1.0 and list(got.by_distance) == [1.0] and float(got.entropy[0]) == 0.0
    wrong = summaries(_trace(n, causal=not causal), 1, 1)  # the planted fault: the other mask
    assert n < 3 or abs(wrong.sink - value[:, 0].mean()) > error[:, 0].mean() + sums


def test_the_distance_bins_cover_every_distance_once():
    for n in (1, 2, 3, 5, 4096):
        bins = distance_bins(n)
        covered = [d for low, high in bins for d in range(low, high + 1)]
        assert covered == list(range(n)), n
    assert distance_bins(9) == [(0, 0), (1, 1), (2, 3), (4, 7), (8, 8)]


@pytest.mark.parametrize(("n", "causal"), [(1, True), (5, True), (300, True), (300, False)])
def test_a_heads_four_numbers_are_float64_computations_written_here(n, causal):
    trace = _trace(n, causal=causal)
    truth = _truth(trace, 0, 1)
    value, error = truth.value.numpy(), truth.error.numpy()
    got = head_numbers(trace, 0, 1)
    i, j = np.indices(value.shape)
    distance = np.abs(i - j)
    sums = gamma(n + 1, F64) * n * max(n, 1)  # float64 sums of n terms, each at most n
    assert abs(got.sink - value[:, 0].mean()) <= error[:, 0].mean() + sums
    near = distance < LOCAL
    assert abs(got.local - value[near].sum() / n) <= error[near].sum() / n + sums
    # Σ_j w_j·j is a float32 matrix-vector product (γ_n of Σ w_j·j ≤ n), then the distances in float64.
    assert abs(got.reach - (value * distance).sum() / n) <= (error * distance).sum() / n + gamma(n, F32) * n + sums
    smallest = np.maximum(value - error, 1e-300)
    logs = np.log(np.where(value > 0, value, 1.0))
    moved = ((1 + np.abs(np.log(smallest))) * error).sum() + gamma(3, F32) * np.abs(value * logs).sum()
    assert abs(got.entropy + (value * logs).sum() / n) <= moved / n + sums
    if n <= LOCAL:  # every key is local
        assert got.local == pytest.approx(1.0, abs=error.sum() / n + sums)


def test_the_grid_reads_every_head_and_says_how_far_it_is():
    trace = _trace(40, heads=4, kv=2)
    heard = []
    maps = grid(trace, progress=heard.append)
    assert set(maps) == {"sink", "local", "reach", "entropy"} and heard == [0.5, 1.0]
    assert all(values.shape == (2, 4) for values in maps.values())
    assert float(maps["reach"][1, 3]) == head_numbers(trace, 1, 3).reach
    assert float(maps["sink"][1, 3]) == pytest.approx(summaries(trace, 1, 3).sink, abs=gamma(40, F64) * 40)
    # Heads measured three at once, in threads: the same numbers, bit for bit, and the progress still in order
    heard_at_once = []
    at_once = grid(trace, progress=heard_at_once.append, workers=3)
    assert heard_at_once == [0.5, 1.0]
    for name, values in maps.items():
        torch.testing.assert_close(at_once[name], values, rtol=0, atol=0)


@pytest.mark.parametrize("log", [False, True])
def test_the_overview_figure_holds_the_cells_says_its_pooling_and_weighs_under_a_megabyte(log):
    """4,096 tokens: 256 × 256 cells of 16 × 16 tokens, the figure's map is the cells (log₁₀ of them on the log
    scale), the cells the causal mask hides drawn grey, its title says the pooling and the block's size, its axes
    each cell's tokens, and the JSON the browser receives is at most 1 MB (the issue's goal)."""
    import json

    from figures.long import LOG_FLOOR, overview_figure
    from tests.plotly_spec import panels

    n = 4096
    trace = _trace(n, heads=1, d=4, seed=2)
    cells = overview(trace, 0, 0, pool="max")
    figure = overview_figure(cells, n, "max", "layer 1 · head 1", log=log)
    sent = figure.to_json()
    (panel,) = panels(json.loads(sent))
    expected = cells.double().numpy()
    if log:
        expected = np.log10(np.maximum(expected, LOG_FLOOR))
    hidden = ~np.tri(256, dtype=bool)  # a cell whose every key comes after every query: the mask's, drawn grey
    expected[hidden] = np.nan
    np.testing.assert_allclose(panel.z, expected, rtol=gamma(1, F32), atol=0)  # float32 as the browser gets it
    assert panel.masked is not None and bool(np.isfinite(panel.masked[hidden]).all())
    assert "the max of each 16×16 block of weights" in panel.name and panel.name.startswith(
        "log₁₀ weights" if log else "weights"
    )
    assert panel.subtitle.endswith("layer 1 · head 1")  # which head, under the title (the shape may come first)
    ticks = panel.x_ticks or panel.axis("x").get("ticktext", [])
    assert all(re.fullmatch(r"\d+–\d+", tick) for tick in ticks), ticks[:3]
    assert len(sent.encode()) <= 2**20, len(sent)


def test_a_short_texts_overview_has_one_token_a_cell_and_a_wrong_shape_is_refused():
    from figures.long import cell_labels, overview_figure

    trace = _trace(30)
    figure = overview_figure(overview(trace, 0, 0), 30, "max", "layer 1 · head 1")
    assert "one weight a cell" in figure.to_json()
    assert cell_labels(30, 1, 1)[:3] == ["1", "2", "3"] and cell_labels(33, 16) == ["0–15", "16–31", "32"]
    with pytest.raises(ValueError, match="an overview of 30 tokens has 30 cells a side; got \\[29, 29\\]"):
        overview_figure(torch.zeros(29, 29), 30, "max", "")
