"""The KV cache at published sizes (attention_core/kv_cache.py) against references that are not our code: the
tensors transformers' own DeepSeek-V4 cache keeps, counted after every token a tiny random model writes and after
prefills of every length around its windows; and each published size read from transformers' configurations."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import torch
from transformers import DeepseekV3Config, DeepseekV4Config, DeepseekV4ForCausalLM, DeepseekV32Config

from attention_core.kv_cache import (
    CONTEXTS,
    PUBLISHED,
    V4_FLASH,
    V4_LAYERS,
    V4Sizes,
    csa_numbers,
    hca_numbers,
    markdown,
    table,
    window_numbers,
)

ROOT = Path(__file__).resolve().parents[1]
# A tiny DeepSeek-V4 with one layer of each kind, its windows short enough that a few dozen tokens close several.
TINY = V4Sizes(d=32, window=8, m=4, big_m=16, indexer=16)
KINDS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")


@pytest.fixture(scope="module")
def tiny_v4():
    config = DeepseekV4Config(
        vocab_size=100, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
        head_dim=TINY.d, q_lora_rank=32, n_routed_experts=4, num_experts_per_tok=2, sliding_window=TINY.window,
        o_groups=2, o_lora_rank=16, index_n_heads=2, index_head_dim=TINY.indexer, index_topk=3,
        compress_rates={"compressed_sparse_attention": TINY.m, "heavily_compressed_attention": TINY.big_m},
        layer_types=list(KINDS), mlp_layer_types=["moe"] * 3, num_nextn_predict_layers=0, hc_mult=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return DeepseekV4ForCausalLM(config).eval()


def counted(layer) -> int:
    """The numbers a cache layer holds: every tensor it keeps, each storage once. Where the layer keeps its values
    apart from its keys and they are equal (V4's K = V), once: DeepSeek keeps one tensor."""
    kept = {}
    for state in vars(layer).values():
        for tensor in state.values() if isinstance(state, dict) else [state]:
            if isinstance(tensor, torch.Tensor) and tensor.dim() > 1:
                kept[tensor.untyped_storage().data_ptr()] = tensor
    numbers = sum(tensor.numel() for tensor in kept.values())
    keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
    if keys is not None and values is not None and keys.data_ptr() != values.data_ptr():
        assert torch.equal(keys, values), "K = V: the values are the keys"
        numbers -= values.numel()
    return numbers


def formulas(n: int, s: V4Sizes = TINY) -> list[int]:
    return [window_numbers(n, s), csa_numbers(n, s), hca_numbers(n, s)]


def test_v4s_cache_after_every_token_and_every_prefill_is_what_transformers_keeps(tiny_v4):
    """Written token by token (the compressors' entries emitted as their windows close) and read in one prefill, at
    every length from one token (fewer than one compressed window) past three HCA windows: each layer's cache,
    counted, equals its formula. Planted: a window that kept W tokens, or an entry counted one window early, is
    caught."""
    ids = torch.randint(0, 100, (1, 3 * TINY.big_m + 3), generator=torch.Generator().manual_seed(1))
    seen = {}
    with torch.no_grad():
        cache = tiny_v4(ids[:, :1], use_cache=True).past_key_values
        for n in range(1, ids.shape[1]):
            seen[n] = [counted(layer) for layer in cache.layers]
            cache = tiny_v4(ids[:, n : n + 1], past_key_values=cache, use_cache=True).past_key_values
        for n in (1, TINY.m - 1, TINY.window, TINY.big_m + 1, 2 * TINY.big_m + TINY.m + 1):
            prefilled = tiny_v4(ids[:, :n], use_cache=True).past_key_values
            assert [counted(layer) for layer in prefilled.layers] == formulas(n), n
    wrong = {n: formulas(n) for n in seen if formulas(n) != seen[n]}
    assert wrong == {}, {n: (seen[n], wrong[n]) for n in list(wrong)[:5]}
    whole_window = V4Sizes(TINY.d, TINY.window + 1, TINY.m, TINY.big_m, TINY.indexer)
    assert any(formulas(n, whole_window) != seen[n] for n in seen)
    early = [(n + TINY.big_m - 1) // TINY.big_m * TINY.d for n in seen]  # an entry for a window not yet closed
    assert any(window_numbers(n, TINY) + e != seen[n][2] for n, e in zip(seen, early, strict=True))


def test_the_published_sizes_are_transformers_configurations():
    """Each published row's numbers at 32k, 128k and 1M tokens, recomputed from the configuration transformers
    ships for that model (its defaults are the published checkpoint's)."""
    v3, v32, v4 = DeepseekV3Config(), DeepseekV32Config(), DeepseekV4Config()
    rows = {row.name: row for row in PUBLISHED}
    kinds = collections.Counter(v4.layer_types)
    assert (
        V4Sizes(
            d=v4.head_dim,
            window=v4.sliding_window,
            m=v4.compress_rates["compressed_sparse_attention"],
            big_m=v4.compress_rates["heavily_compressed_attention"],
            indexer=v4.index_head_dim,
        )
        == V4_FLASH
    )
    for n in CONTEXTS:
        mla = n * (v3.kv_lora_rank + v3.qk_rope_head_dim)
        assert rows["DeepSeek-V3 (MLA)"].numbers(n) == v3.num_hidden_layers * mla
        assert rows["DeepSeek-V3.2 (DSA)"].numbers(n) == v32.num_hidden_layers * (mla + n * v32.index_head_dim)
        heads = v3.num_attention_heads * (v3.qk_nope_head_dim + v3.qk_rope_head_dim + v3.v_head_dim)
        assert rows["DeepSeek-V3 sizes as MHA"].numbers(n) == v3.num_hidden_layers * n * heads
        v4_numbers = kinds["compressed_sparse_attention"] * csa_numbers(n, V4_FLASH) + kinds[
            "heavily_compressed_attention"
        ] * hca_numbers(n, V4_FLASH)
        assert rows["DeepSeek-V4-Flash"].numbers(n) == v4_numbers
    assert sum(kinds.values()) == v4.num_hidden_layers and set(kinds) <= set(KINDS)


def test_the_table_says_what_each_cache_costs_as_the_text_grows():
    """MHA, MLA and DSA keep the same numbers for every token; V4's per-token cost falls as the text grows: a window
    alone keeps the same (W - 1)·d at any length, HCA tends to d/M a token and CSA to (d + c)/m. At 1M tokens, per
    token: MHA > DSA (MLA and its indexer's keys) > MLA > V4-Flash."""
    rows = {row["name"]: row for row in table()}
    short, _, long = (f"per token at {n:,}" for n in CONTEXTS)
    for name in ("DeepSeek-V3 sizes as MHA", "DeepSeek-V3 (MLA)", "DeepSeek-V3.2 (DSA)", "SmolLM2-135M (GQA)"):
        assert rows[name][short] == rows[name][long]
    window, csa, hca = (rows[row.name] for row in V4_LAYERS)
    assert window[f"numbers at {CONTEXTS[0]:,}"] == window[f"numbers at {CONTEXTS[-1]:,}"] == 127 * 512
    assert hca[long] == pytest.approx(V4_FLASH.d / V4_FLASH.big_m, rel=0.02)
    assert csa[long] == pytest.approx((V4_FLASH.d + V4_FLASH.indexer) / V4_FLASH.m, rel=0.02)
    names = ("DeepSeek-V3 sizes as MHA", "DeepSeek-V3.2 (DSA)", "DeepSeek-V3 (MLA)", "DeepSeek-V4-Flash")
    at_1m = [rows[name][long] for name in names]
    assert at_1m == sorted(at_1m, reverse=True) and len(set(at_1m)) == 4, dict(zip(names, at_1m, strict=True))


def test_the_docs_table_is_the_one_the_code_prints():
    """docs/kv-cache.md shows the table `python -m attention_core.kv_cache` prints, as it prints it now."""
    assert markdown() in (ROOT / "docs" / "kv-cache.md").read_text()


def test_the_glossarys_compressed_attention_gives_the_numbers_the_cache_counts():
    """The glossary's numbers for DeepSeek-V4-Flash and V3.2 at 1M tokens are the ones counted here."""
    from figures.glossary import TERMS

    rows, n = {row.name: row for row in PUBLISHED}, CONTEXTS[-1]
    words = TERMS["compressed attention"]
    assert f"keeps {rows['DeepSeek-V4-Flash'].per_token(n):,.0f} numbers a token at 1M tokens" in words
    assert f"DeepSeek-V3.2 {rows['DeepSeek-V3.2 (DSA)'].per_token(n):,.0f}" in words
    assert f"window of the last {V4_FLASH.window} tokens" in words and f"every {V4_FLASH.m} tokens" in words
