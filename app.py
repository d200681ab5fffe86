"""Self-Attention Explorer: the entry script. Run with `make run` (see README).

It checks the link, draws the sidebar (whose values persist across pages and live in the URL;
controls a page does not read are greyed out) and, in presentation mode, the bar that links every
page and leaves the mode, then hands over to the chosen page (app_pages/: a folder each, listed in
its __init__). All computation is in attention_core/, all figures in figures/, what pages share in ui/.
"""

import streamlit as st

from ui import live_chart

# The tab's icon, an eye drawn by the browser's emoji font. Written as an SVG with the emoji as a character
# reference, the page's first run skips Streamlit's emoji catalogue (docs/design-notes.md); a Material icon
# would be fetched from Google's servers, and nothing leaves the machine.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><text y=".9em" font-size="90">&#x1F441;</text></svg>'
)
# Once per session: the browser keeps the title, icon and layout across reruns and pages. Sent on every rerun, the
# same icon was decoded again and the title remade on every step of every knob (~8 ms of the browser's main thread:
# docs/design-notes.md, "The loop").
CONFIGURED = "page_configured"
if not st.session_state.get(CONFIGURED):
    st.session_state[CONFIGURED] = True
    st.set_page_config(page_title="Self-Attention Explorer", page_icon=FAVICON, layout="wide")
# The browser fetches and compiles plotly.js while the server imports torch (below): a second less to the first
# heatmap on a fresh server (bench/bench_open.py).
live_chart.preload()

from attention_core.device import fit_threads  # noqa: E402
from ui.ending import end_quickly  # noqa: E402

fit_threads()  # no more threads than this server's cores (a container's quota), before ui.traces counts them
end_quickly()  # a stopped server ends in about a second, not after a last sweep of its memory
from app_pages import BY_TITLE, PAGES, forget_other_pages, navigation_pages  # noqa: E402
from ui.class_bar import class_bar  # noqa: E402
from ui.classroom import in_turn, send_view, show_followed_view  # noqa: E402
from ui.decks import add_view, go_to_view  # noqa: E402
from ui.links import check_link, show_link_refusals  # noqa: E402
from ui.pages import drawn  # noqa: E402
from ui.screen import READABLE_CSS, presentation_bar  # noqa: E402
from ui.sidebar import sidebar  # noqa: E402

QUESTIONS_ON = tuple(spec.title for spec in PAGES if spec.questions)  # the pages a class's questions ask of
check_link()  # before any bound widget reads the URL: Streamlit drops the values it cannot use silently
st.html(READABLE_CSS)  # style only: takes no room on the page
page = st.navigation(navigation_pages())
drawn(page.title)  # the page of this session's runs, for the parts that draw themselves on a clock (ui/pages.py)
forget_other_pages(page.title)
show_followed_view()  # a follower's: the lecturer's new view, found by the class bar's last check
go_to_view(page.title)  # a deck's next view (→ past a slide's end) or the lecturer's, for a follower (ui/decks.py)
with in_turn():  # a class's followers' pages, drawn in turn when the lecturer steps (ui/classroom.py)
    sidebar(BY_TITLE[page.title].reads)
    st.sidebar.button(
        "+ add this view to the deck",
        key="deck_add",
        on_click=add_view,
        args=(page.title,),
        help="Adds this page, its settings and the slide shown to the open deck (the Decks page).",
    )
    presentation_bar(page.title)
    show_link_refusals()
    class_bar(page.title, QUESTIONS_ON)  # a follower checks the lecturer's view here, every second (ui/classroom.py)
    page.run()
    send_view(page.title)  # a lecturer's view, as the page left it, goes to the class
