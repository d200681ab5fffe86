"""The masks after MLA on the Real model page (issue 43): measured on SmolLM2 by a click, with its progress, then
drawn on its slide at 1400x900 (light) and 1920x1080 (dark) without scrolling, and read normally with its table.
The sweep is kept by the server: the second view shows it without running it again. It loads SmolLM2 (`models`),
and holds whether or not another test measured the masks first (tests/browser.py masks_measured)."""

from urllib.parse import quote

import pytest

from tests.browser import OVERFLOW, SLOW, check_view, lent_tab, masks_measured, screenshot, settled

pytestmark = [pytest.mark.browser, pytest.mark.models]

SLIDE = quote("Masks after MLA, measured")


@pytest.mark.xdist_group("sweep")  # with the deck after MLA's walks (tests/test_browser.py): one waits for the sweep
def test_the_masks_are_measured_once_and_fit_their_slide_and_the_page(server, browser):
    for turn, (width, height, scheme) in enumerate([(1400, 900, "light"), (1920, 1080, "dark")]):
        with lent_tab(browser, width, height, scheme) as page:
            page.goto(f"{server}/real_model?present=true&rm_model=smollm2&rm_slide={SLIDE}")
            measuring = masks_measured(page)  # a click if not measured yet, with its progress
            assert not (turn and measuring), "the second view measured the masks again"
            page.get_by_text("Window of 8 alone").wait_for(timeout=60000 * SLOW)
            settled(page, timeout=60)
            assert page.get_by_role("button", name="Measure every mask").count() == 0
            screenshot(page, f"masks-slide-{width}-{scheme}")
            assert page.evaluate(OVERFLOW) <= 2, f"the masks' slide needs scrolling at {width}x{height}"
            check_view(page, f"masks after MLA, presented at {width}x{height} {scheme}")
            if turn == 0:  # a link's mask and budget: the slide names that point's heads (it read the session's)
                chosen = f"rm_sweep_mask={quote('top-k per head')}&rm_sweep_budget=16"
                page.goto(f"{server}/real_model?present=true&rm_model=smollm2&rm_slide={SLIDE}&{chosen}")
                page.get_by_text("Losing most weight under top-k per head k = 16").wait_for(timeout=60000 * SLOW)
    with lent_tab(browser, 1400, 900) as page:
        page.goto(f"{server}/real_model?rm_model=smollm2&rm_sweep_mask={quote('sliding window w')}&rm_sweep_budget=8")
        heading = page.get_by_text("After MLA: windows, sinks and sparse attention, measured")
        heading.wait_for(timeout=60000 * SLOW)
        heading.scroll_into_view_if_needed()
        page.get_by_text("A window of 8 keys alone raises the loss").wait_for(timeout=60000 * SLOW)
        page.get_by_text("Losing most weight under sliding window w = 8").wait_for(timeout=60000 * SLOW)
        settled(page, timeout=60)
        check_view(page, "masks after MLA, read")
        screenshot(page, "masks-read-1400")


@pytest.mark.parametrize(("width", "height", "scheme"), [(1400, 900, "light"), (1920, 1080, "dark")])
def test_a_sliding_window_with_sinks_and_top_k_show_on_the_mask_and_kv_cache_slides(
    server, browser, width, height, scheme
):
    """The sidebar's window and sinks (from the link) on the Walkthrough's slides: the mask stage names what it
    hides and the most keys a row keeps; the KV cache stage says where the cache stops growing. DSA's top-k too."""
    text = quote("one two three four five six seven eight nine ten")
    with lent_tab(browser, width, height, scheme) as page:
        for stage, says, mask in (
            ("mask", "at most 6 a row", "window=2&sinks=true"),
            ("KV cache", "the cache stops at 6 tokens", "window=2&sinks=true"),
            ("mask", "Each query keeps at most 3 keys", "top_k=3"),  # DSA's top-k, by the oracle indexer
        ):
            page.goto(f"{server}/?text={text}&causal=true&{mask}&present=true&stage={quote(stage)}")
            page.get_by_text(says).wait_for(timeout=60000 * SLOW)
            settled(page)
            screenshot(page, f"{mask.split('=')[0]}-{stage.split()[0].lower()}-{width}-{scheme}")
            assert page.evaluate(OVERFLOW) <= 2, f"the {stage} slide with {mask} needs scrolling at {width}x{height}"
            check_view(page, f"{mask}: {stage}, presented at {width}x{height} {scheme}")
