"""The Real model page's long text through AppTest (app_pages/real_model/long_text.py): what it draws and says is
what long_maps computes from a pass run here on one thread, as the model worker runs it; its estimate, its notice
of a cut text, and a link's bad values named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_core.long_maps import grid, overview, summaries
from attention_core.models.long import LongRequest, kept_bytes, long_text, read_long
from attention_core.models.worker import RUN_THREADS
from figures.long import grid_sentence, head_sentence
from tests.test_app import no_problems, panel, shown
from tests.test_app_real_model import open_page

pytestmark = [pytest.mark.models, pytest.mark.xdist_group("models")]

TOKENS = 512  # 2 tokens a cell a side: the maximum and the mean differ


@pytest.fixture(scope="module")
def here(smollm2):
    """The guide's first 512 tokens read here, on the worker's one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    try:
        return read_long(smollm2, LongRequest(long_text(), TOKENS))
    finally:
        torch.set_num_threads(threads)


def _markdown(at, start: str) -> str:
    found = [shown(m) for m in at.markdown if shown(m).startswith(start)]
    assert found, f"no sentence starting {start!r}"
    return found[0]


def _same_below_the_mask(drawn, computed, first_row: int = 0) -> None:
    """The map drawn holds the numbers computed where a query may see a key, and nothing (grey) where the causal
    mask hides the key."""
    drawn, computed = np.asarray(drawn, dtype=np.float64), computed.double().numpy()
    rows, keys = np.arange(first_row, first_row + drawn.shape[0])[:, None], np.arange(drawn.shape[1])[None, :]
    seen = keys <= rows
    np.testing.assert_allclose(drawn[seen], computed[seen], rtol=0, atol=0)
    assert np.isnan(drawn[~seen]).all()


def test_the_long_text_draws_and_says_what_long_maps_computes_from_the_pass(smollm2, here):
    trace, read = here
    at = open_page(rm_model="smollm2")
    at.selectbox(key="rm_long_tokens").set_value(TOKENS).run()
    estimate = [c.value for c in at.caption if c.value.startswith(f"Reading {TOKENS} tokens takes about")]
    assert estimate and f"its queries and keys take {kept_bytes(smollm2.info, TOKENS) / 1e6:,.0f} MB" in estimate[0]
    at.toggle(key="rm_long").set_value(True).run()
    no_problems(at)
    total = len(smollm2.tokenizer(long_text())["input_ids"])
    assert any(
        f"The text has {total:,} tokens" in i.value and f"the first {TOKENS} are read" in i.value for i in at.info
    )
    at.selectbox(key="rm_long_layer").set_value(20).run()
    at.selectbox(key="rm_long_head").set_value(4).run()
    no_problems(at)
    drawn = panel(at, "weights = the max of each 2×2 block of weights")
    _same_below_the_mask(drawn.z, overview(trace, 20, 4))
    said = _markdown(at, "A row puts")
    assert said == head_sentence(summaries(trace, 20, 4), trace.tokens, 1)
    region = panel(at, f"weights of rows {TOKENS - 63}–{TOKENS} over keys 1–64")
    _same_below_the_mask(region.z, trace.rows(20, 4, TOKENS - 64, TOKENS)[:, :64], first_row=TOKENS - 64)
    at.radio(key="rm_long_pool").set_value("mean").run()
    no_problems(at)
    drawn = panel(at, "weights = the mean of each 2×2 block of weights")
    _same_below_the_mask(drawn.z, overview(trace, 20, 4, "mean"))
    at.toggle(key="rm_long_grid").set_value(True).run()
    no_problems(at)
    assert _markdown(at, "Sinks:") == grid_sentence(grid(trace))


def test_a_bad_region_is_named_with_what_is_allowed(here):
    at = open_page(rm_model="smollm2")
    at.selectbox(key="rm_long_tokens").set_value(TOKENS).run()
    at.toggle(key="rm_long").set_value(True).run()
    at.text_input(key="rm_long_rows").set_value("200-abc").run()
    assert [e.value for e in at.error] == [
        "query rows '200-abc': write two positions as first-last, at most 256 tokens within 1-512"
    ]
    assert not at.exception
