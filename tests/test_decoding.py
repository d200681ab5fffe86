"""Decoding one token at a time with a KV cache (attention_core/decoding.py), for every variant: each step's row
is the full causal pass's row, the cache holds the full pass's K and V, and the cost formulas are what runs."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from attention_core import AttentionConfig, compute_attention, trace_sentence
from attention_core.decoding import MAX_DECODE_TOKENS, bytes_read, decode, decode_sentence, decode_step, step_flops
from attention_core.engine import prepared
from attention_core.masks import MASKS
from attention_core.training import TrainingConfig, continue_greedily, encode, model_at, train
from attention_core.variants import VARIANTS
from tests import numerics as nm

pytestmark = pytest.mark.numeric

SENTENCE = "the quick brown fox jumps over the lazy dog"
CONFIGS = {
    "mha": dict(heads=2),
    "mha-rotary": dict(heads=2, positional="rotary"),
    "gqa": dict(variant="gqa", heads=4, kv_heads=2, positional="rotary"),
    "mqa": dict(variant="mqa", heads=3),
    "mla": dict(variant="mla", heads=2, d_c=6, d_rope=4, positional="rotary"),
    "mla-query-latent": dict(variant="mla", heads=2, d_c=6, d_cq=5, d_rope=4, positional="rotary"),
    "mla-no-rope": dict(variant="mla", heads=2, d_c=6),
    "identity": dict(variant="identity", positional="rotary"),
    "gated": dict(variant="gated", heads=4, kv_heads=2, positional="rotary"),
    "learned_sink": dict(variant="learned_sink", heads=4, kv_heads=2, positional="rotary"),
    "differential": dict(variant="differential", heads=4, kv_heads=2, positional="rotary"),
    "deepseek_v4": dict(
        variant="deepseek_v4", heads=4, d_k=6, d_cq=5, d_rope=4, o_groups=2, d_o=3, positional="rotary"
    ),
    "unscaled": dict(scaled=False, heads=2),
}


def config_of(name, **changes):
    return AttentionConfig(causal=True, **{**CONFIGS[name], **changes})


@pytest.mark.parametrize("name", CONFIGS)
def test_each_step_is_the_full_causal_passs_row_and_the_cache_its_k_and_v(name):
    """Step t's row is row t of compute_attention with the causal mask: its scores, weights, context and output,
    within the rounding of the formula (tests/numerics.py: the new token alone is a matrix-vector product, the full
    pass a matrix product, and their sums may round apart). After t steps the cache holds the first t rows of the
    parts the full pass keeps. In float32 and in float64."""
    for dtype in ("float32", "float64"):
        config = config_of(name, dtype=dtype)
        decoding, trace = decode_sentence(SENTENCE, config), trace_sentence(SENTENCE, config)
        bound = nm.trace_bound(trace, nm.Rounding.throughout(dtype))
        n = trace.n_tokens
        assert len(decoding.steps) == n and decoding.tokens == trace.tokens
        for step in decoding.steps:
            t = step.position
            for stage in ("scaled_scores", "weights"):
                nm.assert_agree(getattr(step, stage), getattr(trace, stage)[:, t, : t + 1],
                                bound[stage][:, t, : t + 1], what=f"{stage} at step {t}")  # fmt: skip
            nm.assert_agree(step.context, trace.context[:, t], bound["context"][:, t], what=f"context at step {t}")
            if trace.output is None:  # Q = K = V = X has no W_O
                assert step.output is None
            else:
                nm.assert_agree(step.output, trace.output[t], bound["output"][t], what=f"output at step {t}")
            assert step.k.shape[-2] == t + 1  # the keys of every token so far, and no more
        for t in (1, n // 2, n):
            cache = decoding.cache_at(t)
            assert set(cache) == {p for p in VARIANTS[config.variant].cached if p in trace.parts}
            for part, rows in cache.items():
                assert rows.shape[-2] == t
                nm.assert_agree(rows, trace.parts[part][..., :t, :], bound[part][..., :t, :], what=f"cached {part}")


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
    windowed = config_of(name, window=2, sinks=True)  # a cache of the 4 sinks and the last 2: 6 keys at most
    for t in (1, 5, 7):
        xs, params, tokens = prepared(x[:t], windowed, None, None)
        keys = list(decode(x[:t], windowed).steps[-1].keys)
        cache = {name: part[..., keys[:-1], :] for name, part in decode(x[:t], windowed).cache.items()}
        with FlopCounterMode(display=False) as counted:
            decode_step(xs[t - 1 : t], t - 1, tokens[-1], cache, params, windowed)
        assert len(keys) == min(t, 6)
        assert counted.get_total_flops() == step_flops(windowed.variant, windowed.sizes, t, True, len(keys)), t


class _Reads(TorchDispatchMode):
    """The storages every operation reads while it is on: what a computation takes from memory."""

    def __init__(self):
        super().__init__()
        self.storages: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for value in torch.utils._pytree.tree_leaves((args, kwargs or {})):
            if isinstance(value, torch.Tensor):
                self.storages.add(value.untyped_storage().data_ptr())
        return func(*args, **(kwargs or {}))


def _read(tensors: dict[str, torch.Tensor], reads: _Reads) -> int:
    """Bytes of those of `tensors` (made before the computation) whose storage an operation read."""
    return sum(
        t.numel() * t.element_size() for t in tensors.values() if t.untyped_storage().data_ptr() in reads.storages
    )


@pytest.mark.parametrize("name", CONFIGS)
def test_the_bytes_a_step_reads_are_what_its_operations_read(name):
    """bytes_read, against a count of what the step's operations really read (every tensor an operation takes,
    under a dispatch mode) among what existed before it: every weight, the cache of the tokens before, and the new
    token's row of X; and, written by the step and read back by it, the new token's row of the cache. Without the
    cache: every weight and all t rows of X."""
    config = config_of(name)
    x = torch.randn(7, config.d_model, generator=torch.Generator().manual_seed(1))
    for t in (1, 2, 5, 7):
        xs, params, tokens = prepared(x[:t], config, None, None)
        cache = decode(x[: t - 1], config).cache if t > 1 else {}
        before = {**params, **{f"cached {part}": rows for part, rows in cache.items()}, "x_new": xs[t - 1 : t]}
        with _Reads() as reads:
            _, after = decode_step(xs[t - 1 : t], t - 1, tokens[-1], cache, params, config)
        assert all(w.untyped_storage().data_ptr() in reads.storages for w in params.values())  # every weight
        new_rows = sum(rows[..., -1:, :].numel() * rows.element_size() for rows in after.values())
        assert _read(before, reads) + new_rows == bytes_read(params, after, xs, cached=True), t
        with _Reads() as reads:
            compute_attention(xs, config, weights=params)
        assert _read({**params, "x": xs}, reads) == bytes_read(params, {}, xs, cached=False), t


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
    (within float32's rounding), and each word it appends is the most probable one. At step 0 (random weights) and
    after a short run: a structural check that holds whatever a CPU's kernels make of a run."""
    config = TrainingConfig(steps=100)
    _, run = train(config)
    for checkpoint in (run.checkpoints[0], run.checkpoints[-1]):
        model = model_at(checkpoint, run.vocabulary, config)
        for prompt in (("Alice",), ("Alice", "will", "eat"), ("Bob", "can", "drink", "tea")):
            continued = continue_greedily(checkpoint, run, prompt)
            assert continued.words[: len(prompt)] == prompt and len(continued.words) == 4
            ids = encode(run.vocabulary, [continued.words[: len(continued.next_word)]])
            with torch.no_grad():  # the model's own forward pass, and the same in float64 for float32's rounding
                logits, _ = model(ids)
                exact, _ = model.double()(ids)
                model.float()
            nm.assert_like_reference(torch.stack(continued.next_word), torch.softmax(logits[0], -1),
                                     torch.softmax(exact[0], -1), "next-word probabilities")  # fmt: skip
            for t in range(len(prompt) - 1, len(continued.next_word)):
                assert continued.words[t + 1] == run.vocabulary[int(continued.next_word[t].argmax())]


