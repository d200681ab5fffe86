"""Gated attention in a real browser, presented as a lecture shows it: its gate stage fits the screen at 1400x900 and
1920x1080, light and dark, at the default sentence and an awkward one, with the gate's numbers as the engine makes
them; its output stage (the formula with the gate, whose width does not depend on the sentence) at the default."""

from __future__ import annotations

from urllib.parse import quote

import numpy as np
import pytest

from attention_core import AttentionConfig, trace_sentence
from figures.settings import DEFAULTS
from figures.stages import BY_KEY, heading
from tests.browser import (
    OVERFLOW,
    SLOW,
    chart_z,
    check_view_in_both_schemes,
    lent_tab,
    no_traceback,
    settled,
    wait_for_chart,
)
from tests.test_browser import AWKWARD, FORMULA_CUT, SCREENS, axe_at, other_scheme

pytestmark = pytest.mark.browser

GATED_LINK = "variant=gated&heads=2&kv_heads=1&causal=true"
SIDEBAR = {name: DEFAULTS[name] for name in ("d_model", "d_k", "seed", "init", "positional")}  # the rest as linked


@pytest.mark.parametrize(("width", "height", "scheme"), SCREENS)
def test_the_gate_and_the_gated_output_fit_every_screen_with_the_engines_numbers(server, browser, width, height,
                                                                                 scheme):  # fmt: skip
    with lent_tab(browser, width, height, scheme) as page:
        for text, named in ((DEFAULTS["text"], "default"), (AWKWARD, "awkward")):
            trace = trace_sentence(text, AttentionConfig(**SIDEBAR, variant="gated", heads=2, kv_heads=1, causal=True))
            for key in ("gate", "output") if named == "default" else ("gate",):  # the formula's fit: one text
                page.goto(f"{server}/?present=true&text={quote(text)}&{GATED_LINK}&stage={quote(BY_KEY[key].label)}")
                page.get_by_role("heading", name=heading(key, trace)).wait_for(timeout=15000 * SLOW)
                if key == "gate":
                    wait_for_chart(page, "G = σ(X·W_G)")
                    np.testing.assert_array_equal(chart_z(page, "G = σ(X·W_G)"), trace.parts["gate"][0].numpy())
                settled(page)
                no_traceback(page)
                assert page.evaluate(OVERFLOW) <= 2, f"gated stage {key} needs scrolling at {width}x{height} ({named})"
                assert page.evaluate(FORMULA_CUT) == 0, f"the formula of {key} is cut at {width}x{height}"
                check_view_in_both_schemes(page, f"gated stage {key} at {width}x{height} ({named})",
                                           f"presentation-gated-{key}-{width}-{named}", other=other_scheme(width),
                                           axe=axe_at(width))  # fmt: skip
