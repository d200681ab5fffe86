"""A long text's needle and sentences (attention_core/models/needle.py, figures/long.py), no model: the needle's
heads against a float64 softmax written here, a planted retrieval head found at three depths, and every sentence's
numbers against the numbers it is said from, at the edges (one token, shares that round to 0 or 1, no head found)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from attention_core.long_maps import LongTrace, distance_bins, summaries
from attention_core.models.long import LongRead
from attention_core.models.needle import Placed, needle_shares, top_heads
from figures.long import grid_sentence, head_sentence, needle_sentence, percent
from tests.numerics import F32, gamma

pytestmark = pytest.mark.numeric


def _planted(n: int, needle: tuple[int, int], layer: int, head: int, layers: int = 3, heads: int = 4) -> LongTrace:
    """Random q and k (every head its own key/value head), and one head whose last row's query matches the needle's
    keys alone: a retrieval head planted where the needle is."""
    generator = torch.Generator().manual_seed(n + needle[0])
    d = 8
    q = [torch.randn(heads, n, d, generator=generator) * 0.5 for _ in range(layers)]
    k = [torch.randn(heads, n, d, generator=generator) * 0.5 for _ in range(layers)]
    q[layer][head, n - 1] = 0.0
    q[layer][head, n - 1, 0] = 30.0
    k[layer][head, :, 0] = 0.0
    k[layer][head, needle[0] : needle[1], 0] = 1.0
    return LongTrace(tuple(f"t{i}" for i in range(n)), tuple(q), tuple(k), d**-0.5, True, n)


def _reference_shares(trace: LongTrace, placed: Placed) -> np.ndarray:
    """Each head's weight at the answering row on the needle: a float64 softmax of the row's scores written here."""
    row, (first, stop) = placed.answer_row, placed.needle
    shares = np.empty((trace.n_layers, trace.heads))
    for layer in range(trace.n_layers):
        for head in range(trace.heads):
            q = trace.q[layer][head, row].double().numpy()
            k = trace.k[layer][trace.kv_head(head), : row + 1].double().numpy()
            scores = k @ q * trace.scale
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            shares[layer, head] = weights[first:stop].sum()
    return shares


@pytest.mark.parametrize("depth", [0.1, 0.5, 0.9])
def test_a_planted_retrieval_head_is_found_at_each_depth_and_the_shares_are_a_softmax_written_here(depth):
    n = 600
    first = round(depth * (n - 20))
    placed = Placed(list(range(n)), (first, first + 10), n - 1, depth)
    trace = _planted(n, placed.needle, layer=1, head=2)
    shares = needle_shares(trace, placed)
    reference = _reference_shares(trace, placed)
    # float32 weights against float64: a dot product of 8 terms, the scale and a softmax over n keys, summed over 10
    np.testing.assert_allclose(shares.numpy(), reference, rtol=0, atol=10 * gamma(n + 12, F32))
    assert top_heads(shares, 1)[0][:2] == (1, 2) and top_heads(shares, 1)[0][2] > 0.99
    others = shares.clone()
    others[1, 2] = 0
    assert float(others.max()) < 0.5  # every other head: random keys, no needle


def test_the_top_heads_are_the_largest_shares_most_first_counted_from_0():
    shares = torch.tensor([[0.1, 0.7], [0.9, 0.2], [0.3, 0.0]], dtype=torch.float64)
    assert top_heads(shares, 3) == [(1, 0, 0.9), (0, 1, 0.7), (2, 0, pytest.approx(0.3))]
    assert len(top_heads(shares, 99)) == 6


@pytest.mark.parametrize(
    ("share", "said"),
    [(0.0, "0 %"), (1e-5, "under 0.1 %"), (0.0004, "under 0.1 %"), (0.123, "12.3 %"), (0.9996, "over 99.9 %"),
     (1.0, "100 %")],
)  # fmt: skip
def test_a_share_never_says_0_or_100_of_what_is_not(share, said):
    assert percent(share) == said


@pytest.mark.parametrize("n", [1, 2, 40, 300])
def test_a_heads_sentence_says_its_summarys_numbers(n):
    generator = torch.Generator().manual_seed(n)
    q, k = torch.randn(2, n, 8, generator=generator), torch.randn(1, n, 8, generator=generator)
    k[0, 0] = 4 * q[0].mean(0)  # a sink-ish first key
    trace = LongTrace(tuple(f"w{i}" for i in range(n)), (q,), (k,), 8**-0.5, True, n)
    summary = summaries(trace, 0, 0)
    said = head_sentence(summary, trace.tokens)
    if n == 1:
        assert said == "One token: its row has one key, itself, with all the weight."
        return
    near = sum(s for (low, _), s in zip(distance_bins(n), summary.by_distance.tolist(), strict=True) if low < 16)
    assert f"puts {percent(summary.sink)} of its weight on the first token (“w0”)" in said
    assert f"and {percent(near)} within 15 tokens of itself" in said
    top = int(summary.received.argmax())
    assert f"rows: {top} “w{top}” ({float(summary.received[top]):,.1f} rows' worth)" in said
    assert f"{float(summary.entropy.mean()):.2f} nats on average" in said and f"{math.log(n):.2f})" in said
    if n <= 16:  # every key within 15 of every row: all of it is near
        assert "100 % within 15 tokens" in said or "over 99.9 % within 15 tokens" in said


def test_the_grid_sentence_counts_the_sinks_and_locals_and_names_the_farthest():
    sink = torch.zeros(4, 3, dtype=torch.float64)
    local = torch.zeros(4, 3, dtype=torch.float64)
    reach = torch.ones(4, 3, dtype=torch.float64)
    sink[1, 0] = sink[3, 2] = 0.8
    sink[2, 1] = 0.5  # not over half
    local[0, :] = 0.9
    reach[2, 1] = 1234.4
    said = grid_sentence({"sink": sink, "local": local, "reach": reach, "entropy": reach})
    assert said.startswith("Sinks: 2 of 12 heads put over half of a row's weight on the first token (in layers 2–4).")
    assert "Local: 3 of 12 put over half" in said
    assert "Reaching farthest: L3 H2, whose weight is 1,234 tokens back on average." in said
    none = grid_sentence({"sink": sink * 0, "local": local * 0, "reach": reach, "entropy": reach})
    assert "Sinks: 0 of 12 heads put over half of a row's weight on the first token." in none


def _read(answer: str, causal: bool = True) -> LongRead:
    tokens = ("<s>", "·The", "·word", "·is", "·tang", "erine", ".", "·Word", "?")
    placed = Placed(list(range(9)), (1, 7), 8, 0.125)
    return LongRead(tokens, 9, 2, 2, 1, causal, 0, 0.0, placed, answer)


def test_the_needle_sentence_says_where_the_needle_is_what_was_answered_and_which_heads_look():
    shares = torch.tensor([[0.1, 0.0004], [0.97, 0.5]], dtype=torch.float64)
    said = needle_sentence(_read(" tangerine."), shares, "M", "tangerine", base=1)
    assert said.startswith("The needle, “The word is tangerine.”, is tokens 2–7 of 9 (12 % of the way into the text).")
    assert "M answers “tangerine.”, which holds “tangerine”." in said
    assert "(token 9, “?”)" in said
    assert re.search(r"the needle: L2 H1 \(97\.0 %\), L2 H2 \(50\.0 %\), L1 H1 \(10\.0 %\)\.$", said)
    assert "does not hold “tangerine”" in needle_sentence(_read(" the word"), shares, "M", "tangerine")
    assert "writes no answer (an encoder)" in needle_sentence(_read("", causal=False), shares, "M", "tangerine")
