"""A long text in a real browser at 4,096 tokens of SmolLM2 (issue 64): the slide a lecture shows (the head's
max-pooled map, its sentence and the needle's) fits 1400x900 and 1920x1080, light and dark, and reading it
normally draws the region at full resolution, the distances and every head's numbers. One pass for the whole
module: the server keeps the read, and every test after the first finds it."""

from __future__ import annotations

import json
from urllib.parse import quote

import numpy as np
import pytest

from tests.browser import (
    OVERFLOW,
    address_holds,
    chart_z,
    check_view_in_both_schemes,
    lent_tab,
    listen,
    no_traceback,
    settled,
    text_shown,
    wait_for_chart,
)
from tests.test_browser import SCREENS, axe_at, other_scheme

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("long")]

SLIDE = quote("A long text: sink and needle")
SINK = (25, 5)  # layer and head (from 0) that put 68 % of a row on the first token at this length, on average
LINK = (f"rm_model=smollm2&rm_long=true&rm_long_tokens=4096&rm_needle=true&rm_long_layer=layer+{SINK[0] + 1}"
        f"&rm_long_head=head+{SINK[1] + 1}")  # fmt: skip
OVERVIEW = "weights = the max of each 16×16 block of weights"
PASS = 600  # seconds: the first test waits for the 4,096-token pass (about 20 s alone, minutes in a full suite)


@pytest.mark.parametrize(("width", "height", "scheme"), SCREENS)
def test_the_long_texts_slide_shows_the_sink_and_the_needle_at_4096_tokens_and_fits(server, browser, width, height,
                                                                                   scheme):  # fmt: skip
    with lent_tab(browser, width, height, scheme) as page:
        page.goto(f"{server}/real_model?present=true&rm_slide={SLIDE}&{LINK}")
        wait_for_chart(page, OVERVIEW, timeout=PASS)
        cells = np.asarray(chart_z(page, OVERVIEW), dtype=float)
        assert cells.shape == (256, 256)
        # The sink: the first 16 keys' cell holds most of every row's weight, in the maximum's picture
        assert np.median(cells[:, 0]) > 0.5, np.median(cells[:, 0])
        text_shown(page, "of 4,096 (")  # the needle's sentence: where it is, what SmolLM2 answered, which heads
        text_shown(page, "A row puts")
        settled(page)
        no_traceback(page)
        assert page.evaluate(OVERFLOW) <= 2, f"the long text's slide needs scrolling at {width}x{height}"
        check_view_in_both_schemes(page, f"long text at 4,096 tokens, {width}x{height}", f"presentation-long-{width}",
                                   other=other_scheme(width), axe=axe_at(width))  # fmt: skip


class Runs:
    """What the server sends the page, read from its websocket (Streamlit's ForwardMsg): the key of every live chart
    sent, and how each run of the script ended (a whole run, or a fragment's: a part of the page run alone)."""

    def __init__(self, page):
        self.charts: list[str] = []
        self.finished: list[str] = []
        listen(page, "websocket", lambda socket: socket.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, str):
            return
        message = ForwardMsg.FromString(payload)
        if message.WhichOneof("type") == "script_finished":
            self.finished.append(ForwardMsg.ScriptFinishedStatus.Name(message.script_finished))
        elif message.WhichOneof("type") == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            if element.WhichOneof("type") == "bidi_component" and element.bidi_component.component_name == "live_chart":
                self.charts.append(element.bidi_component.id.split("-", 2)[2])  # "$$ID-<hash>-<key>"

    def clear(self) -> None:
        self.charts.clear()
        self.finished.clear()


