"""Self-Attention Explorer: the entry script. Run with `make run` (see README).

It checks the link, draws the sidebar (whose values persist across pages and live in the URL;
controls a page does not read are greyed out) and, in presentation mode, the bar that links every
page and leaves the mode, then hands over to the chosen page (ui/pages.py lists them). All
computation is in attention_core/, all figures in figures/.
"""

import streamlit as st

from ui.controls import check_link, run_through_app_py, show_link_refusals, sidebar
from ui.pages import BY_TITLE, PAGES, forget_other_pages
from ui.show import CHART_TEXT_CSS, presentation_bar

st.set_page_config(page_title="Self-Attention Explorer", page_icon="👁️", layout="wide")
run_through_app_py()
check_link()  # before any bound widget reads the URL: Streamlit drops the values it cannot use silently
st.html(CHART_TEXT_CSS)  # style only: takes no room on the page
page = st.navigation([spec.page() for spec in PAGES])
forget_other_pages(page.title)
sidebar(BY_TITLE[page.title].reads)
presentation_bar()
show_link_refusals()
page.run()
