"""Self-Attention Explorer: the entry script. Run with `make run` (see README).

It draws the sidebar (whose values persist across pages and live in the URL) and hands over
to the chosen page. All computation is in attention_core/, all figures in figures/.
"""

import streamlit as st

from ui.controls import sidebar

st.set_page_config(page_title="Self-Attention Explorer", page_icon=":material/visibility:", layout="wide")

pages = [
    st.Page("pages/walkthrough.py", title="Walkthrough", icon=":material/arrow_forward:", default=True),
    st.Page("pages/multihead.py", title="Multi-head", icon=":material/view_module:", url_path="multihead"),
    st.Page("pages/why_sqrt_dk.py", title="Why √d_k", icon=":material/functions:", url_path="why-sqrt-dk"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("pages/real_model.py", title="Real model", icon=":material/psychology:", url_path="real-model"),
]
sidebar()
st.navigation(pages).run()
