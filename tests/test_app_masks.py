"""Composed masks and bent scores in the app (AppTest): from the sidebar and from a link, on every page that shows
the mask, each map holding the engine's numbers; what does not fit refused by name, never a traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention_core import AttentionConfig, trace_sentence
from attention_core.composed import parse_mask
from figures.stages import heading, stages_for
from tests.plotly_spec import decode, panels
from tests.test_app import DEFAULT_TEXT, TIMEOUT, charts, no_problems, panel, shown, stage_headings

ROOT = Path(__file__).resolve().parents[1]
COMPOSED = "causal & (window 2 | sinks 1)"


def opened(page: str = "", **params) -> AppTest:
    """The app opened from a link with these values, on the Walkthrough or, by its script, on another page."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    return at.switch_page(page).run() if page else at


def config(**changes) -> AttentionConfig:
    return AttentionConfig(**{"d_model": 8, "d_k": 4, "init": "xavier", **changes})


def test_a_link_opens_the_composed_mask_and_the_bend_with_the_engines_numbers():
    at = opened(mask=COMPOSED, bend="alibi", heads="2")
    no_problems(at)
    trace = trace_sentence(DEFAULT_TEXT, config(heads=2, mask=COMPOSED, bend="alibi"))
    assert stage_headings(at)[: len(stages_for(trace))] == [heading(stage.key, trace) for stage in stages_for(trace)]
    assert "6 · Bend the scores" in stage_headings(at) and "7 · Composed mask" in stage_headings(at)
    # The page draws the engine's own float32 numbers: on one machine the same code on the same inputs gives the same
    # bits (the standard's determinism), and a figure carries float32 as it is.
    assert np.array_equal(panel(at, "bent scores").z, trace.bent_scores[0].numpy())
    drawn = np.array(panel(at, "attention weights").z, dtype=float)  # hidden cells drawn as gaps
    assert np.array_equal(np.nan_to_num(drawn), trace.weights[0].numpy())
    assert np.array_equal(~np.isnan(drawn), trace.mask.numpy())
    blocks = panel(at, "blocks of 2×2").z  # each block's share of kept cells, the cells past n hidden
    padded = np.zeros((6, 6))
    padded[:5, :5] = parse_mask(COMPOSED).kept(trace.tokens).numpy()
    assert np.array_equal(blocks, padded.reshape(3, 2, 3, 2).mean(axis=(1, 3)))  # quarters: exact in any float
    said = " ".join(m.value for m in at.markdown)
    assert "Here: causal and (window 2 or the first 1)." in said
    assert at.text_input(key="mask").value == COMPOSED and at.selectbox(key="bend").value == "alibi"


def test_a_composition_typed_in_the_sidebar_reaches_the_maps():
    at = opened()
    at.text_input(key="mask").input("causal and dilated 2").run()
    no_problems(at)
    trace = trace_sentence(DEFAULT_TEXT, config(mask="causal & dilated 2"))
    hidden = np.isnan(np.array(panel(at, "masked scores").z, dtype=float))
    assert np.array_equal(~hidden, trace.mask.numpy())
    assert any("mask: causal and every 2nd key" in c.value for c in at.caption)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"mask": "windw 3"}, "mask 'windw 3': 'windw' is not a piece"),
        ({"mask": "sinks 1 & window 1"}, "leaves token 2 ('next') no key to see"),
        ({"mask": "causal", "causal": "true", "window": "2"}, "a composed mask and the sidebar's sliding window"),
        ({"bend": "alibi", "positional": "rotary"}, "positions twice"),
    ],
)
def test_what_does_not_fit_is_named_on_the_page_not_a_traceback(params, named):
    at = opened(**params)
    assert not at.exception
    said = " ".join(shown(e) for e in at.error)
    assert named in said, said


def test_a_bend_the_sidebar_does_not_offer_is_named_and_not_used():
    at = opened(bend="softcap 7")
    assert not at.exception
    assert any("bend the scores (score_mod) = 'softcap 7', which is not used" in shown(w) for w in at.warning)
    assert "Bend the scores" not in " ".join(stage_headings(at))


def introduction(at) -> str:
    return next(m.value for m in at.markdown if "Its row of attention is the same row" in m.value)


