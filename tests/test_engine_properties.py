"""Properties that hold for every input (hypothesis), and the numerical edge cases."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_core import AttentionConfig, compute_attention, embed, masked_softmax
from tests import numerics as nm
from tests.numerics import F32

pytestmark = pytest.mark.numeric

configs = st.builds(
    AttentionConfig,
    d_model=st.integers(1, 12),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    heads=st.integers(1, 4),
    causal=st.booleans(),
    scaled=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    init=st.sampled_from(["normal", "xavier"]),
)
words = st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=9)
SETTINGS = settings(max_examples=40, deadline=None)


@SETTINGS
@given(config=configs, tokens=words)
def test_rows_sum_to_one_and_masked_cells_are_zero(config, tokens):
    trace = compute_attention(embed(tokens, config.d_model, seed=config.seed), config, tokens=tokens).to("cpu")
    n = len(tokens)
    weights = nm.trace_bound(trace, nm.Rounding(F32))["weights"]
    # Each row's weights, each within its bound, summed in float32 (n more roundings).
    off_one = (trace.weights.double().sum(-1) - 1).abs()
    assert bool((off_one <= weights.error.sum(-1) + nm.gamma(n, F32)).all()), float(off_one.max())
    if config.causal:
        assert (trace.weights[:, ~trace.mask] == 0).all()
    # Entropy, a sum of n terms −w·log w (a few roundings each), and what is made of it: within γ_{8n} of its range.
    slack = nm.gamma(8 * n, F32) * max(1.0, math.log(n))
    assert ((trace.normalized_entropy >= -slack) & (trace.normalized_entropy <= 1 + slack)).all()
    assert ((trace.max_weight > 0) & (trace.max_weight <= 1 + nm.gamma(n, F32))).all()
    assert ((trace.effective_tokens >= 1 - slack) & (trace.effective_tokens <= n * (1 + slack))).all()


@SETTINGS
@given(config=configs, tokens=words, data=st.data())
def test_permuting_tokens_permutes_outputs_without_mask_or_positions(config, tokens, data):
    config = config.replace(causal=False)
    order = data.draw(st.permutations(range(len(tokens))))
    x = embed(tokens, config.d_model, seed=config.seed, positional=False)
    permuted_tokens = [tokens[i] for i in order]
    x_perm = embed(permuted_tokens, config.d_model, seed=config.seed, positional=False)
    torch.testing.assert_close(x_perm, x[list(order)])
    base = compute_attention(x, config)
    moved = compute_attention(x_perm, config)
    bound = nm.trace_bound(base, nm.Rounding(F32))  # both sides compute the same sums, in float32
    nm.assert_agree(moved.output, base.output[list(order)], bound["output"][list(order)], what="output")
    nm.assert_agree(moved.weights, base.weights[:, order][:, :, order], bound["weights"][:, order][:, :, order],
                    what="weights")  # fmt: skip


@SETTINGS
@given(config=configs, tokens=words)
def test_same_seed_bit_identical_other_seed_other_weights(config, tokens):
    x = embed(tokens, config.d_model, seed=config.seed)
    first, second = compute_attention(x, config), compute_attention(x, config)
    for name in ("w_q", "w_k", "w_v", "w_o", "q", "scores", "weights", "context", "output", "entropy"):
        assert torch.equal(getattr(first, name), getattr(second, name)), name
    other = compute_attention(x, config.replace(seed=(config.seed + 1) % 2**32))
    assert not torch.equal(first.w_q, other.w_q)


def test_word_vector_is_the_same_in_every_sentence():
    a = embed(["the", "cat"], 16, positional=False)
    b = embed(["dog", "sees", "The"], 16, positional=False)
    assert torch.equal(a[0], b[2])
    assert not torch.equal(a[0], embed(["the"], 16, seed=1, positional=False)[0])
    with_positions = embed(["the", "cat", "saw", "the"], 16)
    assert not torch.equal(with_positions[0], with_positions[3])


def test_fully_masked_row_gives_zeros_not_nan():
    scores = torch.randn(2, 3, 3)
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    masked, weights = masked_softmax(scores, mask)
    assert torch.isfinite(weights).all()
    assert (weights[:, 0] == 0).all()
    torch.testing.assert_close(weights[:, 1:].sum(-1), torch.ones(2, 2))
    assert torch.isneginf(masked[:, 0]).all()


def test_softmax_runs_in_float32_for_half_inputs():
    scores = torch.tensor([[[10.0, 0.0, -5.0]]], dtype=torch.float16)
    _, weights = masked_softmax(scores, torch.ones(1, 3, dtype=torch.bool).tril())
    assert weights.dtype == torch.float32
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 1))


def test_huge_inputs_stay_finite_in_float32():
    config = AttentionConfig(d_model=64, d_k=16, heads=4, causal=True)
    x = embed([f"w{i}" for i in range(20)], 64) * 1e3
    trace = compute_attention(x, config).to("cpu")
    for name in ("scores", "scaled_scores", "weights", "context", "output", "entropy", "normalized_entropy"):
        assert torch.isfinite(getattr(trace, name)).all(), name
    torch.testing.assert_close(trace.weights.sum(-1), torch.ones(4, 20))


def test_repeated_words_keep_their_own_rows():
    tokens = ["the", "cat", "saw", "the", "dog"]
    trace = compute_attention(embed(tokens, 8), AttentionConfig(d_model=8, d_k=4), tokens=tokens)
    assert trace.tokens == tuple(tokens)
    assert trace.weights.shape == (1, 5, 5)
