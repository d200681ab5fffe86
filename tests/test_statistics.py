"""The per-head statistics (attention_core/statistics.py) and the readings across layers, by norm and by word
(attention_core/reading.py) on synthetic matrices whose answer is known, and against TransformerLens' own
detection patterns where it has them."""

import math

import pytest
import torch

from attention_core import AttentionConfig, trace_sentence
from attention_core.reading import (
    merge_words,
    merged_tokens,
    rollout,
    value_norms,
    weighted_norms,
    weighted_vectors,
    word_groups,
)
from attention_core.statistics import (
    PEAKINESS,
    ROLES,
    STATISTICS,
    Sequence,
    copies_before,
    induction_targets,
    per_layer_and_head,
    top_heads,
    without_first,
)
from tests import numerics as nm

pytestmark = pytest.mark.numeric


def _causal(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


def _probe(half: int = 6, seed: int = 0) -> tuple[str, ...]:
    """A random sequence of distinct tokens, repeated twice (the induction probe's shape)."""
    order = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:half].tolist()
    return tuple(f"t{i}" for i in order) * 2


def _rows(n, keys):
    """[1, n, n]: row i all on key keys[i]."""
    weights = torch.zeros(1, n, n, dtype=torch.float64)
    weights[0, torch.arange(n), torch.tensor(keys)] = 1.0
    return weights


def test_every_statistic_is_one_record_with_its_words_and_range():
    assert set(STATISTICS) == {s.key for s in (*PEAKINESS, *ROLES)}
    for statistic in STATISTICS.values():
        assert statistic.name and statistic.definition.endswith(".") and statistic.family in ("peakiness", "role")
        assert statistic.range_text() in ("0 to 1", "1 to the number of keys")


def test_exact_patterns_score_1_for_their_role_and_0_for_the_others():
    n = 6
    seq = Sequence(tuple(f"w{i}" for i in range(n)), _causal(n))
    previous = _rows(n, [0, 0, 1, 2, 3, 4])  # the shifted identity (row 1 can only see itself)
    first = _rows(n, [0] * n)  # the first column
    diagonal = _rows(n, list(range(n)))  # the identity
    assert STATISTICS["previous"].per_head(previous, seq).item() == 1.0
    assert STATISTICS["first"].per_head(first, seq).item() == 1.0
    assert STATISTICS["self"].per_head(diagonal, seq).item() == 1.0
    assert STATISTICS["previous"].per_head(diagonal, seq).item() == 0.0
    assert STATISTICS["first"].per_head(previous, seq).item() == pytest.approx(1 / 5)  # row 2's previous is token 1
    assert STATISTICS["self"].per_head(first, seq).item() == 0.0


def test_the_ideal_induction_and_duplicate_patterns_score_1_on_the_repeated_probe():
    tokens = _probe()
    n, half = len(tokens), len(tokens) // 2
    seq = Sequence(tokens, _causal(n))
    induction = _rows(n, [0] * half + [i - half + 1 for i in range(half, n)])  # second copy -> after the first
    duplicate = _rows(n, [0] * half + [i - half for i in range(half, n)])  # second copy -> its first copy
    assert STATISTICS["induction"].per_head(induction, seq).item() == 1.0
    assert STATISTICS["duplicate"].per_head(duplicate, seq).item() == 1.0
    assert STATISTICS["induction"].per_head(duplicate, seq).item() == 0.0
    assert STATISTICS["duplicate"].per_head(induction, seq).item() == 0.0


def test_the_patterns_are_transformerlens_detection_patterns():
    """TransformerLens' head_detector builds the same patterns (its code, re-typed here: duplicate = equal tokens
    below the diagonal; induction = that shifted one key right, lower triangle; previous = ones below the
    diagonal's first sub-diagonal)."""
    tokens = ("a", "b", "c", "a", "b", "d", "a")
    ids = torch.tensor([ord(t) for t in tokens])
    equal = (ids[None, :] == ids[:, None]).int()
    equal.fill_diagonal_(0)
    duplicate = equal.tril().bool()
    shifted = torch.roll(duplicate.int(), shifts=1, dims=1)
    induction = torch.cat((torch.zeros(len(tokens), 1, dtype=torch.int), shifted[:, 1:]), dim=1).tril().bool()
    assert torch.equal(copies_before(tokens), duplicate)
    assert torch.equal(induction_targets(tokens), induction)


