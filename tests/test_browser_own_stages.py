"""A variant's own stage in a real browser, presented as a lecture shows it: gated attention's gate, the learned
sink's share (gpt-oss), differential attention's two maps and DeepSeek-V4's context turned back fit the screen at
1400x900 and 1920x1080, light and dark, at the default sentence and an awkward one, with their numbers as the
engine makes them; the stage whose formula the variant changes (the gated output, the softmax with a sink or as a
difference, V4's grouped output; its width does not depend on the sentence) at the default."""

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

SIDEBAR = {name: DEFAULTS[name] for name in ("d_model", "d_k", "seed", "init", "positional")}  # the rest as linked
# (variant, its own stage, the stages whose formula it changes, the own stage's chart, the part that chart draws)
OWN = [("gated", "gate", ("output",), "G = σ(X·W_G)", "gate"),
       ("learned_sink", "sink", ("weights",), "σ (sink's share)", "sink_share"),
       ("differential", "two_maps", ("weights",), "A₂", "weights_2"),
       ("deepseek_v4", "turn_back", ("output", "qkv", "projections", "cache"), "C turned back", "handed")]  # fmt: skip
LINKED = {"deepseek_v4": {"positional": "rotary"}}  # what a variant's stage needs beyond the sidebar's defaults


@pytest.mark.parametrize(("width", "height", "scheme"), SCREENS)
@pytest.mark.parametrize(("variant", "own", "formulas", "chart", "part"), OWN, ids=[row[0] for row in OWN])
def test_a_variants_own_stage_and_its_formula_fit_every_screen_with_the_engines_numbers(
    server, browser, variant, own, formulas, chart, part, width, height, scheme
):
    own_settings = LINKED.get(variant, {})
    link = "".join(
        [f"variant={variant}&heads=2&kv_heads=1&causal=true", *(f"&{k}={v}" for k, v in own_settings.items())]
    )
    with lent_tab(browser, width, height, scheme) as page:
        for text, named in ((DEFAULTS["text"], "default"), (AWKWARD, "awkward")):
            config = AttentionConfig(**(SIDEBAR | own_settings), variant=variant, heads=2, kv_heads=1, causal=True)
            trace = trace_sentence(text, config)
            for key in (own, *formulas) if named == "default" else (own,):  # the formulas' fit: one text
                page.goto(f"{server}/?present=true&text={quote(text)}&{link}&stage={quote(BY_KEY[key].label)}")
                page.get_by_role("heading", name=heading(key, trace)).wait_for(timeout=15000 * SLOW)
                if key == own:
                    wait_for_chart(page, chart)
                    want = (trace.parts[part] if part in trace.parts else getattr(trace, part))[0].numpy()
                    if want.shape == trace.mask.shape:  # a query × key map: a hidden cell is drawn grey, not a colour
                        want = np.where(trace.mask.numpy(), want, np.nan)
                    np.testing.assert_array_equal(chart_z(page, chart), want)
                settled(page)
                no_traceback(page)
                what = f"{variant} stage {key} at {width}x{height} ({named})"
                assert page.evaluate(OVERFLOW) <= 2, f"{what} needs scrolling"
                assert page.evaluate(FORMULA_CUT) == 0, f"the formula of {what} is cut"
                check_view_in_both_schemes(page, what, f"presentation-{variant}-{key}-{width}-{named}",
                                           other=other_scheme(width), axe=axe_at(width))  # fmt: skip


@pytest.mark.parametrize(("width", "height", "scheme"), SCREENS)
def test_compares_two_variants_slide_fits_every_screen(server, browser, width, height, scheme):
    """Compare's "two variants", presented: its two choices, each side's map, means and cache per token fit the
    screen (it once scrolled 190 pixels at 1400x900), for the default pair (the sidebar's MHA beside MLA) and for
    differential attention beside GQA (a map about 0 beside one from 0), and GQA beside the learned sink under the
    causal mask (whose means leave out row 1, said in the caption: once a line too many at both sizes)."""
    pairs = {"mla": "", "diff": "&cmp_variant_left=gqa&cmp_variant_right=differential&kv_heads=2",
             "sink": "&cmp_variant_left=gqa&cmp_variant_right=learned_sink&causal=true"}  # fmt: skip
    with lent_tab(browser, width, height, scheme) as page:
        for name, pair in pairs.items():
            page.goto(f"{server}/compare?present=true&heads=4&cmp_what=two+variants{pair}")
            page.get_by_text("KV cache:").first.wait_for(timeout=30000 * SLOW)
            settled(page)
            no_traceback(page)
            what = f"Compare's two variants ({pair or 'default'}) at {width}x{height}"
            assert page.evaluate(OVERFLOW) <= 2, f"{what} needs scrolling"
            check_view_in_both_schemes(page, what, f"presentation-compare-variants-{width}-{name}",
                                       other=other_scheme(width), axe=axe_at(width))  # fmt: skip
