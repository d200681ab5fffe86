"""The sentences the composed mask, the bend, the blocks and the skipped tiles say, each against the numbers it
describes, recomputed here from the formulas (a block's kind from FlexAttention's create_block_mask), at the edges:
one token, a row with one key, a block larger than the sentence, a soft cap no score reaches."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask
from transformers.models.bloom.modeling_bloom import build_alibi_tensor

from attention_core import AttentionConfig, trace_sentence
from attention_core.tiling import TileStep, tiled_output, tiled_steps
from figures.stages import stage_view
from figures.stages.scores import BLOCKS_MOST
from figures.stages.tiles import tile_bend
from figures.style import DEFAULT_STYLE
from tests.numerics import F32, assert_agree
from tests.sentences import spans_by_search, token_sentences
from tests.test_composed import alibi_mod, bound, relative_mod

pytestmark = pytest.mark.numeric

TEXT = "The cat sat on the mat. It was warm! Then the dog came in, and sat too."


def said(trace, key: str, head: int = 0, **options) -> str:
    return stage_view(trace, key, head, options=options).explanation


def sentence(text: str, starts: str) -> str:
    found = re.search(re.escape(starts) + r"[^.]*(?:\.\d+[^.]*)*\.", text)
    assert found, (starts, text)
    return found.group(0)


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        ("causal & (window 3 | sinks 2)", "causal and (window 3 or the first 2)"),
        ("document", "its own sentence"),
        ("causal | prefix 4", "causal or prefix 4"),
        ("window 1", "window 1"),
    ],
)
def test_the_composed_mask_says_its_words_what_it_hides_and_the_keys_a_row_keeps(mask, words):
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, mask=mask))
    text = said(trace, "mask")
    kept = trace.mask.sum(dim=1)
    n = trace.n_tokens
    assert f"Here: {words}. {int((~trace.mask).sum())} of the {n * n} cells are hidden" in text
    least, most = int(kept.min()), int(kept.max())
    assert (f"keeps from {least} to {most} keys" if least < most else f"keeps {least} key") in text
    assert stage_view(trace, "mask").heading == "6 · Composed mask"  # after the scaled scores: no bend here
    if "document" in mask:  # how many sentences, by the rule written on the text (tests/sentences.py), and the rule
        count = max(token_sentences(TEXT, spans_by_search(TEXT, trace.tokens))) + 1
        assert f" {count} sentences: A sentence ends at" in text
        assert "a mark between two digits (3.5) or in Mr., Mrs." in text  # the app's own tokens: no "inside a word"
        slide = stage_view(trace, "mask", style=dataclasses.replace(DEFAULT_STYLE, band=6)).explanation
        assert f" {count} sentences." in slide and "A sentence ends" not in slide  # a slide: the count alone


def test_the_causal_box_joins_a_composition_in_the_words_and_the_mask():
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, mask="window 2 | sinks 1", causal=True))
    assert "Here: causal and (window 2 or the first 1)." in said(trace, "mask")
    assert not bool(trace.mask.triu(1).any())


def kinds(trace, block: int) -> tuple[int, int, int]:
    """(empty, full, partial) blocks as create_block_mask sorts them, the mask given as a table."""
    n, allowed = trace.n_tokens, trace.mask
    reference = create_block_mask(lambda b, h, q, kv: allowed[q, kv], None, None, n, n, device="cpu", BLOCK_SIZE=block)
    count = -(-n // block)
    partial = int(reference.kv_num_blocks.sum())
    full = 0 if reference.full_kv_num_blocks is None else int(reference.full_kv_num_blocks.sum())
    return count * count - partial - full, full, partial


@pytest.mark.parametrize("block", ["1", "2", "4", "64"])
@pytest.mark.parametrize("settings", [{"causal": True}, {"mask": "causal & window 3"}, {"mask": "document"}])
def test_the_blocks_sentence_counts_as_create_block_mask_does(block, settings):
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, **settings))
    drawn = max(int(block), -(-trace.n_tokens // BLOCKS_MOST))  # a side of at most 16 blocks: 1 is raised to 2 here
    empty, full, partial = kinds(trace, drawn)
    total = empty + full + partial
    text = sentence(said(trace, "mask", mask_block=block), "In blocks of")
    assert f"{empty} of the {total} block" in text and f"({empty / total:.0%}); {full} full" in text
    assert f"; {partial} partial" in text and f"In blocks of {drawn}×{drawn}" in text
    raised = f"(Blocks of {block} would be {-(-trace.n_tokens // int(block))} a side: drawn at {drawn}"
    assert (raised in said(trace, "mask", mask_block=block)) == (drawn > int(block))


def test_one_token_is_one_partial_block_and_a_row_with_one_key():
    trace = trace_sentence("cat", AttentionConfig(d_model=4, d_k=2, mask="causal", bend="softcap 2"))
    text = said(trace, "mask", mask_block="8")
    assert "0 of the 1 block are empty" in text and "0 full" in text and "1 partial" in text
    assert "keeps 1 key" in text


@pytest.mark.parametrize("block", ["1", "2", "3", "16"])
def test_the_tiles_say_the_scores_they_computed(block):
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, mask="causal & window 3", bend="alibi"))
    n, b = trace.n_tokens, int(block)
    tiles = -(-n // b)
    kind = np.zeros((tiles * b, tiles * b), bool)
    kind[:n, :n] = trace.mask.numpy()
    live = kind.reshape(tiles, b, tiles, b).any(axis=(1, 3))  # a tile with a key kept: computed whole
    rows = np.minimum(np.arange(tiles)[:, None] * 0 + b, n - np.arange(tiles)[:, None] * b)  # rows in each tile
    cols = np.minimum(b, n - np.arange(tiles)[None, :] * b)
    computed = int((live * rows * cols).sum())
    text = said(trace, "tiles", tile_block=block)
    assert f"; empty tiles skipped: {computed} of {n * n} scores computed." in text
    assert_the_result_is_said_as_it_agrees(trace, text, int(block))


def assert_the_result_is_said_as_it_agrees(trace, text: str, block: int, head: int = 0) -> None:
    """ "At the end O ÷ ℓ is within X of the ·V stage" (or "equals, to the last bit,"): X is the largest gap between
    the tiled result and the ·V stage, and the two agree within float32's rounding of the formula (either side
    rounds: the sum of their bounds), so the sentence says they are the same result in another order."""
    found = re.search(r"At the end O ÷ ℓ (?:is within ([0-9.e+-]+) of|equals, to the last bit,) the ·V stage", text)
    assert found, text
    tiled = tiled_output(trace.q[head], trace.k[head], trace.v[head], block, trace.scale, ~trace.mask,
                         tile_bend(trace, head)).double()  # fmt: skip
    gap = float((tiled - trace.context[head].double()).abs().max())
    said_gap = float(found[1]) if found[1] else 0.0
    assert said_gap == pytest.approx(gap, rel=0.06, abs=0.0), (said_gap, gap)  # written with 2 figures
    mod = alibi_mod(trace.heads) if trace.bend == "alibi" else None
    within = bound(trace, trace.mask, mod, F32)[head]
    assert said_gap <= float((2 * within.error).max()), (said_gap, text)  # no further apart than rounding allows


def test_tiles_that_say_a_result_far_from_the_context_fail_the_check(monkeypatch):
    """The positive control: tiles whose result is 0.3 off the ·V stage say "is within 3.0e-01", and the check
    above must refuse that sentence."""
    import figures.stages.tiles as tiles

    def off(*args, **kwargs):
        steps = tiled_steps(*args, **kwargs)
        last = steps[-1]
        steps[-1] = TileStep(last.keys, last.scores, last.rescale, last.m, last.l, last.out + 0.3 * last.l[:, None],
                             last.computed)  # fmt: skip
        return steps

    monkeypatch.setattr(tiles, "tiled_steps", off)
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, mask="causal & window 3", bend="alibi"))
    text = said(trace, "tiles", tile_block="2")
    assert "is within 3.0e-01 of the ·V stage" in text
    with pytest.raises(AssertionError):
        assert_the_result_is_said_as_it_agrees(trace, text, 2)


def test_the_tiles_with_a_bend_and_skipped_tiles_equal_the_context():
    """The tiles' online softmax, bent tile by tile and skipping the empty tiles, is the ·V stage within the rounding
    of either (float64 here: tests/numerics.py's bound for the bent scores, the softmax and the sum)."""
    config = AttentionConfig(d_model=8, d_k=4, heads=2, mask="document", bend="relative", dtype="float64", seed=2)
    trace = trace_sentence(TEXT, config)
    for head in range(2):
        tiled = tiled_output(trace.q[head], trace.k[head], trace.v[head], 4, trace.scale, ~trace.mask,
                             tile_bend(trace, head))  # fmt: skip
        within = bound(trace, trace.mask, relative_mod(2, 2))[head]
        assert_agree(tiled, trace.context[head], within, what=f"head {head + 1}")


def test_alibi_says_its_slope_and_the_farthest_pairs_penalty():
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, heads=4, causal=True, bend="alibi"))
    slopes = build_alibi_tensor(torch.ones(1, 2), 4, torch.float64)[:, 0, 1]
    n = trace.n_tokens
    for head in range(4):
        text = said(trace, "bend", head)
        slope = float(slopes[head])
        assert f"slope m = {slope:.4g}" in text and f"({n - 1} apart) loses {slope * (n - 1):.3g}" in text
        change = (trace.bent_scores[head] - trace.scaled_scores[head]).double()
        # float32's roundings: the bent score (its product and subtraction) and the difference taken here, each at
        # most u of the sizes they touch.
        sizes = float(trace.scaled_scores[head].abs().max() + trace.bent_scores[head].abs().max()) + slope * (n - 1)
        assert abs(float(change.min()) + slope * (n - 1)) <= 3 * F32 * sizes


