"""Decoding one token at a time with a KV cache (attention_core/decoding.py), for every variant: each step's row
is the full causal pass's row, the cache holds the full pass's K and V, and the cost formulas are what runs."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_core import AttentionConfig, compute_attention, trace_sentence
from attention_core.decoding import MAX_DECODE_TOKENS, bytes_read, decode, decode_sentence, decode_step, step_flops
from attention_core.engine import prepared
from attention_core.training import TrainingConfig, continue_greedily, encode, model_at, train
from attention_core.variants import VARIANTS

SENTENCE = "the quick brown fox jumps over the lazy dog"
CONFIGS = {
    "mha": dict(n_heads=2),
    "mha-rotary": dict(n_heads=2, positional="rotary"),
    "gqa": dict(variant="gqa", n_heads=4, kv_heads=2, positional="rotary"),
    "mqa": dict(variant="mqa", n_heads=3),
    "mla": dict(variant="mla", n_heads=2, d_c=6, d_rope=4, positional="rotary"),
    "mla-query-latent": dict(variant="mla", n_heads=2, d_c=6, d_cq=5, d_rope=4, positional="rotary"),
    "mla-no-rope": dict(variant="mla", n_heads=2, d_c=6),
    "identity": dict(variant="identity", positional="rotary"),
    "unscaled": dict(scaled=False, n_heads=2),
}


def config_of(name, **changes):
    return AttentionConfig(causal=True, **{**CONFIGS[name], **changes})


@pytest.mark.parametrize("name", CONFIGS)
def test_each_step_is_the_full_causal_passs_row_and_the_cache_its_k_and_v(name):
    """Step t's weights equal row t of compute_attention with the causal mask (float32 within 1e-6); its scores
    and context agree to float32's precision (the new token alone is a matrix-vector product, the full pass a
    matrix product: their sums may round apart in the last bits); in float64 all agree within 1e-12. After t
    steps the cache holds the first t rows of the parts the full pass keeps."""
    for dtype, weights_tol, rest_tol in (("float32", 1e-6, 1e-5), ("float64", 1e-12, 1e-12)):
        config = config_of(name, dtype=dtype)
        decoding, trace = decode_sentence(SENTENCE, config), trace_sentence(SENTENCE, config)
        n = trace.n_tokens
        assert len(decoding.steps) == n and decoding.tokens == trace.tokens
        for step in decoding.steps:
            t = step.position
            torch.testing.assert_close(step.weights, trace.weights[:, t, : t + 1], atol=weights_tol, rtol=0)
            torch.testing.assert_close(step.scaled_scores, trace.scaled_scores[:, t, : t + 1], atol=rest_tol,
                                       rtol=rest_tol)  # fmt: skip
            torch.testing.assert_close(step.context, trace.context[:, t], atol=rest_tol, rtol=rest_tol)
            if trace.output is None:  # Q = K = V = X has no W_O
                assert step.output is None
            else:
                torch.testing.assert_close(step.output, trace.output[t], atol=rest_tol, rtol=rest_tol)
            assert step.k.shape[-2] == t + 1  # the keys of every token so far, and no more
        for t in (1, n // 2, n):
            cache = decoding.cache_at(t)
            assert set(cache) == {p for p in VARIANTS[config.variant].cached if p in trace.parts}
            for part, rows in cache.items():
                assert rows.shape[-2] == t
                torch.testing.assert_close(rows, trace.parts[part][..., :t, :], atol=rest_tol, rtol=rest_tol)


def test_the_cache_grows_one_token_per_step_by_the_variants_formula():
    for name in CONFIGS:
        config = config_of(name)
        decoding = decode_sentence(SENTENCE, config)
        per_token = VARIANTS[config.variant].cache_per_token(config.sizes) * 4  # float32
        assert [decoding.cache_bytes(t) for t in range(1, 5)] == [per_token * t for t in range(1, 5)], name


@pytest.mark.parametrize("name", CONFIGS)
def test_the_flops_formulas_are_what_torch_counts(name):
    """A step with the cache (decode_step on the new token) and the whole pass again without it
    (compute_attention over all t tokens) run under torch's FlopCounterMode: the count of the matrix products
    equals step_flops term for term summed, at every t."""
    config = config_of(name)
    x = torch.randn(7, config.d_model, generator=torch.Generator().manual_seed(1))
    for t in (1, 2, 5, 7):
        xs, params, tokens = prepared(x[:t], config, None, None)
        cache = decode(x[: t - 1], config).cache if t > 1 else {}
        with FlopCounterMode(display=False) as counted:
            _, after = decode_step(xs[t - 1 : t], t - 1, tokens[-1], cache, params, config)
        assert counted.get_total_flops() == step_flops(config.variant, config.sizes, t, cached=True), t
        with FlopCounterMode(display=False) as counted:
            compute_attention(x[:t], config)
        assert counted.get_total_flops() == step_flops(config.variant, config.sizes, t, cached=False), t
        weights = sum(w.numel() * 4 for w in params.values())
        assert bytes_read(params, after, xs, cached=True) == weights + sum(p.numel() * 4 for p in after.values()) + (
            config.d_model * 4
        )
        assert bytes_read(params, {}, xs, cached=False) == weights + t * config.d_model * 4


def test_without_a_cache_a_step_costs_more_and_grows_faster():
    for name in CONFIGS:
        sizes = config_of(name).sizes
        variant = config_of(name).variant
        assert step_flops(variant, sizes, 1, True) == step_flops(variant, sizes, 1, False)  # one token: the same work
        for t in (2, 16, 256):
            assert step_flops(variant, sizes, t, False) > step_flops(variant, sizes, t, True)
        growth = [step_flops(variant, sizes, t, False) - step_flops(variant, sizes, t - 1, False) for t in (10, 100)]
        assert growth[1] > growth[0]  # without the cache the step grows faster than linearly (t² scores)


def test_edges_one_token_d_k_one_and_the_cap():
    one = decode_sentence("hello", config_of("mha"))
    assert len(one.steps) == 1 and torch.allclose(one.steps[0].weights, torch.ones(2, 1))
    tiny = decode_sentence("a b c", AttentionConfig(d_k=1, d_v=1, causal=True))
    assert tiny.steps[-1].q.shape == (1, 1) and tiny.scale == 1.0
    with pytest.raises(ValueError, match=f"at most {MAX_DECODE_TOKENS} tokens"):
        decode_sentence(" ".join(["a"] * (MAX_DECODE_TOKENS + 1)), config_of("mha"))


def test_the_trained_models_greedy_words_are_its_own_most_probable_next_words():
    """continue_greedily decodes with the cache; its next-word probabilities are the TinyLM's own forward pass's
    (within 1e-5), and each word it appends is the most probable one. At step 0 (random weights) and after a
    short run: a structural check that holds whatever a CPU's kernels make of a run."""
    config = TrainingConfig(steps=100)
    _, run = train(config)
    for checkpoint in (run.checkpoints[0], run.checkpoints[-1]):
        model = model_at(checkpoint, run.vocabulary, config)
        for prompt in (("Alice",), ("Alice", "will", "eat"), ("Bob", "can", "drink", "tea")):
            continued = continue_greedily(checkpoint, run, prompt)
            assert continued.words[: len(prompt)] == prompt and len(continued.words) == 4
            with torch.no_grad():
                logits, _ = model(encode(run.vocabulary, [continued.words[: len(continued.next_word)]]))
            torch.testing.assert_close(torch.stack(continued.next_word), torch.softmax(logits[0], -1), atol=1e-5,
                                       rtol=0)  # fmt: skip
            for t in range(len(prompt) - 1, len(continued.next_word)):
                assert continued.words[t + 1] == run.vocabulary[int(continued.next_word[t].argmax())]
