"""Presentation mode on screen: its CSS and the readable CSS of every page, the slides' sizes scaled to the
window, reduced motion, the bar that links every page, and a slide's two columns."""

from __future__ import annotations

import math

import streamlit as st
import streamlit.components.v2

from ui import decks, slides
from ui.pages import PAGES, navigation_pages

PRESENTATION_MAP_PIXELS = 400  # the tallest map in presentation mode: a stage fits a 1400 x 900 screen ...
DESIGNED_FOR = (1400, 900)  # ... the screen the slides' sizes are set for: on a larger one they are scaled up
SCALE_MOST = 1.5  # (1920 x 1080: 1.2, the smaller of 1920/1400 and 1080/900)
SCREEN_SCALE = "screen_scale"  # session state: that scale, from the size the browser's window says it has
SLIDE_COLUMNS = (2, 3)  # presentation mode: the words of a stage on the left, its figures on the right
SLIDE_FIGURE_PIXELS = 700  # ... unless its figures would be taller than this there: then full width, below
SLIDE_BAND = 6  # on a slide a map draws at most 6 dimensions a side (GPT-2's W_Q: 6 x 6 of 768 x 64, README)
# Presentation mode: no sidebar, and everything a projector needs larger. Constant CSS; no user text reaches it.
PRESENTATION_CSS = """
<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] { display: none; }
.block-container { padding-top: 3.6rem; padding-bottom: 1rem; max-width: 100%; }
.stMarkdown p, .stMarkdown li, [data-testid="stCaptionContainer"] p { font-size: 1.35rem !important; }
[data-testid="stPageLink"] p { font-size: 1.1rem !important; }
[data-testid="stPageLink"] a { padding-left: 0.3rem; padding-right: 0.3rem; }
.stButton button p, div[data-testid="stButtonGroup"] button p,
.stSelectbox div[data-baseweb="select"] div, .stSelectbox input, .stCode code { font-size: 1.25rem !important; }
.katex { font-size: 1.6em !important; }
[data-testid="stWidgetLabel"] p, [data-testid="stSliderThumbValue"] { font-size: 1.15rem !important; }
h1 { font-size: 2.2rem !important; } h2, h3 { font-size: 1.9rem !important; }
.live-chart-table { display: none; }
</style>
"""
# The slide bar's pills (one per slide, between ← previous and next →): smaller and closer than the page's other
# buttons, so that eleven fit the bar at 1400 x 900 (the Walkthrough's ran under "next →", the last cut to "tile").
# A page with more slides than fit gets a list instead (ui/slides.py pills_fit).
SLIDE_BAR_CSS = """
<style>
:is({bars}) button {{ padding-left: 0.55rem; padding-right: 0.55rem; }}
:is({bars}) button p {{ font-size: 1.1rem !important; }}
</style>
"""
# Text everybody can read (WCAG AA's 4.5:1, checked on every page by axe-core: tests/test_accessibility.py).
# - The charts' labels are not here: chart.js draws each chart's labels and paper together, in the page's colours as
#   they are when it draws (ui/live_chart/frontend/chart.js). A rule here that gave every label the page's text colour
#   (fill: currentColor) changed the labels the moment Streamlit repainted the page's text, seconds before its
#   background and the chart's paper: the dark scheme's light labels on white paper, 1.2:1 (seen in full suites).
# - Captions: Streamlit's grey is 3.88:1 on white. The page's text colour at 80% is over 6:1 in both themes.
# - The sidebar greys out the controls a page does not read: their labels were 2.26:1 (light), 3.34:1 (dark).
#   At 75% of the text colour they still look inactive and read at over 5:1.
# - A chosen pill's words were in the accent red on a tint of itself: 4.47:1 (light), 3.61:1 (dark). They take
#   the text colour; the tint and the red border still say which one is chosen. So does a slider's value
#   (3.91:1 in red on the dark page).
# And two rules for speed, which change nothing drawn (scripts/page_shots.py and compare_shots.py):
# - A chart off screen is skipped by the browser's style, layout and paint (its height is fixed: nothing moves).
#   The same for a whole stage off screen was tried and not kept (docs/design-notes.md, "A second look").
# - A stage read normally is a keyed container that carries its slide's mark (ui/show.py); the mark was an element of
#   its own, one gap above the stage: that gap is kept as the container's margin, and above it when "Leave" scrolls
#   to it.
READABLE_CSS = """
<style>
[data-testid="stCaptionContainer"] { color: inherit !important; opacity: 0.8; }
[data-testid="stWidgetLabel"][disabled] { color: inherit !important; opacity: 0.75; }
[data-testid="stWidgetLabel"][disabled] [data-testid="stMarkdownContainer"] { color: inherit !important; }
[data-testid="stButtonGroup"] button:is([aria-checked="true"], [data-selected="true"]),
[data-testid="stSliderThumbValue"] { color: inherit !important; }
.live-chart { content-visibility: auto; }
[data-testid="stVerticalBlock"][class*="st-key-slide-"] { margin-top: 1rem; scroll-margin-top: 1rem; }
</style>
"""


