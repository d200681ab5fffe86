"""The masks after MLA (issue 43 part 1, attention_core/masks.py), each against a reference built here: the sliding
window against transformers' Mistral (its own eager attention, on a tiny random config), sinks plus window
against a mask written out by hand, top-k row by row; and what a decoder's cache must hold under each."""

import pytest
import torch

from attention_core.masks import MASKS, SINKS, oracle_indexer


@pytest.mark.parametrize("window", [1, 3, 5])
def test_the_sliding_window_is_mistrals(window):
    from transformers import MistralConfig, MistralModel

    config = MistralConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, sliding_window=window,
                           max_position_embeddings=64)  # fmt: skip
    config._attn_implementation = "eager"
    model = MistralModel(config).eval()
    with torch.no_grad():
        weights = model(torch.arange(9)[None], output_attentions=True).attentions[0][0]
    assert torch.equal((weights > 0)[0], (weights > 0)[1])  # the window is the layer's, not a head's
    assert torch.equal(MASKS["window"].kept(9, window), (weights > 0)[0])


def test_sinks_and_window_keep_the_first_tokens_and_the_last_w():
    n, w = 10, 3
    by_hand = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            by_hand[i, j] = j < SINKS or j > i - w
    assert torch.equal(MASKS["sinks"].kept(n, w), by_hand)
    assert by_hand[9].nonzero().flatten().tolist() == [0, 1, 2, 3, 7, 8, 9]


def test_top_k_keeps_exactly_k_keys_per_query_the_highest_it_sees():
    n, k = 8, 3
    scores = torch.randn(n, n, generator=torch.Generator().manual_seed(0))
    kept = MASKS["top_k"].kept(n, k, scores)
    assert kept.sum(-1).tolist() == [min(k, i + 1) for i in range(n)]
    assert not (kept & ~torch.ones(n, n, dtype=torch.bool).tril()).any()  # never a key after the query
    for i in range(n):
        seen = scores[i, : i + 1]
        chosen = kept[i, : i + 1]
        if (~chosen).any():
            assert seen[chosen].min() >= seen[~chosen].max()
    ties = torch.zeros(n, n)
    assert MASKS["top_k"].kept(n, 2, ties)[5].nonzero().flatten().tolist() == [0, 1]  # equal scores: the earlier
    with pytest.raises(ValueError, match=r"top-k chooses by the scores: give them as \[\.\.\., 8, 8\]"):
        MASKS["top_k"].kept(n, k)


def test_full_and_causal_and_what_each_cache_must_hold():
    assert MASKS["full"].kept(4).all() and torch.equal(MASKS["causal"].kept(4), torch.ones(4, 4).tril().bool())
    holds = {key: [mask.cached(t, 3) for t in (1, 3, 6, 100)] for key, mask in MASKS.items()}
    assert holds["causal"] == holds["top_k"] == [1, 3, 6, 100]  # grows with every token
    assert holds["window"] == [1, 3, 3, 3]  # stops growing at w
    assert holds["sinks"] == [1, 3, 6, 7] == [min(t, SINKS + 3) for t in (1, 3, 6, 100)]
    for key, mask in MASKS.items():  # the cache holds every key the last query keeps
        if key != "full":
            kept = mask.kept(12, 3, torch.randn(12, 12, generator=torch.Generator().manual_seed(1)))
            assert int(kept[-1].sum()) <= mask.cached(12, 3)


@pytest.mark.parametrize("key, n, budget, refusal", [
    ("window", 4, 0, "sliding window: w must be at least 1; got 0"),
    ("top_k", 4, -1, "top-k: k must be at least 1; got -1"),
    ("causal", 0, 0, "a mask needs at least 1 token; got 0"),
])  # fmt: skip
def test_a_mask_refuses_what_it_cannot_be(key, n, budget, refusal):
    with pytest.raises(ValueError, match=refusal):
        MASKS[key].kept(n, budget, torch.zeros(max(n, 1), max(n, 1)))


def test_top_k_over_every_head_at_once_is_each_heads_own_and_ties_fill_from_the_earliest():
    n, k = 12, 4
    scores = torch.randn(3, n, n, generator=torch.Generator().manual_seed(1)).round(decimals=0)  # many ties
    together = MASKS["top_k"].kept(n, k, scores)
    for head in range(3):
        assert torch.equal(together[head], MASKS["top_k"].kept(n, k, scores[head]))
        for i in range(n):  # against a stable sort, written here: highest first, ties in key order
            order = sorted(range(i + 1), key=lambda j: (-float(scores[head, i, j]), j))[:k]
            assert together[head, i].nonzero().flatten().tolist() == sorted(order)


def test_dsa_chooses_one_set_of_keys_for_every_head_by_the_oracle_indexer():
    n, k = 10, 3
    scaled = torch.randn(4, n, n, generator=torch.Generator().manual_seed(2))
    index = oracle_indexer(scaled)
    by_hand = sum(torch.clamp(scaled[h], min=0) for h in range(4))  # Σ_h ReLU(q_h·k)
    assert torch.allclose(index, by_hand)
    kept = MASKS["dsa"].kept(n, k, index)
    assert kept.shape == (n, n) and kept.sum(-1).tolist() == [min(k, i + 1) for i in range(n)]
    assert MASKS["dsa"].chooses == "indexer" and MASKS["top_k"].chooses == "scores" and not MASKS["window"].chooses