def test_a_score_lies_in_its_range_and_rows_without_a_target_are_left_out():
    torch.manual_seed(0)
    tokens = ("the", "cat", "the", "dog")
    n = len(tokens)
    for mask in (None, _causal(n)):
        scores = torch.randn(3, n, n, dtype=torch.float64)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        seq = Sequence(tokens, mask)
        for statistic in STATISTICS.values():
            values = statistic.per_head(weights, seq)
            top = statistic.top or n
            assert bool(((values >= 0) & (values <= top + 1e-12)).all()), statistic.key
        # duplicate: only row 3 ("the" again) counts, and its score is its weight on row 1's "the"
        assert torch.allclose(STATISTICS["duplicate"].per_head(weights, seq), weights[:, 2, 0])


def test_one_token_gives_no_role_score_and_no_crash():
    seq = Sequence(("Hi",), _causal(1))
    weights = torch.ones(2, 1, 1, dtype=torch.float64)
    for key in ("previous", "first", "duplicate", "induction", "self"):
        assert bool(torch.isnan(STATISTICS[key].per_head(weights, seq)).all()), key
    assert bool(torch.isnan(STATISTICS["self"].per_head(weights, seq)).all())  # no row had a choice


def test_leaving_out_the_first_token_renormalizes_each_row_over_the_others():
    weights = torch.tensor([[[1.0, 0.0, 0.0], [0.8, 0.2, 0.0], [0.5, 0.25, 0.25]]], dtype=torch.float64)
    spread, kept = without_first(weights)
    assert kept.tolist() == [[False, True, True]]
    assert torch.allclose(spread[0, 1:].sum(dim=-1), torch.ones(2, dtype=torch.float64))
    assert spread[0, 2].tolist() == [0.0, 0.5, 0.5]
    seq = Sequence(("a", "b", "c"), _causal(3))
    grid = per_layer_and_head(STATISTICS["previous"], [weights], seq, leave_first_out=True)
    # Row 2's previous token is the first: left out with it. Row 3 puts half of the rest on token 2.
    assert grid.item() == pytest.approx(0.5)
    with_first = per_layer_and_head(STATISTICS["previous"], [weights], seq)
    assert with_first.item() == pytest.approx((0.8 + 0.25) / 2)
    assert weights[0, 1, 0] == 0.8  # the captured weights are untouched
    # an encoder's rows (no mask) spread evenly over three keys spread evenly over the other two: entropy 1 of 1
    even = torch.full((1, 3, 3), 1 / 3, dtype=torch.float64)
    spread_out = STATISTICS["normalized_entropy"].per_head(even, Sequence(("a", "b", "c")), leave_first_out=True)
    assert spread_out.item() == pytest.approx(1.0)


def test_top_heads_lists_the_highest_first_and_skips_undefined():
    grid = torch.tensor([[0.1, 0.9], [float("nan"), 0.5]])
    assert top_heads(grid, 5) == [(0, 1, pytest.approx(0.9)), (1, 1, 0.5), (0, 0, pytest.approx(0.1))]


# Rollout (Abnar & Zuidema 2020)


def _random_layers(count, heads, n, causal, seed=0):
    generator = torch.Generator().manual_seed(seed)
    layers = []
    for _ in range(count):
        scores = torch.randn(heads, n, n, generator=generator, dtype=torch.float64)
        if causal:
            scores = scores.masked_fill(~_causal(n), float("-inf"))
        layers.append(scores.softmax(dim=-1))
    return layers


@pytest.mark.parametrize("causal", [False, True])
def test_every_rollout_row_sums_to_1(causal):
    rolled = rollout(_random_layers(6, 4, 7, causal))
    assert torch.allclose(rolled.sum(dim=-1), torch.ones(7, dtype=torch.float64), atol=1e-12)
    assert bool((rolled >= 0).all())
    if causal:
        assert torch.equal(rolled.triu(1), torch.zeros(7, 7, dtype=torch.float64))  # no token draws on a later one


