"""The colour scales a reader can choose (the sidebar's "colours"), one record each.

A map of weights (0 to 1) is drawn in a sequential scale; a map of signed numbers (scores, Q, K, V) in a
diverging one, white-ish at 0. About 1 man in 12 in a lecture hall sees colours differently, so every
scale offered here is checked under protanopia, deuteranopia and tritanopia (tests/test_palettes.py
simulates each with Machado et al.'s 2009 matrices): nine steps along a scale stay apart by a CIEDE2000
colour difference of at least ADJACENT_DE, and the grey of a masked cell stays at least MASKED_DE from every
colour of every scale. (A masked cell also carries a ✕, so it never relies on colour alone.)

Left out because they fail that check: viridis (two steps 4.4 apart under protanopia) and plasma (3.9),
brown-teal BrBG (5.1 under protanopia), and greys (the masked grey is on the scale).
"""

from __future__ import annotations

import dataclasses

import plotly.colors

ADJACENT_DE = 5.0  # CIEDE2000 between neighbouring steps of nine: plainly different (about 2 is just noticeable)
MASKED_DE = 5.0  # CIEDE2000 between the masked grey and any colour of a scale
STEPS = 9  # how many colours along a scale the check compares


@dataclasses.dataclass(frozen=True)
class Palette:
    """A choice of colours: `sequential` for weights, `diverging` for signed numbers (Plotly scale names)."""

    key: str  # in the address: palette=inferno
    name: str  # in the sidebar
    sequential: str
    diverging: str
    why: str

    def scale(self, diverging: bool) -> list:
        """The scale as the [position, colour] list plotly.js draws (it does not know plotly.py's "_r")."""
        return plotly.colors.get_colorscale(self.diverging if diverging else self.sequential)


PALETTES = {
    palette.key: palette
    for palette in (
        Palette(
            "cividis",
            "cividis, red–blue",
            "Cividis",
            "RdBu_r",
            "Cividis (blue to yellow) was made to read the same with red-green colour blindness; red–blue "
            "(ColorBrewer) stays red and blue under all three kinds.",
        ),
        Palette(
            "inferno",
            "inferno, purple–orange",
            "Inferno",
            "PuOr_r",
            "More contrast, for a dim projector: inferno runs from black to pale yellow; purple–orange "
            "(ColorBrewer) for signed numbers.",
        ),
    )
}
DEFAULT_PALETTE = "cividis"


def colours(scale: list, steps: int = STEPS) -> list[tuple[float, float, float]]:
    """`steps` colours evenly along a scale, as (r, g, b) from 0 to 255."""
    sampled = plotly.colors.sample_colorscale(scale, [i / (steps - 1) for i in range(steps)], colortype="rgb")
    return [plotly.colors.unlabel_rgb(colour) for colour in sampled]