# ---- The sliding window and its sinks in the from-scratch layer (the sidebar's "sliding window w" and "sinks")


def windowed(text: str, window: int, sinks: bool = False):
    from attention_core import AttentionConfig
    from attention_core.engine import trace_sentence

    return trace_sentence(text, AttentionConfig(d_model=8, d_k=4, heads=2, causal=True, window=window, sinks=sinks))


TEN = "one two three four five six seven eight nine ten"


@pytest.mark.parametrize(("window", "sinks"), [(1, False), (3, False), (3, True), (2, True)])
def test_the_layer_keeps_exactly_the_windows_keys_and_its_rows_still_sum_to_one(window, sinks):
    trace = windowed(TEN, window, sinks)
    assert torch.equal(trace.mask, MASKS["sinks" if sinks else "window"].kept(10, window))
    weights = trace.weights.double()
    assert not weights.masked_select(~trace.mask).any()  # exactly 0 on every key dropped
    assert torch.allclose(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=1e-6)


def test_a_window_applies_with_the_causal_mask_and_sinks_need_a_window_and_a_bad_one_is_named():
    from attention_core import AttentionConfig
    from attention_core.engine import trace_sentence

    assert trace_sentence("a b c d e", AttentionConfig(causal=False, window=2, sinks=True)).mask is None  # no mask
    assert AttentionConfig(causal=True, window=0, sinks=True).sinks is False  # every key kept: no sinks to keep
    assert AttentionConfig(causal=True, window=3, sinks=True) == AttentionConfig(causal=True, window=3, sinks=True)
    with pytest.raises(ValueError, match="window must be between 0 and 4096; got -1"):
        AttentionConfig(causal=True, window=-1)
    with pytest.raises(ValueError, match="sinks must be"):
        AttentionConfig(causal=True, window=2, sinks="yes")


def test_the_mask_stage_says_what_the_window_hides_and_what_a_cache_must_hold_at_the_edges():
    from figures.stages.outputs import build_cache
    from figures.stages.scores import mask_note
    from figures.style import DEFAULT_STYLE

    assert mask_note(windowed(TEN, 1).mask) == (
        "Here 90 of the 100 cells are hidden: every key after its query, and 45 too far back for the sliding "
        "window. Each query sees its last 1 key, its own included: at most 1 a row, so a decoder's KV cache need "
        "hold no more than 1 key."
    )
    said = mask_note(windowed(TEN, 3, sinks=True).mask)
    assert "Each query sees the first 4 tokens (sinks, which every query keeps) and its last 3 keys" in said
    assert "at most 7 a row" in said and f"{100 - int(windowed(TEN, 3, True).mask.sum())} of the 100" in said
    short = windowed("one two three", 3, sinks=True)  # a window as long as the sentence hides only the future
    assert mask_note(short.mask) == "Here 3 of the 9 cells are hidden: every key after its query."
    notes = build_cache(windowed(TEN, 3, sinks=True), 0, DEFAULT_STYLE, None).notes
    assert any("the cache stops at 7 tokens (4 sinks + the last 3): 224 B a layer" in note for note in notes)
    plain = build_cache(windowed(TEN, 0), 0, DEFAULT_STYLE, None).notes
    assert not any("the cache stops" in note for note in plain)


def test_dsa_top_k_in_the_layer_keeps_the_indexers_k_keys_for_every_head_and_says_so():
    """The sidebar's top-k: each query keeps the k keys the oracle indexer (Σ_h ReLU of the scaled scores) scores
    highest of those the causal mask leaves it, the same keys for every head; written here without masks.py."""
    from attention_core import AttentionConfig
    from attention_core.engine import trace_sentence
    from figures.stages.outputs import build_cache
    from figures.stages.scores import mask_note, mask_title
    from figures.style import DEFAULT_STYLE

    k = 3
    trace = trace_sentence(TEN, AttentionConfig(d_model=8, d_k=4, heads=2, causal=True, top_k=k))
    plain = trace_sentence(TEN, AttentionConfig(d_model=8, d_k=4, heads=2, causal=True))
    index = plain.scaled_scores.double().clamp(min=0).sum(0)  # the oracle indexer, by hand
    for i in range(10):
        order = sorted(range(i + 1), key=lambda j: (-float(index[i, j]), j))[:k]
        assert trace.mask[i].nonzero().flatten().tolist() == sorted(order)
    assert not trace.weights.masked_select(~trace.mask).any() and trace.top_k == k
    assert mask_title(trace) == "top-k mask" and "Each query keeps at most 3 keys" in mask_note(trace.mask, k)
    assert any("the cache keeps every one" in note for note in build_cache(trace, 0, DEFAULT_STYLE, None).notes)
    with pytest.raises(ValueError, match="a sliding window and DSA top-k are two masks; choose one: window = 2"):
        AttentionConfig(causal=True, window=2, top_k=3)
    assert trace_sentence(TEN, AttentionConfig(causal=False, top_k=3)).mask is None  # no causal mask: no top-k
