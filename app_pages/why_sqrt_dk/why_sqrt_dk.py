"""Why √d_k: the variance of a dot product grows with d_k; dividing by √d_k divides it by d_k. Measured twice:
on random unit-variance vectors, and on the sidebar's sentence with W_Q, W_K drawn to keep q and k at unit variance."""

from __future__ import annotations

import dataclasses

import streamlit as st

from app_pages.why_sqrt_dk.spec import SPEC
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
from ui.links import check_choice, check_whole
from ui.live_chart import show_figure
from ui.show import friendly_errors, style_for
from ui.sidebar import current_settings
from ui.slides import Slides
from ui.traces import cached_scaling, cached_sentence_scaling

D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
INIT_D_KS = (4, 16, 64, 256, 1024)


def _query_picker(tokens: list[str], style) -> int:
    """The sentence's row shown (the sentence slide and the row slide both show it; drawn on whichever is shown)."""
    check_choice("sq_query", "query token", [f"{style.index(i)}: {t}" for i, t in enumerate(tokens)])
    query = st.selectbox(
        "query token",
        range(len(tokens)),
        format_func=lambda i: f"{style.index(i)}: {tokens[i]}",
        key="sq_query",
        bind="query-params",
    )
    return min(query or 0, len(tokens) - 1)


@dataclasses.dataclass(frozen=True)
class Sentence:
    """The sidebar's sentence as the experiment takes it: its first SENTENCE_TOKENS_MAX tokens, at its d_k."""

    tokens: list[str]
    cut: bool  # the sentence had more tokens
    d_k: int
    sinusoidal: bool  # the fair experiment's q and k are not rotated
    seed: int

    @classmethod
    def of(cls, settings) -> Sentence:
        tokens = tokenize(settings.text)
        config = settings.config
        return cls(
            tokens[:SENTENCE_TOKENS_MAX],
            len(tokens) > SENTENCE_TOKENS_MAX,
            config.d_k,
            config.positional == "sinusoidal",
            config.seed,
        )

    def scaling(self, settings):
        return cached_sentence_scaling(
            tuple(self.tokens), settings.config.d_model, self.sinusoidal, self.seed, self.d_k
        )


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        style = style_for(settings)
        half = style_for(settings, columns=2)
        spec = SPEC
        slides = Slides(spec.title, spec.slide_key, dict(spec.slides), settings.present)
        slides.steer()
        if slides.shows("idea"):
            idea_slide(settings)
        if slides.shows("dice"):
            dice_slide(settings, half)
        sentence, query = Sentence.of(settings), 0
        if slides.shows("sentence"):
            query = sentence_slide(sentence, settings, style, half)
        if slides.shows("row"):
            row_slide(sentence, settings, style, query)
        if slides.shows("init"):
            init_slide(sentence, settings)


def idea_slide(settings) -> None:
    """Dice: why a sum of d_k products spreads, and the one-line fix."""
    st.title("Why divide by √d_k?")
    st.markdown(
        "Rolling one die gives a number you can predict; adding up 100 dice spreads far wider (variance ≈ 100 × "
        "2.9). A dot product q·k adds up d_k products qᵢkᵢ: when each has variance 1, the sum has variance d_k. "
        "Feed such wide numbers to a softmax and one key takes almost all the weight. **The one-line reason for "
        "the fix:** Var(a·X) = a²·Var(X), so dividing q·k by √d_k divides its variance by d_k, back to 1."
    )
    if settings.present:
        st.latex(
            r"\operatorname{Var}(q\cdot k) = d_k \quad\Rightarrow\quad "
            r"\operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1"
        )


def dice_slide(settings, half) -> None:
    """1 · Random vectors: the variance of q·k and the largest weight against d_k, scaled and not."""
    if not settings.present:
        st.header("1 · Random vectors")
    left, right = st.columns(2)
    check_whole("sq_keys", "keys per softmax row", 2, 256)
    check_whole("sq_samples", "samples", 200, 5000, step=100)
    n_keys = left.slider("keys per softmax row", 2, 256, 16, key="sq_keys", bind="query-params")
    samples = right.slider("samples", 200, 5000, 2000, step=100, key="sq_samples", bind="query-params")
    result = cached_scaling(D_KS, n_keys, samples, settings.config.seed)
    if not settings.present:  # a slide says it in its claims below
        st.caption("q and k drawn with independent N(0, 1) entries; a larger d_k uses more of the same entries.")
    variance, peaks = scaling_figures(result, half)
    left, right = st.columns(2)
    with left:
        show_figure(variance, "sq-variance")
    with right:
        show_figure(peaks, "sq-peaks")
    st.markdown(" ".join(experiment_claims(result)))


