"""Does this head matter? on the Real model page, in a real browser with SmolLM2: a click on the layer × head grid
knocks a head out (typed into the field and into the address) and a second click brings it back; a click patches
every head, with its progress, and the map and its words are drawn, then the residual stream's; the slide fits
1400x900 (light) and 1920x1080 (dark) at an awkward sentence; a deck's view shows the kind the server reads."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest

from app_pages.real_model.effects import GRID_CELL, GRID_LAYER
from tests.browser import OVERFLOW, SLOW, address_holds, check_view, lent_tab, screenshot, settled, wait_for_chart
from tests.test_browser import AWKWARD

pytestmark = [pytest.mark.browser, pytest.mark.models]

ANNA = "When Anna and Tom went to the park, {} gave a ball to"
ROW = 35  # pixels: a row of Streamlit's data grid, its header's too
SLIDE = quote("Does this head matter?")


def click_cell(page, layer: int, head: int) -> None:
    """A click on the grid's cell of layer `layer` and head `head` (both from 1), by the grid's own column widths."""
    grid = page.locator(".st-key-rm_knock_grid")
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + GRID_LAYER + (head - 0.5) * GRID_CELL, box["y"] + ROW * layer + ROW / 2)


def test_a_click_on_the_grid_knocks_a_head_out_and_a_patch_draws_its_map(server, browser):
    with lent_tab(browser, 1400, 900, "light") as page:
        # One token in the sidebar: the rest of the page is light. A pair of its own, which no other test patches:
        # the server keeps a map for every reader, so a map another test measured first would show no progress.
        pair = {
            "rm_clean": ANNA.format("Tom"),
            "rm_corrupt": ANNA.format("Anna"),
            "rm_target": " Anna",
            "rm_foil": " Tom",
        }
        page.goto(f"{server}/real_model?rm_model=smollm2&text=Mary&{urlencode(pair)}")
        page.locator(".st-key-rm_knock_grid").wait_for(timeout=120000 * SLOW)
        settled(page, timeout=60)
        click_cell(page, 3, 5)
        page.wait_for_function("() => location.search.includes('rm_knock=L3.H5')", timeout=30000 * SLOW)
        page.wait_for_function("() => document.querySelector('.st-key-rm_knock input').value === 'L3.H5'")
        page.get_by_text("With 1 head set to zero, p(").wait_for(timeout=30000 * SLOW)
        settled(page, timeout=60)
        screenshot(page, "effects-knocked-1400")
        click_cell(page, 7, 2)  # a second head, in another layer
        page.wait_for_function("() => location.search.includes('rm_knock=L3.H5%2C+L7.H2')", timeout=30000 * SLOW)
        page.get_by_text("With 2 heads set to zero").wait_for(timeout=30000 * SLOW)
        settled(page, timeout=60)
        click_cell(page, 3, 5)  # the same cell again: back
        page.wait_for_function("() => location.search.includes('rm_knock=L7.H2')", timeout=30000 * SLOW)
        page.wait_for_function("() => document.querySelector('.st-key-rm_knock input').value === 'L7.H2'")
        settled(page, timeout=60)
        page.get_by_role("button", name="Patch every head (30 × 9 = 270 runs)").click()
        page.locator("[data-testid='stProgress']").wait_for(timeout=60000 * SLOW)  # its progress
        wait_for_chart(page, "Each head patched in", timeout=120)
        page.get_by_text("logit(·Anna) − logit(·Tom) is +").wait_for(
            timeout=60000 * SLOW
        )  # (its numbers: test_app_effects)
        page.get_by_text("Looking most at ·Anna from the last row").wait_for(timeout=60000 * SLOW)
        settled(page, timeout=60)
        screenshot(page, "effects-patched-1400")
        # (axe: the section's grid and fields read normally on MiniLM in tests/test_accessibility.py, its map on the
        # slide below; here the labels of every chart, none cut or over another)
        check_view(page, "does this head matter?, read at 1400x900", axe=False)
        page.locator(".st-key-rm_patch_kind").get_by_text("residual stream").click()  # causal tracing
        page.get_by_role("button", name="Patch every layer and position").click()
        page.locator("[data-testid='stProgress']").wait_for(timeout=60000 * SLOW)
        wait_for_chart(page, "The residual stream patched in", timeout=120)
        page.get_by_text("Recovering most of it: layer").wait_for(timeout=60000 * SLOW)
        page.wait_for_function("() => location.search.includes('rm_patch_kind=residual+stream')", timeout=30000 * SLOW)
        settled(page, timeout=60)
        screenshot(page, "effects-residual-1400")


@pytest.mark.parametrize(("width", "height", "scheme"), [(1400, 900, "light"), (1920, 1080, "dark")])
def test_the_slide_fits_with_each_map_at_an_awkward_sentence(server, browser, width, height, scheme):
    """Each kind's map on the slide (the residual stream's slanted tokens take more room than the heads' labels), at
    an awkward sentence; at the default sentence the deck walks it (tests/test_browser.py, "Does this head
    matter?")."""
    with lent_tab(browser, width, height, scheme) as page:
        for kind, chart, label in (
            ("heads", "Each head patched in", "Patch every head (30 × 9 = 270 runs)"),
            ("residual+stream", "The residual stream patched in", "Patch every layer and position"),
        ):
            address = f"present=true&rm_model=smollm2&rm_knock=L24.H4&rm_patch_kind={kind}&rm_slide={SLIDE}"
            page.goto(f"{server}/real_model?{address}&text={quote(AWKWARD)}")
            page.get_by_text("With 1 head set to zero").wait_for(timeout=120000 * SLOW)
            settled(page, timeout=60)  # the run ended: the map drawn, or the button that measures it
            button = page.get_by_role("button", name=label)
            if button.count():  # not measured on this server yet
                button.click()
            wait_for_chart(page, chart, timeout=120)
            settled(page, timeout=60)
            screenshot(page, f"effects-slide-{kind.split('+')[0]}-awkward-{width}-{scheme}")
            assert page.evaluate(OVERFLOW) <= 2, f"the slide of the {kind} needs scrolling at {width}x{height}"
            check_view(page, f"does this head matter?, the {kind}, presented at {width}x{height} {scheme}")


def test_a_deck_view_that_does_not_name_a_choice_shows_its_default_going_back(server, browser):
    """The deck "Does this head matter?": view 4 patches the residual stream, view 3 names no kind. Back from 4 to 3
    with ←, the kind shown is the heads' (the default), as the server reads it: a choice only taken out of the
    session kept its option on screen while the server drew the heads' button (ui/decks.py _forget). And view 1,
    the first on its page, has its slide in the address (a link copied there opened the page's first slide)."""
    with lent_tab(browser, 1400, 900) as page:
        page.goto(f"{server}/decks")
        page.locator(".st-key-deck_shipped_head-effects button").click()
        page.get_by_role("button", name="▶ Present from view 1").click()
        for index in range(1, 5):
            page.get_by_text(f"view {index} of 4").wait_for(timeout=60000 * SLOW)
            settled(page, timeout=60)
            if index == 1:  # the slide the deck names, in the address to copy: a link to the view shown
                address_holds(page, "rm_slide=What+every+head+does")
            page.keyboard.press("ArrowRight" if index < 4 else "ArrowLeft")
        page.get_by_text("view 3 of 4").wait_for(timeout=60000 * SLOW)
        settled(page, timeout=60)
        kind = page.locator(".st-key-rm_patch_kind")
        assert kind.get_by_role("radio", name="heads").is_checked(), "the heads are the view's kind"
        assert not kind.get_by_role("radio", name="residual stream").is_checked()
        assert page.get_by_role("button", name="Patch every layer and position").count() == 0