def test_decoding_keeps_to_a_causal_composition_and_refuses_one_that_sees_ahead():
    at = opened("app_pages/decoding/decoding.py", mask="causal & window 2", bend="relative")
    no_problems(at)
    # Its introduction names the mask each row is kept to: the composition, not "the causal mask".
    said = introduction(at)
    assert "the same row the composed mask (causal and window 2) leaves" in said, said
    at = opened("app_pages/decoding/decoding.py", mask="window 2")
    assert not at.exception
    said = " ".join(shown(e) for e in at.error)
    assert "lets token 1 see token 2, a later one" in said and "write 'causal & window 2'" in said, said


def test_multihead_offers_the_bent_scores_and_compare_draws_both_sides_each_with_its_mask():
    at = opened("app_pages/multihead/multihead.py", mask=COMPOSED, bend="softcap 2", heads="2")
    no_problems(at)
    maps = next(group for group in at.get("button_group") if group.key == "mh_stage")
    assert [option.content for option in maps.proto.options] == ["QKᵀ", "/√d_k", "bend", "mask", "softmax"]
    maps.set_value("bend").run()
    no_problems(at)
    trace = trace_sentence(DEFAULT_TEXT, config(heads=2, mask=COMPOSED, bend="softcap 2"))
    maps = [decode(t["z"]) for spec in charts(at) for t in spec["data"] if t.get("type") == "heatmap" and "z" in t]
    assert any(m.size == 25 and np.array_equal(m.reshape(5, 5), trace.bent_scores[1].numpy()) for m in maps)
    at = opened("app_pages/compare/compare.py", mask=COMPOSED, bend="alibi")
    no_problems(at)
    # "causal vs not": no mask on the left, the composition with the causal mask on the right, both bent; each side's
    # weights drawn (their hidden cells as gaps) are that side's engine numbers.
    left = trace_sentence(DEFAULT_TEXT, config(mask="", causal=False, bend="alibi"))
    right = trace_sentence(DEFAULT_TEXT, config(mask=COMPOSED, causal=True, bend="alibi"))
    assert not torch.equal(left.weights, right.weights)  # two sides that differ, so each match says which it is
    drawn = [np.array(p.z, dtype=float) for spec in charts(at) for p in panels(spec) if p.name.startswith("attention")]
    for side, trace in (("left", left), ("right", right)):
        assert any(
            np.array_equal(~np.isnan(z), trace.mask.numpy() if trace.mask is not None else np.ones(z.shape, bool))
            and np.array_equal(np.nan_to_num(z), trace.weights[0].numpy())
            for z in drawn
        ), side


def test_compare_offers_the_bent_scores_where_the_settings_bend_them():
    at = opened("app_pages/compare/compare.py", bend="alibi", cmp_stage="Bend the scores")  # the title, as shown
    no_problems(at)
    trace = trace_sentence(DEFAULT_TEXT, config(bend="alibi", causal=True))  # "causal vs not": the left side
    maps = [decode(t["z"]) for spec in charts(at) for t in spec["data"] if t.get("type") == "heatmap" and "z" in t]
    assert any(m.size == 25 and np.array_equal(m.reshape(5, 5), trace.bent_scores[0].numpy()) for m in maps)
    at = opened("app_pages/compare/compare.py", cmp_stage="Bend the scores")  # no bend: named, not used
    assert not at.exception
    assert any("stage = 'Bend the scores', which is not used" in shown(w) for w in at.warning)


def test_compare_causal_or_not_sets_no_mask_against_the_composition_and_names_each():
    at = opened("app_pages/compare/compare.py", mask="document", text="The cat sat. It ran!")
    no_problems(at)
    said = " ".join(m.value for m in at.markdown)
    assert "no mask, scaled" in said and "mask: causal and its own sentence, scaled" in said, said
    right = trace_sentence("The cat sat. It ran!", config(mask="document", causal=True))
    assert not torch.equal(right.mask, torch.ones_like(right.mask).tril())  # its sentences kept apart
    drawn = [np.array(p.z, dtype=float) for spec in charts(at) for p in panels(spec) if p.name.startswith("attention")]
    assert any(np.array_equal(~np.isnan(z), right.mask.numpy()) for z in drawn)  # the right side keeps to it


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "the same row the causal mask leaves"),
        ({"causal": "true", "window": "3"}, "the same row the sliding window of 3 leaves"),
        ({"causal": "true", "window": "3", "sinks": "true"}, "the same row the sliding window of 3 with the first 4"),
        ({"mask": "window 2", "causal": "true"}, "the same row the composed mask"),
    ],
)
def test_decodings_introduction_names_the_mask_its_rows_keep_to(params, named):
    at = opened("app_pages/decoding/decoding.py", **params)
    no_problems(at)
    assert named in introduction(at), introduction(at)
