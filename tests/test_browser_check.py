"""Check your attention in the browser (issue 41): the inputs downloaded from the page, a student's implementation
run on them (tests/test_checking.py's, in numpy), its outputs uploaded; the page says what matches, the first
stage that differs and the mistake, and names a file it will not read."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from tests.browser import SLOW, check_view, lent_tab, screenshot, settled
from tests.test_checking import step_student, student

pytestmark = pytest.mark.browser


def downloaded_inputs(page) -> tuple[dict, dict]:
    """The page's inputs, downloaded as a student downloads them: the arrays, and the settings they came with."""
    with page.expect_download() as download:
        page.get_by_role("button", name="⬇ inputs (.npz)").click()
    with np.load(download.value.path(), allow_pickle=False) as npz:
        inputs = {name: npz[name] for name in npz.files}
    return inputs, json.loads(str(inputs.pop("settings")))


def test_an_uploaded_implementation_is_checked_and_its_mistake_named(server, page, tmp_path):
    page.goto(f"{server}/check")
    inputs, settings = downloaded_inputs(page)
    upload = page.locator("input[type=file]")
    answers = [
        (None, "Every stage you handed in matches (9 of 9)."),
        ("softmax_queries", "The likely mistake: softmax over the wrong axis."),
        ("no_scaling", "The likely mistake: no scaling by √d_k."),
    ]
    for mistake, says in answers:
        mine = tmp_path / f"{mistake or 'right'}.npz"
        np.savez(mine, **student(inputs, settings, mistake))
        upload.set_input_files(str(mine))
        page.get_by_text(says).wait_for(timeout=30000 * SLOW)
        page.get_by_text(says).scroll_into_view_if_needed()  # the screenshot shows the verdict
        settled(page)
        check_view(page, f"check: {mistake or 'right'}", charts=False)
        screenshot(page, f"check-{mistake or 'right'}")
    off = student(inputs, settings)  # a softmax row that does not sum to 1: said in a sentence of its own
    off["pattern"] = off["pattern"].copy()
    off["pattern"][0, 4] *= 1.01
    np.savez(tmp_path / "row.npz", **off)
    upload.set_input_files(str(tmp_path / "row.npz"))
    page.get_by_text("Yours sums row [0, 4] to 1.01, not 1").wait_for(timeout=30000 * SLOW)
    check_view(page, "check: a row that does not sum to 1", charts=False)
    (tmp_path / "pickled.npz").write_bytes(pickle.dumps({"q": [1.0]}))  # a pickle named as an .npz
    upload.set_input_files(str(tmp_path / "pickled.npz"))
    page.get_by_text("Nothing was checked: pickled.npz").wait_for(timeout=30000 * SLOW)
    check_view(page, "check: a pickle refused", charts=False)


def test_one_decoding_step_is_checked_against_its_cache(server, page, tmp_path):
    page.goto(f"{server}/check?causal=true&chk_step=3")
    inputs, settings = downloaded_inputs(page)
    assert settings["causal"] is True
    mine = tmp_path / "step.npz"
    np.savez(mine, **step_student(inputs, settings, 2))  # token 3's row, counted from 1 on the page
    page.locator("input[type=file]").set_input_files(str(mine))
    page.get_by_text("Every stage you handed in matches (7 of 9).").wait_for(timeout=30000 * SLOW)
    check_view(page, "check: one decoding step", charts=False)


@pytest.mark.parametrize(("width", "height", "scheme"), [(1920, 1080, "dark"), (1400, 900, "light")])
def test_the_check_page_presented_is_readable_and_reachable_by_keys(server, browser, width, height, scheme, tmp_path):
    """On a projector the type grows: the loading snippet once ran past its block, which then scrolled sideways
    where no key could reach it (axe: scrollable-region-focusable). It wraps now."""
    with lent_tab(browser, width, height, scheme) as page:
        page.goto(f"{server}/check?present=true&variant=mla&heads=2")
        page.get_by_text("Check your attention").wait_for(timeout=60000 * SLOW)
        settled(page)
        check_view(page, f"check presented at {width}x{height} ({scheme})", charts=False)
        screenshot(page, f"check-presented-{width}-{scheme}")
        page.goto(f"{server}/check?present=true&heads=2&causal=true")  # the verdict, as the room sees it
        inputs, settings = downloaded_inputs(page)
        mine = tmp_path / "shifted.npz"
        np.savez(mine, **student(inputs, settings, "mask_sees_next"))
        page.locator("input[type=file]").set_input_files(str(mine))
        says = page.get_by_text("The likely mistake: causal mask shifted by one")
        says.wait_for(timeout=30000 * SLOW)
        settled(page)
        page.get_by_text("expected and yours").scroll_into_view_if_needed()  # the mistake and its row in view
        check_view(page, f"check's verdict presented at {width}x{height} ({scheme})", charts=False)
        screenshot(page, f"check-verdict-presented-{width}-{scheme}")
