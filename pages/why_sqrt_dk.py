"""Why √d_k: the variance of a dot product grows with d_k; dividing by √d_k keeps the softmax soft."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from figures.heatmap import escape
from figures.stages import scaling_figures
from ui.controls import current_settings
from ui.show import apply_presentation, cached_scaling, friendly_errors, show_figure, style_for, trace_for

D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

with friendly_errors():
    settings = current_settings()
    apply_presentation(settings)
    style = style_for(settings)
    st.title("Why divide by √d_k?")
    st.markdown(
        "Rolling one die gives a number you can predict; adding up 100 dice spreads far wider "
        "(variance ≈ 100 × 2.9). A dot product q·k adds up d_k products, so its variance is about d_k. "
        "Feed such wide numbers to a softmax and one key takes almost all the weight. "
        "Dividing by √d_k brings the variance back to 1."
    )
    left, right = st.columns(2)
    n_keys = left.slider("keys per softmax row", 2, 256, 16, key="sq_keys", bind="query-params")
    samples = right.slider("samples", 200, 5000, 2000, step=100, key="sq_samples", bind="query-params")
    result = cached_scaling(D_KS, n_keys, samples, settings.config.seed)
    variance, peaks = scaling_figures(result, style)
    left, right = st.columns(2)
    with left:
        show_figure(variance, "sq-variance")
    with right:
        show_figure(peaks, "sq-peaks")
    st.dataframe(
        {
            "d_k": result.d_ks,
            "Var(q·k)": np.round(result.var_unscaled, 2),
            "Var(q·k/√d_k)": np.round(result.var_scaled, 3),
            "max weight unscaled": np.round(result.max_weight_unscaled, 3),
            "max weight scaled": np.round(result.max_weight_scaled, 3),
        },
        hide_index=True,
    )

    st.subheader("Your sentence, with and without scaling")
    scaled = trace_for(settings, scaled=True)
    unscaled = trace_for(settings, scaled=False)
    query = st.selectbox(
        "query token",
        range(scaled.n_tokens),
        format_func=lambda i: f"{i}: {scaled.tokens[i]}",
        key="sq_query",
        bind="query-params",
    )
    tokens = [escape(t) for t in scaled.tokens]
    figure = go.Figure(
        [
            go.Bar(name=f"scaled (÷√{scaled.d_k})", x=list(range(len(tokens))), y=scaled.weights[0, query].numpy()),
            go.Bar(name="not scaled", x=list(range(len(tokens))), y=unscaled.weights[0, query].numpy()),
        ]
    )
    figure.update_layout(
        barmode="group",
        title=f"attention weights of “{tokens[query]}” (head 1, d_k = {scaled.d_k})",
        xaxis={"tickvals": list(range(len(tokens))), "ticktext": tokens},
        yaxis={"range": [0, 1.05], "title": "weight"},
        height=420,
        font={"size": style.font_size - 2},
    )
    show_figure(figure, "sq-row")
    st.markdown(
        f"Row entropy (normalized): **{float(scaled.normalized_entropy[0, query]):.2f}** scaled vs "
        f"**{float(unscaled.normalized_entropy[0, query]):.2f}** unscaled; max weight "
        f"**{float(scaled.max_weight[0, query]):.2f}** vs **{float(unscaled.max_weight[0, query]):.2f}**. "
        "Raise d_k in the sidebar and watch the unscaled row turn one-hot."
    )
