"""The Real model page's masks after MLA: windows, sinks and sparse top-k measured on the model.

The sweep (attention_core/models/sparse.py) runs in the model worker once per server, model and length of text
(512, 1,024 or 2,048 tokens); its points are kept for every session, so a page that shows them again runs
nothing, and on disk (attention_core/models/kept.py), so that a server started again measures them in a moment."""

from __future__ import annotations

import threading

import streamlit as st

from app_pages.real_model.loading import model_worker
from app_pages.real_model.long_text import linked
from attention_core.composed import parse_mask
from attention_core.masks import SINKS
from attention_core.models.sparse import (
    BUDGETS,
    COMPOSED_SECONDS,
    SKIP_BLOCK,
    SWEEP_LENGTHS,
    SWEEP_SECONDS,
    SWEEP_TOKENS,
    SWEPT,
    plan,
    sweep,
)
from figures.glossary import link
from figures.sweep import (
    LABELS,
    heads_losing_most,
    lost_figure,
    mask_name,
    reference,
    rows_lost_figure,
    sparse_sentence,
    streaming_sentence,
    sweep_figure,
)
from ui.links import check_choice
from ui.live_chart import show_figure
from ui.screen import slide_columns
from ui.show import style_for


@st.cache_resource(show_spinner=False)
def kept_points() -> tuple[dict, threading.Lock]:
    """Every server's sweeps, (model, device, tokens) -> {(mask, budget): Point}, and one lock: one sweep at a
    time."""
    return {}, threading.Lock()


def measured(key: str, device: str, tokens: int, start: bool) -> list | None:
    """The sweep's points over the text's first `tokens` tokens, run now (with a progress bar) if `start` and not
    yet kept; None if not run."""
    store, one_at_a_time = kept_points()
    done = store.setdefault((key, device, tokens), {})
    if len(done) < len(plan()):
        if not start:
            return None
        bar = st.progress(0.0, text="Waiting for another reader's sweep of this model…")
        with one_at_a_time:
            total = len(plan())
            bar.progress(len(done) / total, text=f"Measuring: {len(done)} of {total} passes…")
            shown = lambda d, t: bar.progress(d / t, f"Measuring: {d} of {t} passes…")  # noqa: E731
            sweep(model_worker(), key, device, done, shown, tokens)
        bar.empty()
    return [done[point] for point in plan()]


def show_mask_sweep(key: str, device: str, info, settings) -> None:
    """The section (read normally) or the slide: loss against keys kept, the words, the heads that lose most."""
    presentation = settings.present
    if not presentation:
        st.header("After MLA: windows, sinks and sparse attention, measured")
    if not info.causal:
        st.info(f"{info.title} is an encoder: it predicts no next token, so there is no loss for a mask to raise.")
        return
    intro = st.empty()  # the words first, then the length they name, chosen below them
    tokens = sweep_length(info, presentation)
    if tokens is None:
        return
    if not presentation:
        intro.markdown(
            f"Each mask keeps only some keys for every query, inside every layer of {info.title}: the last w "
            f"({link('sliding window')}), the first {SINKS} tokens and the last w ({link('sinks', 'attention sink')} "
            f"+ window, StreamingLLM), or the k keys scored highest ({link('sparse attention')}: top-k per head; "
            f"DeepSeek-V3.2's DSA picks one set per layer). The text is the first {tokens:,} tokens of this "
            f"app's user guide; the model is run once per mask and budget ({len(plan())} passes, several at once)."
        )
    points = measured(key, device, tokens, start=False)
    if points is None:  # a click, not a visit, spends the minutes (a slide walk passes by without one)
        place = st.empty()  # the button, then nothing once it has measured
        start = place.button(
            f"Measure every mask ({len(plan())} passes over {tokens:,} tokens, about {SWEEP_SECONDS[tokens]} on "
            "2 cores; a moment where this machine kept them)"
        )
        points = measured(key, device, tokens, start)
        if points is not None:
            place.empty()
    if points is None:
        st.caption("Not measured yet on this server. Once measured, every reader sees it at once.")
        if not presentation:
            show_composed(key, device, info, tokens)
        return
    words_place, figure_place = slide_columns() if presentation else (st.container(), st.container())
    style = style_for(settings, side_by_side=presentation, slide=presentation)
    with figure_place:
        show_figure(sweep_figure(points, style), "rm-sweep")
    with words_place:
        full = reference(points)
        if presentation:
            st.markdown(f"As trained: **{full.loss:.2f} nats** a token over {tokens:,} tokens.")
        else:
            st.markdown(
                f"As trained, {info.title} loses **{full.loss:.2f} nats** a token on the text's {tokens - 1:,} "
                "predictions. The chart is how much more it loses with each mask."
            )
        st.markdown(streaming_sentence(points, short=presentation))
        st.markdown(sparse_sentence(points, short=presentation))
        chosen = choose_point(points, presentation)
        st.markdown(f"Losing most weight under {mask_name(chosen)}: {heads_losing_most(chosen)}.")
    if not presentation:
        show_composed(key, device, info, tokens)
        show_figure(lost_figure(chosen, style_for(settings)), "rm-sweep-lost")
        show_figure(rows_lost_figure(chosen, style_for(settings)), "rm-sweep-rows")
        st.dataframe(
            [
                {
                    "mask": LABELS.get(p.mask, "full causal"),
                    "budget": p.budget or None,
                    "keys a row keeps": p.keys_kept or None,
                    "loss (nats)": round(p.loss, 3),
                    "over full": round(p.loss - full.loss, 3),
                    "mean weight lost": round(float(p.lost.mean()), 3),
                }  # fmt: skip
                for p in points
            ],
            hide_index=True,
        )


