"""Plotly figure builders for attention traces (no Streamlit here)."""
