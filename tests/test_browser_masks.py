"""Masks you compose and scores you bend, in a real browser: typed in the sidebar, kept in the address and brought
back by it, read at the default sentence and an awkward one; and checked on /check with the bend and the mask a
student must apply, the bend left out named."""

from __future__ import annotations

from urllib.parse import quote

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_core.tokens import tokenize
from tests.browser import (
    SLOW,
    address_holds,
    chart_z,
    check_view,
    no_traceback,
    offline,
    outside_requests,
    screenshot,
    settled,
    wait_for_chart,
)
from tests.sentences import spans_by_search, token_sentences
from tests.test_browser import AWKWARD
from tests.test_browser_check import downloaded_inputs
from tests.test_checking import student

pytestmark = pytest.mark.browser


def test_a_mask_and_a_bend_chosen_in_the_sidebar_are_drawn_kept_in_the_address_and_restored(server, page):
    asked = outside_requests(page)
    page.goto(server)
    wait_for_chart(page, "attention weights")
    box = page.get_by_role("textbox", name="compose a mask (FlexAttention's pieces)")
    box.evaluate("box => box.scrollIntoView({block: 'center'})")
    box.fill("causal & (window 2 | sinks 1)")
    box.press("Enter")
    wait_for_chart(page, "composed mask")
    bend = page.get_by_role("combobox", name="bend the scores (score_mod)")
    bend.evaluate("box => box.scrollIntoView({block: 'center'})")
    bend.click()
    page.get_by_role("option", name="alibi", exact=True).click()
    wait_for_chart(page, "bent scores")
    for part in ("bend=alibi", "mask=causal"):
        address_holds(page, part)
    page.get_by_role("heading", name="Composed mask").first.wait_for(timeout=15000 * SLOW)
    page.goto(page.evaluate("location.href"))  # the address brings the view back (read in the page: address_holds)
    wait_for_chart(page, "bent scores")
    wait_for_chart(page, "blocks of 2×2")
    # Waited for, not read once: in a loaded full suite the box was read empty while the charts were already drawn.
    expect(page.get_by_role("textbox", name="compose a mask (FlexAttention's pieces)")).to_have_value(
        "causal & (window 2 | sinks 1)", timeout=15_000 * SLOW
    )
    settled(page)
    no_traceback(page)
    check_view(page, "the Walkthrough with a composed mask and ALiBi")
    screenshot(page, "masks-default")
    assert offline(asked) == []


DOCUMENT = AWKWARD + " saw e.g. 3.5 dogs... It ran!"  # two sentences: "e.g.", "3.5" and "..." end one at most


def test_an_awkward_sentence_keeps_its_sentences_apart_and_a_bad_piece_is_named(server, page):
    page.goto(f"{server}/?text={quote(DOCUMENT)}&mask=document&bend={quote('softcap 2')}")
    wait_for_chart(page, "composed mask")
    wait_for_chart(page, "bent scores")
    # The mask as the browser drew it (kept cells 1, hidden ones gaps) against the sentences of the rule written on
    # the text in the test (tests/sentences.py): each token sees its own sentence's tokens, and only them.
    tokens = tokenize(DOCUMENT)
    sentence = np.array(token_sentences(DOCUMENT, spans_by_search(DOCUMENT, tokens)))
    assert sentence.max() == 1, sentence  # two sentences: the mask has something to keep apart
    drawn = np.array([[np.nan if v is None else v for v in row] for row in chart_z(page, "composed mask")], float)
    assert np.array_equal(~np.isnan(drawn), sentence[:, None] == sentence[None, :])
    settled(page)
    no_traceback(page)
    check_view(page, "a document mask and a soft cap on an awkward sentence")
    screenshot(page, "masks-awkward")
    page.goto(f"{server}/?mask={quote('causal & windw 3')}")
    page.get_by_text("'windw' is not a piece").first.wait_for(timeout=30000 * SLOW)
    no_traceback(page)


def test_check_takes_the_bend_and_the_mask_and_names_the_bend_left_out(server, page, tmp_path):
    page.goto(f"{server}/check?mask={quote('causal & (window 2 | sinks 1)')}&bend=alibi&heads=2")
    inputs, settings = downloaded_inputs(page)
    assert settings["bend"] == "alibi" and settings["mask"] == "causal & (window 2 | sinks 1)"
    assert inputs["alibi_slopes"].shape == (2,) and inputs["mask"].shape == (5, 5)
    upload = page.locator("input[type=file]")
    for mistake, says in ((None, "Every stage you handed in matches (10 of 10)."),
                          ("bend_left_out", "The likely mistake: the bend left out.")):  # fmt: skip
        mine = tmp_path / f"{mistake or 'right'}.npz"
        np.savez(mine, **student(inputs, settings, mistake))
        upload.set_input_files(str(mine))
        page.get_by_text(says).wait_for(timeout=30000 * SLOW)
        settled(page)
        check_view(page, f"check with a bend: {mistake or 'right'}", charts=False)
    screenshot(page, "check-bend-left-out")