COMPOSE_DEFAULT = "causal & (window 16 | sinks 4)"


def composed_point(key: str, device: str, written: str, tokens: int, start: bool):
    """A composed mask's point over the text's first `tokens` tokens, measured now (one pass) if `start` and not
    yet kept for this server; else None."""
    store, _ = kept_points()
    done = store.setdefault((key, device, tokens, "composed"), {})
    if written not in done and start:
        with st.spinner("Measuring: one pass…"):
            done[written] = model_worker().composed_point(key, device, written, tokens)
    return done.get(written)


def show_composed(key: str, device: str, info, tokens: int) -> None:
    """Your own mask on the model: a composition of FlexAttention's pieces, its loss against full causal attention,
    the keys its rows keep and the blocks a kernel skips."""
    st.subheader("Your own mask, measured")
    written = st.text_input(
        "a composed mask (FlexAttention's pieces)",
        value=COMPOSE_DEFAULT,
        key="rm_compose",
        bind="query-params",
        max_chars=200,
        help="causal, window w, sinks s, prefix p, document (each sentence of the text), dilated s; & (and), "
        "| (or), parentheses. Taken with the model's own causal mask.",
    )
    try:
        written = parse_mask(written or COMPOSE_DEFAULT).written()
    except ValueError as error:
        st.error(str(error))
        return
    point, full = (composed_point(key, device, w, tokens, start=False) for w in (written, "causal"))
    if point is None or full is None:
        start = st.button(
            f"Measure this mask (two passes: it and full causal attention, about {COMPOSED_SECONDS[tokens]})",
            key="rm_compose_go",
        )
        point, full = (composed_point(key, device, w, tokens, start) for w in (written, "causal"))
    if point is None:
        return
    words = parse_mask(written).words()
    st.markdown(
        f"With **{words}** in every layer, {info.title} loses **{point.loss:.2f} nats** a token, "
        f"{point.loss - full.loss:+.3f} over full causal attention. Each row keeps at most {point.kept_most} of the "
        f"{tokens:,} keys ({point.kept_mean:.1f} on average); cut into FlexAttention's blocks of "
        f"{SKIP_BLOCK}×{SKIP_BLOCK}, a kernel skips {point.skipped:.0%} of them (full causal attention alone skips "
        f"the blocks above the diagonal)."
    )


def sweep_length(info, presentation: bool) -> int | None:
    """The tokens of text the sweep measures: a choice of SWEEP_LENGTHS up to the model's own context, kept in the
    address (a slide reads the address's, or 512). None, said, where the model's context is shorter than all."""
    lengths = [n for n in SWEEP_LENGTHS if n <= info.max_positions]
    if not lengths:
        st.info(
            f"{info.title} reads at most {info.max_positions:,} positions; the sweep measures {SWEEP_TOKENS} tokens "
            "or more."
        )
        return None
    check_choice("rm_sweep_tokens", "text length (tokens)", [str(n) for n in lengths])  # named on a slide too
    if presentation:  # a slide has no room for the choice: the address's (a value refused above is gone from it)
        chosen = str(linked("rm_sweep_tokens", SWEEP_TOKENS))
        return int(chosen) if chosen in {str(n) for n in lengths} else lengths[0]
    return st.columns(3)[0].selectbox(
        "text length (tokens)",
        lengths,
        key="rm_sweep_tokens",
        bind="query-params",
        help="the first 512, 1,024 or 2,048 tokens of the user guide (each at most the model's own context); each "
        "length is measured once per server",
    )


def choose_point(points, presentation: bool):
    """The mask and budget whose heads are named (and drawn, read normally): choices kept in the address, a value
    no choice has named with what is allowed. A slide has no room for them: it names the heads of the session's
    choice, else the address's (which writes a mask by its label)."""
    check_choice("rm_sweep_mask", "mask", [LABELS[mask] for mask in SWEPT])
    check_choice("rm_sweep_budget", "budget", [str(b) for b in BUDGETS])
    if presentation:
        mask = linked("rm_sweep_mask", SWEPT[0])
        mask = {LABELS[m]: m for m in SWEPT}.get(mask, mask)  # the address writes a mask by its label
        budget = str(linked("rm_sweep_budget", BUDGETS[0]))
        budget = int(budget) if budget.isdigit() else BUDGETS[0]
    else:
        left, right = st.columns(2)
        mask = left.selectbox("mask", SWEPT, format_func=LABELS.get, key="rm_sweep_mask", bind="query-params")
        budget = right.selectbox("budget (w or k)", BUDGETS, key="rm_sweep_budget", bind="query-params")
    by = {(p.mask, p.budget): p for p in points}
    return by.get((mask, budget), by[SWEPT[0], BUDGETS[0]])