# Whether the reader's browser asks for reduced motion (prefers-reduced-motion): told by the browser once the page
# holding it is drawn, and again if it changes. ▶ play then steps once per click instead of running on.
_motion = st.components.v2.component(
    "reduced_motion",
    js="""export default function ({setStateValue}) {
  const query = window.matchMedia("(prefers-reduced-motion: reduce)");
  setStateValue("reduce", query.matches);
  query.onchange = () => setStateValue("reduce", query.matches);
}""",
)


# The browser window's size, told once the presentation bar is drawn and again after a resize (a projector
# plugged in): a slide then draws its maps for the screen it is on.
_screen = st.components.v2.component(
    "screen_size",
    js="""let told = "";
export default function ({setStateValue}) {
  const tell = () => {
    const size = [window.innerWidth, window.innerHeight];
    if (String(size) !== told) { told = String(size); setStateValue("size", size); }
  };
  tell();
  let timer;
  const resized = () => { clearTimeout(timer); timer = setTimeout(tell, 300); };
  window.addEventListener("resize", resized);
  return () => { clearTimeout(timer); window.removeEventListener("resize", resized); };
}""",
)


def screen_scale(size) -> float:
    """How much larger than DESIGNED_FOR a window of `size` ([width, height], as the browser told it) is: 1 for
    a smaller one or one not told (or told wrong), at most SCALE_MOST."""
    try:
        width, height = (float(side) for side in size)
    except (TypeError, ValueError):
        return 1.0
    if not (math.isfinite(width) and math.isfinite(height)):
        return 1.0
    return min(SCALE_MOST, max(1.0, min(width / DESIGNED_FOR[0], height / DESIGNED_FOR[1])))


def measure_screen() -> None:
    """Presentation mode: keep the scale of the browser's window in the session, for style_for. A page switch
    forgets what the component was told, and the browser tells its size again only when it changes: a run
    without a size keeps the scale the session has (a deck's view on another page was drawn at 1400 x 900 in a
    1920 x 1080 window)."""
    told = _screen(key="screen_size", on_size_change=lambda: None, height=0).get("size")
    if told is not None or SCREEN_SCALE not in st.session_state:
        st.session_state[SCREEN_SCALE] = screen_scale(told)


def slide_pixels(pixels: int) -> int:
    """A size set for a 1400 x 900 slide, on the screen presenting it (measure_screen)."""
    return round(pixels * st.session_state.get(SCREEN_SCALE, 1.0))


def reduced_motion() -> bool:
    """True when the browser asks for reduced motion (False until it has said)."""
    return bool(_motion(key="reduced_motion", on_reduce_change=lambda: None, height=0).get("reduce"))


def presentation_bar(page: str) -> None:
    """Presentation mode: large type, no sidebar, and on every page a way to every other page and a way out.
    Drawn by app.py above every page, so that a page switch keeps it (and the sidebar stays hidden). With a
    deck open (ui.decks), the bar says which of its views this is, and the view's note."""
    if not st.session_state.get("present"):
        slides.keys(False)  # once after leaving: back to the slide that was shown
        return
    with st.sidebar:  # hidden: it takes no room on a slide
        measure_screen()
    # The page's type (in rem) grows with the screen, as the figures do (style_for): a 1920 x 1080 projector shows a
    # 1400 x 900 slide larger, not in its corner. (CSS zoom would do it in one line, but moves Plotly's hovers.)
    scale = st.session_state.get(SCREEN_SCALE, 1.0)
    grown = f"<style>html {{ font-size: {100 * scale:.0f}%; }}</style>" if scale > 1 else ""
    bars = ", ".join(f".st-key-{spec.slide_key} [role=radiogroup]" for spec in PAGES if spec.slide_key)
    st.html(PRESENTATION_CSS + SLIDE_BAR_CSS.format(bars=bars) + grown)
    # A row that wraps, each link as wide as its label: at any width none is cut, and the way out is last.
    row = st.container(horizontal=True, vertical_alignment="center", gap="xsmall")
    with st.sidebar:  # ← → and Esc, in the (hidden) sidebar: they take no room on a slide
        slides.keys(True)
    for spec, link in zip(PAGES, navigation_pages(), strict=True):  # names only: icons would need two lines at 1400 px
        if spec.presented:
            row.page_link(link, label=spec.title, icon="")
    where, note = decks.where()
    if where:  # in the row, so that a slide keeps its height; the note in its tooltip (and on the Decks page)
        row.caption(where, help=note or None)
    row.space("stretch")  # the way out, at the right edge
    row.button(
        "+ view",
        key="deck_add_bar",
        on_click=decks.add_view,
        args=(page,),
        help="Add this view (page, settings, slide) to the deck: the Decks page.",
    )
    row.button("✕ Leave (Esc)", on_click=slides.leave, key="leave_presentation", help="Leave presentation mode")


def slide_columns() -> tuple:
    """Presentation mode's slide: a column for the words of a stage, and a wider one for its figures."""
    return tuple(st.columns(SLIDE_COLUMNS, gap="large"))