def sentence_slide(sentence: Sentence, settings, style, half) -> int:
    """2 · The sidebar's sentence as a fair experiment; returns the query token chosen."""
    tokens, cut = sentence.tokens, sentence.cut
    scaling = sentence.scaling(settings)
    if not settings.present:
        st.header("2 · Your sentence, as a fair experiment")
    if cut:
        st.info(
            f"The sentence has {len(tokenize(settings.text))} tokens; this experiment uses the first "
            f"{SENTENCE_TOKENS_MAX}."
        )
    words, pick = st.columns([4, 1], vertical_alignment="bottom") if settings.present else (st, st.container())
    if settings.present:  # the same, as a slide says it
        words.markdown(
            f"Only d_k changes: X standardized, W_Q and W_K drawn N(0, 1/d_model), so q and k have unit "
            f"variance at every d_k. {scaling.draws} draws over {len(tokens)} tokens."
        )
    else:
        st.markdown(
            "Only d_k may change, so the sentence's X has each row standardized (mean 0, variance 1, as "
            "LayerNorm does before attention) and W_Q, W_K are drawn N(0, 1/d_model): every entry of q and k "
            f"then has variance 1, whatever d_k is. A larger d_k adds columns to the same W_Q and W_K. One draw "
            f"over {len(tokens)} tokens is too few numbers to measure a variance, so it is repeated with "
            f"{scaling.draws} draws. The sidebar's d_model, positional encoding and seed apply; its weight init "
            "does not (see below why)."
        )
    with pick:
        query = _query_picker(tokens, style)
    left, right = st.columns(2)
    with left:
        show_figure(
            variance_figure(
                scaling.d_ks,
                scaling.var_unscaled,
                scaling.var_scaled,
                "Your sentence: the variance of q·k against d_k",
                half,
            ),
            "sq-sentence-variance",
        )
    with right:
        top_u = [row[query] for row in scaling.max_weight_unscaled]
        top_s = [row[query] for row in scaling.max_weight_scaled]
        show_figure(
            peaks_figure(
                scaling.d_ks, top_u, top_s, f"The row of “{tokens[query]}”: its largest weight", half, over="draws"
            ),
            "sq-sentence-peaks",
        )
    st.markdown(" ".join(sentence_claims(scaling, query)))
    return query


def row_slide(sentence: Sentence, settings, style, query: int) -> None:
    """One row at the sidebar's d_k, scaled and not."""
    tokens, d_k = sentence.tokens, sentence.d_k
    scaling = sentence.scaling(settings)
    if settings.present:
        st.subheader(f"One row at d_k = {d_k}, scaled and not")
        query = _query_picker(tokens, style)
    unscaled, scaled = scaling.weights_unscaled[query].numpy(), scaling.weights_scaled[query].numpy()
    show_figure(row_figure(tokens, unscaled, scaled, d_k, query, style), "sq-row")
    st.markdown(
        f"At the sidebar's d_k = {d_k}, one draw: the row's largest weight is **{unscaled.max():.2f}** unscaled "
        f"and **{scaled.max():.2f}** scaled. Change d_k in the sidebar to move this row along the curves above."
    )


def init_slide(sentence: Sentence, settings) -> None:
    """Why the experiment draws its own W_Q and W_K: xavier's bound shrinks as d_k grows."""
    tokens, sinusoidal = sentence.tokens, sentence.sinusoidal
    st.subheader("Why not the sidebar's weights?")
    x = embed(tokens, settings.config.d_model, seed=settings.config.seed, positional=sinusoidal)
    by_init = entry_variance_by_init(x, INIT_D_KS, INIT_CHOICES, settings.config.seed)
    xavier = by_init["xavier"]
    st.markdown(
        "The experiment is fair only if q's and k's entries keep their size while d_k grows. The variance of "
        "q's entries for this sentence's X, drawn with each init at each d_k: with xavier init it goes from "
        f"**{xavier[0]:.2f}** at d_k = {INIT_D_KS[0]} to **{xavier[-1]:.3f}** at d_k = {INIT_D_KS[-1]}, because "
        "its bound √(6 / (d_model + d_k)) shrinks as d_k grows: a larger d_k then gives *smaller* scores and "
        "*flatter* rows, the opposite of the lesson, for a reason that has nothing to do with √d_k."
    )
    st.dataframe(
        [
            {"init": init, **{f"d_k = {d}": round(v, 3) for d, v in zip(INIT_D_KS, values, strict=True)}}
            for init, values in by_init.items()
        ],
        hide_index=True,
    )


main()