@pytest.mark.parametrize(("window", "sinks"), [(1, False), (3, False), (2, True)])
@pytest.mark.parametrize("name", ["mha-rotary", "gqa", "mla", "deepseek_v4"])  # V4: a window in every layer
def test_under_a_sliding_window_each_step_is_the_windowed_passs_row_and_the_cache_stops_growing(name, window, sinks):
    """With a window, step t reads only the keys the window's mask keeps for row t (the sinks and the last w), and
    its row is row t of compute_attention under that mask, restricted to those keys; the cache then holds exactly
    those rows of the full pass's parts, and its size stops at w (sinks + w) tokens, masks.py's `cached`."""
    config = config_of(name, window=window, sinks=sinks)
    decoding, trace = decode_sentence(SENTENCE, config), trace_sentence(SENTENCE, config)
    bound = nm.trace_bound(trace, nm.Rounding.throughout("float32"))
    mask = MASKS["sinks" if sinks else "window"]
    for step in decoding.steps:
        t = step.position
        keys = list(step.keys)
        assert keys == trace.mask[t].nonzero().flatten().tolist()  # exactly the keys the mask keeps for row t
        for stage in ("scaled_scores", "weights"):
            nm.assert_agree(getattr(step, stage), getattr(trace, stage)[:, t, keys], bound[stage][:, t, keys],
                            what=f"{stage} at step {t}")  # fmt: skip
        nm.assert_agree(step.context, trace.context[:, t], bound["context"][:, t], what=f"context at step {t}")
        for part, rows in decoding.cache_at(t + 1).items():
            nm.assert_agree(rows, trace.parts[part][..., keys, :], bound[part][..., keys, :], what=f"cached {part}")
    per_token = VARIANTS[config.variant].cache_per_token(config.sizes) * 4
    n = len(decoding.steps)
    assert [decoding.cache_bytes(t) for t in range(1, n + 1)] == [
        per_token * mask.cached(t, window) for t in range(1, n + 1)
    ]