def test_all_identity_layers_roll_out_to_the_identity_and_one_layer_is_half_a_plus_half_i():
    n = 5
    identity = torch.eye(n, dtype=torch.float64).expand(3, n, n)
    assert torch.equal(rollout([identity] * 4), torch.eye(n, dtype=torch.float64))
    layer = _random_layers(1, 3, n, causal=False)[0]
    expected = 0.5 * layer.mean(dim=0) + 0.5 * torch.eye(n, dtype=torch.float64)
    assert torch.allclose(rollout([layer]), expected, atol=1e-15)
    two = _random_layers(2, 3, n, causal=False, seed=1)
    a1, a2 = (0.5 * w.mean(dim=0) + 0.5 * torch.eye(n, dtype=torch.float64) for w in two)
    assert torch.allclose(rollout(two), a2 @ a1, atol=1e-15)  # the later layer on the left
    assert torch.allclose(rollout(two, upto=1), a1, atol=1e-15)


# Norm-based attention (Kobayashi et al. 2020)


def test_the_norm_weighted_vectors_sum_back_to_the_heads_output():
    trace = trace_sentence("The cat sat on the mat", AttentionConfig(d_model=8, d_k=4, heads=2, seed=3))
    d_v = trace.d_v
    norms = value_norms(trace.v, trace.w_o)
    mapped = weighted_norms(trace.weights, norms)
    # The vectors are summed in float64 from the float32 weights and values; the context the trace holds was summed
    # in float32 (n products): they differ by that rounding at most (tests/numerics.py).
    context = nm.matmul(nm.exact(trace.weights), nm.exact(trace.v), nm.F32)
    for head in range(trace.heads):
        w_o = trace.w_o[head * d_v : (head + 1) * d_v]  # this head's rows of W_O
        vectors = weighted_vectors(trace.weights[head], trace.v[head], w_o)
        output = trace.context[head].double() @ w_o.double()
        carried = context.error[head] @ w_o.double().abs()  # the context's rounding, through W_O
        assert bool(((vectors.sum(dim=1) - output).abs() <= carried + 1e-12).all())
        assert torch.allclose(mapped[head], vectors.norm(dim=-1), atol=1e-12)
    # and the heads' outputs together are the layer's output (which W_O summed in float32 too)
    total = sum(trace.context[h].double() @ trace.w_o[h * d_v : (h + 1) * d_v].double() for h in range(2))
    projected = nm.matmul(nm.concat_heads(nm.exact(trace.context)), nm.exact(trace.w_o), nm.F32)
    nm.assert_within(trace.output, nm.Bound(total, projected.error), "the layer's output")


# Words, not pieces


def test_a_sentence_with_no_split_word_gives_the_identical_matrix():
    weights = _random_layers(1, 2, 5, causal=True)[0]
    groups = word_groups([None, 0, 1, 2, None])
    assert groups == [[0], [1], [2], [3], [4]]
    assert torch.equal(merge_words(weights, groups), weights)


def test_a_split_word_becomes_one_row_and_one_column_and_rows_still_sum_to_1():
    tokens = ("[CLS]", "token", "##ization", "is", "fun", "[SEP]")
    groups = word_groups([None, 0, 0, 1, 2, None])
    assert groups == [[0], [1, 2], [3], [4], [5]]
    assert merged_tokens(tokens, groups) == ("[CLS]", "tokenization", "is", "fun", "[SEP]")
    weights = _random_layers(1, 3, 6, causal=False, seed=2)[0]
    merged = merge_words(weights, groups)
    assert merged.shape == (3, 5, 5)
    assert torch.allclose(merged.sum(dim=-1), torch.ones(3, 5, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(merged[:, 1, 2], (weights[:, 1, 3] + weights[:, 2, 3]) / 2)  # the pieces' mean row
    assert torch.allclose(merged[:, 2, 1], weights[:, 3, 1] + weights[:, 3, 2])  # the pieces' summed column


def test_two_special_tokens_in_a_row_stay_two_words():
    assert word_groups([None, None, 0, 0]) == [[0], [1], [2, 3]]
    assert math.isclose(merge_words(torch.eye(4).unsqueeze(0), word_groups([None, None, 0, 0]))[0, 2, 2], 1.0)
