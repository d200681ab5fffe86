"""Baseline for repaint timing: one slider, one small Plotly heatmap whose title carries the slider's value.

A copy of ../shared/yardstick/trivial_app.py, used where the workspace lacks it (bench/bench_repaint.py)."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

d_k = st.slider("d_k", 1, 64, 4)
z = np.random.default_rng(d_k).standard_normal((5, d_k))
st.plotly_chart(go.Figure(go.Heatmap(z=z), layout_title_text=f"Q [5x{d_k}]"), key="q")