def test_read_normally_the_region_the_distances_and_every_heads_numbers_are_drawn(server, page):
    runs = Runs(page)
    page.goto(f"{server}/real_model?{LINK}&rm_long_grid=true&rm_long_rows=4000-4096&rm_long_keys=1-64")
    wait_for_chart(page, OVERVIEW, timeout=PASS)
    region = np.asarray(chart_z(page, "weights of rows 4000–4096 over keys 1–64"), dtype=float)
    assert region.shape == (97, 64) and np.median(region[:, 0]) > 0.3  # the sink's own column, a cell a token
    wait_for_chart(page, "Where the weight goes", timeout=60)
    wait_for_chart(page, "Share on the first token, per layer and head", timeout=PASS)
    text_shown(page, "Sinks: ")
    no_traceback(page)
    # Another head, read normally, reruns the section alone (a fragment): its own charts are sent again, and not
    # one of the 30 layers' maps above it (a whole run, 2.3x the time: bench/bench_long_step.py)
    settled(page, timeout=60)
    assert any(not key.startswith("rm-long") for key in runs.charts), runs.charts  # a whole run: the page's maps too
    runs.clear()
    menu = page.locator(".st-key-rm_long_head [role='combobox']")
    menu.evaluate("box => box.scrollIntoView({block: 'center'})")  # at the window's edge its list has no room
    menu.click()
    page.get_by_role("option", name="head 3", exact=True).click()
    wait_for_chart(page, f"{OVERVIEW}", check=lambda state: "head 3" in state["title"] + state["subtitle"])
    settled(page)
    assert runs.finished == ["FINISHED_FRAGMENT_RUN_SUCCESSFULLY"], runs.finished
    assert runs.charts and all(key.startswith("rm-long") for key in runs.charts), runs.charts
    address_holds(page, "rm_long_head=head+3")  # the address follows a part of the page run alone
    no_traceback(page)
    # A box dragged on the overview, from the centre of one cell to another's, is the region drawn below: its
    # cells' tokens (16 a cell at 4,096), counted here from the cells, and cut to 256 a side where it is larger
    dragged(page, (240, 4), (255, 19))
    wait_for_chart(page, "weights of rows 3841–4096 over keys 65–320", timeout=60)
    typed = [page.get_by_label(field).input_value() for field in ("query rows", "key columns")]
    assert typed == ["3841-4096", "65-320"], typed
    address_holds(page, "rm_long_keys=65-320")
    # Back to the whole map, as a double-click does (Plotly's autorange; a double-click's two clicks were once
    # taken for two under load), which sends no region
    page.evaluate(f"Plotly.relayout(({OVERVIEW_PLOT})({json.dumps(OVERVIEW)}), "
                  "{'xaxis.autorange': true, 'yaxis.autorange': true})")  # fmt: skip
    page.wait_for_function(f"({OVERVIEW_PLOT})({json.dumps(OVERVIEW)})._fullLayout.xaxis.range[1] > 200")
    # A box thin along the keys zooms the rows alone (Plotly's way): every key, rows 1601-3216, each cut to 256
    dragged(page, (100, 0), (200, 0))
    wait_for_chart(page, "weights of rows 1601–1856 over keys 1–256", timeout=60)
    text_shown(page, "The region dragged, rows 1601–3216 × keys 1–4096, is more than 256 tokens a side")
    no_traceback(page)


# The client coordinates of the centres of the overview's cells (row, column), from Plotly's own axes as drawn.
OVERVIEW_PLOT = (
    "prefix => [...document.querySelectorAll('.js-plotly-plot')]"
    ".find(gd => (gd.data || []).some(t => t.name?.startsWith(prefix)))"
)  # as PLOT_STATE finds a map
CELL_CENTRES = (
    """([prefix, cells]) => {
  const gd = ("""
    + OVERVIEW_PLOT
    + """)(prefix);
  const box = gd.getBoundingClientRect(), x = gd._fullLayout.xaxis, y = gd._fullLayout.yaxis;
  return cells.map(([row, col]) => [box.left + x._offset + x.d2p(col), box.top + y._offset + y.d2p(row)]);
}"""
)


def dragged(page, start: tuple[int, int], end: tuple[int, int]) -> None:
    """A box dragged with the mouse on the overview, from the centre of cell `start` to that of `end` (row, column)."""
    page.evaluate(f"prefix => ({OVERVIEW_PLOT})(prefix).scrollIntoView({{block: 'center'}})", OVERVIEW)
    (x0, y0), (x1, y1) = page.evaluate(CELL_CENTRES, [OVERVIEW, [start, end]])
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=8)
    page.mouse.up()
