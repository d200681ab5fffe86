"""Every colour scale the app offers reads under the three colour-vision deficiencies (figures/palettes.py)."""

import numpy as np
import plotly.colors
import pytest

from figures.palettes import ADJACENT_DE, DEFAULT_PALETTE, MASKED_DE, PALETTES, STEPS, colours
from figures.style import MASKED_GREY
from tests.colour_vision import MACHADO, delta_e, lab, simulate

VISION = ("normal", *MACHADO)
SCALES = [(palette.key, diverging) for palette in PALETTES.values() for diverging in (False, True)]
GREY = [float(v) for v in MASKED_GREY.removeprefix("rgb(").removesuffix(")").split(",")]


def seen(rgb, vision: str) -> np.ndarray:
    return np.asarray(rgb, dtype=float) if vision == "normal" else simulate(rgb, vision)


def test_ciede2000_matches_sharmas_published_pairs():
    """Pairs 1, 7 and 17 of Sharma, Wu & Dalal's (2005) test data, to the four decimals they give."""
    pairs = [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425), ((50, 0, 0), (50, -1, 2), 2.3669),
             ((50, 2.5, 0), (73, 25, -18), 27.1492)]  # fmt: skip
    for first, second, expected in pairs:
        assert delta_e(first, second) == pytest.approx(expected, abs=1e-4)


def test_the_simulation_keeps_greys_and_takes_the_red_green_axis_away_for_the_red_green_kinds():
    """Machado's matrices leave a grey grey (each row sums to 1). Under protanopia and deuteranopia a red and a
    green lose their place on CIELAB's red-green axis a* (both turn yellow-brown); tritanopia keeps it."""
    grey = np.array([128.0, 128.0, 128.0])
    red, green = np.array([200.0, 30, 30]), np.array([60.0, 150, 30])
    assert lab(red)[1] > 40 and lab(green)[1] < -40
    for deficiency in MACHADO:
        assert np.allclose(simulate(grey, deficiency), grey, atol=0.5)
    for deficiency in ("protanopia", "deuteranopia"):
        assert abs(lab(simulate(red, deficiency))[1]) < 15 and abs(lab(simulate(green, deficiency))[1]) < 15
    assert lab(simulate(red, "tritanopia"))[1] > 40


@pytest.mark.parametrize(("key", "diverging"), SCALES)
@pytest.mark.parametrize("vision", VISION)
def test_neighbouring_steps_and_the_masked_grey_stay_apart(key, diverging, vision):
    steps = seen(colours(PALETTES[key].scale(diverging)), vision)
    apart = delta_e(lab(steps[:-1]), lab(steps[1:]))
    assert apart.min() >= ADJACENT_DE, f"{key} {'diverging' if diverging else 'sequential'}, {vision}: {apart.round(1)}"
    from_grey = delta_e(lab(steps), lab(seen(GREY, vision)))
    assert from_grey.min() >= MASKED_DE, f"the masked grey is {from_grey.min():.1f} from a {key} colour ({vision})"


def test_a_scale_that_fails_is_caught():
    """The check can fail: viridis's steps come closer than ADJACENT_DE under protanopia, and a grey scale
    holds the masked grey."""
    viridis = simulate(colours(plotly.colors.get_colorscale("Viridis")), "protanopia")
    assert delta_e(lab(viridis[:-1]), lab(viridis[1:])).min() < ADJACENT_DE
    greys = np.array(colours([[0, "rgb(255,255,255)"], [1, "rgb(0,0,0)"]]))
    assert delta_e(lab(greys), lab(GREY)).min() < MASKED_DE


def test_the_default_is_offered_and_every_palette_names_both_scales():
    assert DEFAULT_PALETTE in PALETTES
    assert len(PALETTES) >= 2
    for palette in PALETTES.values():
        assert palette.scale(False) and palette.scale(True) and palette.why
    assert len(colours(PALETTES[DEFAULT_PALETTE].scale(False))) == STEPS
