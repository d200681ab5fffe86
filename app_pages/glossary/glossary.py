"""Glossary: the words the other pages use, each with its own anchor (figures.glossary.link points here)."""

import streamlit as st

from app_pages.glossary.spec import SPEC
from figures.glossary import TERMS, anchor
from ui.show import friendly_errors
from ui.sidebar import current_settings
from ui.slides import Slides


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        spec = SPEC
        slides = Slides(spec.title, spec.slide_key, dict(spec.slides), settings.present)  # a slide per term
        slides.steer()
        if not settings.present:
            st.title("Glossary")
            st.caption("Every term links here from where it first appears on the other pages.")
        for term, definition in TERMS.items():
            if not slides.shows(anchor(term)):
                continue
            st.header(term, anchor=anchor(term))  # the anchor the other pages link to, and Leave returns to
            st.markdown(definition)


main()
