"""Why √d_k: the variance of a dot product grows with d_k; dividing by √d_k divides it by d_k. Measured twice:
on random unit-variance vectors, and on the sidebar's sentence with W_Q, W_K drawn to keep q and k at unit variance."""

import streamlit as st

from attention_core import INIT_CHOICES, embed, tokenize
from attention_core.scaling import SENTENCE_TOKENS_MAX, entry_variance_by_init
from figures.scaling import (
    experiment_claims,
    peaks_figure,
    row_figure,
    scaling_figures,
    sentence_claims,
    variance_figure,
)
from ui.controls import check_choice, check_whole, current_settings
from ui.show import cached_scaling, cached_sentence_scaling, friendly_errors, show_figure, style_for

D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
INIT_D_KS = (4, 16, 64, 256, 1024)

with friendly_errors():
    settings = current_settings()
    style = style_for(settings)
    half = style_for(settings, columns=2)
    st.title("Why divide by √d_k?")
    st.markdown(
        "Rolling one die gives a number you can predict; adding up 100 dice spreads far wider (variance ≈ 100 × 2.9). "
        "A dot product q·k adds up d_k products qᵢkᵢ: when each has variance 1, the sum has variance d_k. Feed such "
        "wide numbers to a softmax and one key takes almost all the weight. **The one-line reason for the fix:** "
        "Var(a·X) = a²·Var(X), so dividing q·k by √d_k divides its variance by d_k, back to 1."
    )

    st.header("1 · Random vectors")
    left, right = st.columns(2)
    check_whole("sq_keys", "keys per softmax row", 2, 256)
    check_whole("sq_samples", "samples", 200, 5000, step=100)
    n_keys = left.slider("keys per softmax row", 2, 256, 16, key="sq_keys", bind="query-params")
    samples = right.slider("samples", 200, 5000, 2000, step=100, key="sq_samples", bind="query-params")
    result = cached_scaling(D_KS, n_keys, samples, settings.config.seed)
    st.caption("q and k drawn with independent N(0, 1) entries; a larger d_k uses more of the same entries.")
    variance, peaks = scaling_figures(result, half)
    left, right = st.columns(2)
    with left:
        show_figure(variance, "sq-variance")
    with right:
        show_figure(peaks, "sq-peaks")
    st.markdown(" ".join(experiment_claims(result)))

    st.header("2 · Your sentence, as a fair experiment")
    tokens = tokenize(settings.text)
    if len(tokens) > SENTENCE_TOKENS_MAX:
        st.info(f"The sentence has {len(tokens)} tokens; this experiment uses the first {SENTENCE_TOKENS_MAX}.")
        tokens = tokens[:SENTENCE_TOKENS_MAX]
    d_k = settings.config.d_k
    sinusoidal = settings.config.positional == "sinusoidal"  # the fair experiment's q and k are not rotated
    sentence = cached_sentence_scaling(tuple(tokens), settings.config.d_model, sinusoidal, settings.config.seed, d_k)
    st.markdown(
        "Only d_k may change, so the sentence's X has each row standardized (mean 0, variance 1, as LayerNorm does "
        "before attention) and W_Q, W_K are drawn N(0, 1/d_model): every entry of q and k then has variance 1, "
        f"whatever d_k is. A larger d_k adds columns to the same W_Q and W_K. One draw over {len(tokens)} tokens is "
        f"too few numbers to measure a variance, so it is repeated with {sentence.draws} draws. The sidebar's "
        "d_model, positional encoding and seed apply; its weight init does not (see below why)."
    )
    check_choice("sq_query", "query token", [f"{style.index(i)}: {t}" for i, t in enumerate(tokens)])
    query = st.selectbox(
        "query token",
        range(len(tokens)),
        format_func=lambda i: f"{style.index(i)}: {tokens[i]}",
        key="sq_query",
        bind="query-params",
    )
    query = min(query or 0, len(tokens) - 1)
    left, right = st.columns(2)
    with left:
        show_figure(
            variance_figure(sentence.d_ks, sentence.var_unscaled, sentence.var_scaled,
                            "Your sentence: the variance of q·k against d_k", half),
            "sq-sentence-variance",
        )  # fmt: skip
    with right:
        top_u = [row[query] for row in sentence.max_weight_unscaled]
        top_s = [row[query] for row in sentence.max_weight_scaled]
        show_figure(
            peaks_figure(
                sentence.d_ks, top_u, top_s, f"The row of “{tokens[query]}”: its largest weight", half, over="draws"
            ),
            "sq-sentence-peaks",
        )
    st.markdown(" ".join(sentence_claims(sentence, query)))
    unscaled, scaled = sentence.weights_unscaled[query].numpy(), sentence.weights_scaled[query].numpy()
    show_figure(row_figure(tokens, unscaled, scaled, d_k, query, style), "sq-row")
    st.markdown(
        f"At the sidebar's d_k = {d_k}, one draw: the row's largest weight is **{unscaled.max():.2f}** unscaled and "
        f"**{scaled.max():.2f}** scaled. Change d_k in the sidebar to move this row along the curves above."
    )

    st.subheader("Why not the sidebar's weights?")
    x = embed(tokens, settings.config.d_model, seed=settings.config.seed, positional=sinusoidal)
    by_init = entry_variance_by_init(x, INIT_D_KS, INIT_CHOICES, settings.config.seed)
    xavier = by_init["xavier"]
    st.markdown(
        "The experiment is fair only if q's and k's entries keep their size while d_k grows. The variance of q's "
        "entries for this sentence's X, drawn with each init at each d_k: with xavier init it goes from "
        f"**{xavier[0]:.2f}** at d_k = {INIT_D_KS[0]} to **{xavier[-1]:.3f}** at d_k = {INIT_D_KS[-1]}, because its "
        "bound √(6 / (d_model + d_k)) shrinks as d_k grows: a larger d_k then gives *smaller* scores and *flatter* "
        "rows, the opposite of the lesson, for a reason that has nothing to do with √d_k."
    )
    st.dataframe(
        [{"init": init, **{f"d_k = {d}": round(v, 3) for d, v in zip(INIT_D_KS, values, strict=True)}}
         for init, values in by_init.items()],
        hide_index=True,
    )  # fmt: skip
