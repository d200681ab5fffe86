"""Self-Attention Explorer: the entry script. Run with `make run` (see README).

It draws the sidebar (whose values persist across pages and live in the URL) and hands over
to the chosen page. All computation is in attention_core/, all figures in figures/.
"""

import streamlit as st

from ui.controls import run_through_app_py, sidebar
from ui.show import CHART_TEXT_CSS

st.set_page_config(page_title="Self-Attention Explorer", page_icon="👁️", layout="wide")
run_through_app_py()
st.html(CHART_TEXT_CSS)  # style only: takes no room on the page

# Each page's address is its file name (/why_sqrt_dk): Streamlit's older multipage mode, which a fresh
# server starts in (see run_through_app_py), names pages the same way, so a shared link finds its page.
pages = [
    st.Page("pages/walkthrough.py", title="Walkthrough", icon=":material/arrow_forward:", default=True),
    st.Page("pages/multihead.py", title="Multi-head", icon=":material/view_module:"),
    st.Page("pages/why_sqrt_dk.py", title="Why √d_k", icon=":material/functions:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
    st.Page("pages/real_model.py", title="Real model", icon=":material/psychology:"),
]
sidebar()
st.navigation(pages).run()
