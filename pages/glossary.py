"""Glossary: the words the other pages use, each with its own anchor (figures.glossary.link points here)."""

import streamlit as st

from figures.glossary import TERMS, anchor
from ui.controls import current_settings
from ui.show import friendly_errors

with friendly_errors():
    settings = current_settings()
    st.title("Glossary")
    st.caption("Every term links here from where it first appears on the other pages.")
    for term, definition in TERMS.items():
        st.subheader(term, anchor=anchor(term))
        st.markdown(definition)