@pytest.mark.parametrize("cap", ["2", "50"])
def test_the_soft_cap_says_the_largest_score_before_and_after(cap):
    trace = trace_sentence(TEXT, AttentionConfig(d_model=64, d_k=32, init="normal", bend=f"softcap {cap}"))
    text = said(trace, "bend")
    top = float(trace.scaled_scores[0].abs().max())
    assert f"The largest |score| here, {top:.3g}, became {float(trace.bent_scores[0].abs().max()):.3g}" in text
    assert float(trace.bent_scores.abs().max()) <= float(cap)


def test_the_relative_bias_says_the_range_it_added():
    trace = trace_sentence(TEXT, AttentionConfig(d_model=8, d_k=4, heads=2, bend="relative", seed=4))
    added = (trace.bent_scores[1] - trace.scaled_scores[1]).double()
    text = said(trace, "bend", 1)
    assert f"Head 2 adds from {float(added.min()):.3g} to {float(added.max()):.3g} here" in text


@pytest.mark.parametrize(
    ("mask", "most", "reached"),
    [
        ("causal & (window 3 | sinks 2)", 5, True),
        ("causal & window 4", 4, True),
        ("causal & (prefix 3 | window 2)", 5, False),
    ],
)
def test_the_cache_a_composition_needs_is_what_the_tokens_after_it_read_at_most(mask, most, reached):
    """ "The cache need hold at most m tokens": over a long text, at each step the cache holds the new token and the
    earlier keys some query from it on reads; never more than m, and m once the text is long where the pieces are a
    window and sinks (a prefix's keys are read only inside the prefix: there m bounds, and is not reached)."""
    text = " ".join(f"w{i}" for i in range(40))
    trace = trace_sentence(text, AttentionConfig(d_model=4, d_k=2, mask=mask))
    held = [int(trace.mask[t:, :t].any(dim=0).sum()) + 1 for t in range(40)]  # before t, read from t on; and t
    assert max(held) <= most and (held[-1] == most) == reached, held
    assert f"the cache need hold at most {most} tokens" in said(trace, "cache")
    document = trace_sentence("a b. c d e! f", AttentionConfig(d_model=4, d_k=2, mask="causal & document"))
    assert "no piece bounds how many keys a later token reads" in said(document, "cache")
