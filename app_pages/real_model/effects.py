"""The Real model page's "Does this head matter?": heads knocked out and patched in, the effect beside the attention.

Every run is made in the model worker (attention_core/models/intervene.py, patching.py). Its answers are kept for
every session, as the traces are: a class that knocks out the same head runs the model once, and a patching map is
measured once per server and prompt pair."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from concurrent.futures import as_completed

import pandas as pd
import streamlit as st
import torch

from app_pages.real_model.loading import cached_model_trace, model_worker
from attention_core.models.intervene import Head, parse_heads, written
from attention_core.models.patching import patched
from figures.effects import (
    beside_sentences,
    embedding_sentence,
    found_heads_figure,
    knock_sentence,
    patch_figure,
    patch_sentence,
    top,
)
from figures.glossary import link
from ui.links import check_choice
from ui.live_chart import show_figure
from ui.memo import remember
from ui.screen import slide_columns, slide_pixels
from ui.show import style_for

CLEAN = "When Mary and John went to the store, John gave a drink to"  # the indirect-object prompt (Wang et al. 2022)
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
TARGET, FOIL = " Mary", " John"
AT_ONCE = 2  # layers patched side by side in the worker: one a core on 2 cores, and never every core of a larger one
MAPS_KEPT = 16  # patching maps kept for the server (each a few kilobytes)
KIND_ROW = 40  # pixels, on a 1400x900 slide: the row that chooses the kind, above the map
TOKEN_LABELS = 50  # pixels: how much taller the residual stream's slanted tokens are than the heads' "H1"
KINDS = {"heads": "heads", "residual": "residual stream"}  # as the address writes them
MODES = {"zero": "zero", "mean": "mean"}


@st.cache_resource(max_entries=32, show_spinner=False)
def knocked_out(key: str, device: str, text: str, heads: tuple[Head, ...], mode: str, target: str | None):
    """A knock-out, shared by every session (intervene.knock_out)."""
    return model_worker().knock_out(key, device, text, heads, mode, target)


@st.cache_resource(show_spinner=False)
def kept_maps() -> tuple[dict, threading.Lock]:
    """Every patching map measured on this server, (model, device, pair, kind) -> Patched, the newest MAPS_KEPT; and
    one lock: one map is measured at a time, so a second reader of the same pair waits for the first's and runs
    nothing, and a class patching at once does not queue the worker for every reader."""
    return {}, threading.Lock()


def patch_map(key: str, device: str, pair: tuple[str, str, str, str], kind: str, layers: int, start: bool):
    """The pair's map of `kind`, measured now (a layer a request, AT_ONCE at a time, with a progress bar) if `start`
    and not kept; None if not measured. A pair the worker refuses raises its ValueError, which names why."""
    (kept, one_at_a_time), found = kept_maps(), (key, device, pair, kind)
    if found in kept or not start:
        return kept.get(found)
    bar = st.progress(0.0, text="Waiting for another reader's patching map…")
    try:
        with one_at_a_time:
            if found not in kept:
                kept[found] = measured_map(model_worker(), key, device, pair, kind, layers, bar)
                while len(kept) > MAPS_KEPT:
                    kept.pop(next(iter(kept)))
    finally:
        bar.empty()
    return kept.get(found)


def measured_map(worker, key: str, device: str, pair: tuple[str, str, str, str], kind: str, layers: int, bar):
    """The map, measured in the model worker: the pair run once, then each layer's patches as a request, AT_ONCE
    under way (bench/bench_patch.py times it)."""
    prepared = worker.patch_prepare(key, device, pair)
    rows: list = [None] * layers
    waiting = iter(range(layers))

    def ask(layer: int):
        return worker.later("patch_rows", key, device, pair, kind, layer)

    asked = {ask(layer): layer for layer in itertools.islice(waiting, AT_ONCE)}
    for done in range(1, layers + 1):
        answer = next(as_completed(asked))  # the first of those under way to end
        rows[asked.pop(answer)] = answer.result()
        asked.update({ask(layer): layer for layer in itertools.islice(waiting, 1)})  # the next: AT_ONCE under way
        bar.progress(done / layers, text=f"Patching: {done} of {layers} layers…")
    return patched(prepared, kind, rows)


def show_effects(key: str, device: str, model_trace, settings) -> None:
    """The section (read normally) or the slide: a knock-out, then (a decoder's) the patching map and the heads it
    finds beside where they look."""
    info, presentation = model_trace.info, settings.present
    if not presentation:
        st.header("Does this head matter? Knock it out, patch it in")
        st.markdown(
            "Where a head looks is not what it does: a head can put most of its weight on one token and change "
            f"nothing. To ask what it does, change its output and measure the prediction: "
            f"{link('ablation')} sets a head's output to zero or to its mean; {link('activation patching')} copies "
            "it from a run on a clean prompt into a run on a corrupted one and measures how much of the "
            f"{link('logit difference')} comes back."
        )
    words, figure = slide_columns() if presentation else (st.container(), st.container())
    with words:  # on a slide: the words left, the map (or the top tokens) right
        knocked = knock_section(key, device, info, settings.text, presentation)
    with figure:
        if not info.causal:
            st.info(
                f"{info.title} is an encoder: it predicts no next token, so no logit difference to patch. A "
                "knock-out moves its sentence embedding."
            )
            return
        found = patch_section(key, device, info, settings, presentation)
        if found is None and knocked is not None and presentation:
            top_tokens(knocked)
    if found is not None and presentation:
        with words:
            st.markdown(patch_sentence(found))


def knock_section(key: str, device: str, info, text: str, presentation: bool):
    """The heads typed (or clicked on the grid), the mode and the token followed; what the knock-out does."""
    if not presentation:
        st.subheader("Knock heads out")
    left, right = st.columns([3, 2])
    typed = left.text_input(
        "heads to knock out",
        key="rm_knock",
        bind="query-params",
        max_chars=200,
        placeholder="L3.H5, L7.*",
        help=f"L3.H5 is layer 3's head 5; L7.* every head of layer 7 (layers 1 to {info.n_layers}, heads 1 to "
        f"{info.heads}); commas between. Read normally, a click on the grid below adds or takes away a head.",
    )
    check_choice("rm_knock_mode", "set each to", list(MODES.values()))
    mode = right.radio(
        "set each to", list(MODES), format_func=MODES.get, key="rm_knock_mode", bind="query-params", horizontal=True
    )
    target = None
    if info.causal:
        target = st.text_input(
            "follow the token (empty: the model's own first choice)",
            key="rm_knock_target",
            bind="query-params",
            max_chars=40,
            help="One token of the model's vocabulary, its leading space included (' Mary').",
        )
    try:
        heads = parse_heads(typed or "", info.n_layers, info.heads)
        # nothing chosen, no run: a page that is only read costs the model worker nothing more
        knocked = knocked_out(key, device, text, heads, mode or "zero", target or None) if heads or target else None
    except ValueError as error:
        st.error(str(error))
        return None
    said = st.container()
    if not presentation:  # read normally: the grid to click, and beside it what the knock-out does
        grid, said = st.columns([5, 4])
        with grid:
            heads_grid(info, heads)
    with said:
        if knocked is None:
            where = "type them above" if presentation else "type them above or click them on the grid"
            st.markdown(f"No head is knocked out yet: {where}, and the model's answer is read again without them.")
            return None
        if not info.causal:
            st.markdown(embedding_sentence(knocked))
            return knocked
        st.markdown(knock_sentence(knocked))
        if not presentation:
            top_tokens(knocked)
    return knocked


GRID_CELL = 36  # pixels: the width of a head's column in the grid (tests/test_browser_effects.py clicks by it)
GRID_LAYER = 64  # pixels: the width of the layer's column


def heads_grid(info, heads: tuple[Head, ...]) -> None:
    """Every layer and head as a table: ✕ marks a head knocked out; a click on a cell adds or takes it away."""
    columns = [f"H{h + 1}" for h in range(info.heads)]
    frame = pd.DataFrame(
        [
            [f"L{layer + 1}"] + ["✕" if Head(layer, h) in heads else "" for h in range(info.heads)]
            for layer in range(info.n_layers)
        ],
        columns=["layer", *columns],
    )
    widths = {"layer": st.column_config.TextColumn(width=GRID_LAYER)}
    widths.update({column: st.column_config.TextColumn(width=GRID_CELL) for column in columns})
    st.caption("Every layer (row) and head (column): a click knocks a head out, a second click brings it back.")
    st.dataframe(
        frame,
        key="rm_knock_grid",
        on_select=functools.partial(clicked, info.n_layers, info.heads),
        selection_mode="single-cell",
        hide_index=True,
        column_config=widths,
        width="content",
        height=min(36 + 35 * info.n_layers, 400),
    )


def clicked(layers: int, heads_per_layer: int) -> None:
    """A cell clicked on the grid: its head added to the typed heads, or taken away (a click on a layer's name does
    nothing); the grid's selection cleared, so that the same cell can be clicked again."""
    selection = st.session_state["rm_knock_grid"]["selection"]
    if not selection["cells"] or not str(selection["cells"][0][1]).startswith("H"):
        return
    row, column = selection["cells"][0]
    try:
        heads = set(parse_heads(st.session_state.get("rm_knock") or "", layers, heads_per_layer))
    except ValueError:  # the typed heads are wrong: a click starts them again
        heads = set()
    heads ^= {Head(int(row), int(column.removeprefix("H")) - 1)}
    st.session_state["rm_knock"] = written(tuple(sorted(heads)), layers, heads_per_layer)
    st.session_state["rm_knock_grid"] = {"selection": {"cells": []}}


def top_tokens(knocked) -> None:
    """The next token's top choices, before and after."""
    st.dataframe(
        [
            {"": rank, "before": b[0], "p before": round(b[1], 4), "after": a[0], "p after": round(a[1], 4)}
            for rank, (b, a) in enumerate(zip(knocked.before.top, knocked.after.top, strict=True), start=1)
        ],
        hide_index=True,
    )


def patch_section(key: str, device: str, info, settings, presentation: bool):
    """The prompt pair, the button that measures the map, the map, and the heads it finds beside their attention."""
    if not presentation:
        st.subheader("Patch: which heads carry the answer")
        st.markdown(
            f"Each head's output (or the residual stream at one layer and position, {link('causal tracing')}) is "
            "copied from the clean prompt's run into the corrupted prompt's run, one patch at a time. A share of 1 "
            "brings back the clean run's logit difference; 0 leaves the corrupted run's."
        )
        left, right = st.columns(2)
        clean = left.text_input("clean prompt", value=CLEAN, key="rm_clean", bind="query-params", max_chars=400)
        corrupted = right.text_input(
            "corrupted prompt", value=CORRUPTED, key="rm_corrupt", bind="query-params", max_chars=400
        )
        first, second, third = st.columns([1, 1, 2])
        target = first.text_input("target token", value=TARGET, key="rm_target", bind="query-params", max_chars=40)
        foil = second.text_input("foil token", value=FOIL, key="rm_foil", bind="query-params", max_chars=40)
    else:  # a slide has no room for the pair: the address's (or the classic one), read as the server has it
        params = st.query_params
        clean, corrupted = params.get("rm_clean", CLEAN), params.get("rm_corrupt", CORRUPTED)
        target, foil = params.get("rm_target", TARGET), params.get("rm_foil", FOIL)
        third = st
    check_choice("rm_patch_kind", "patch", list(KINDS.values()))
    kind = third.radio(
        "patch",
        list(KINDS),
        format_func=KINDS.get,
        key="rm_patch_kind",
        bind="query-params",
        horizontal=True,
        label_visibility="collapsed" if presentation else "visible",
    )
    pair, kind = (clean or CLEAN, corrupted or CORRUPTED, target or TARGET, foil or FOIL), kind or "heads"
    try:
        found = patch_map(key, device, pair, kind, info.n_layers, start=False)
        if found is None:  # a click, not a visit, spends the seconds (a slide walk passes by without one)
            runs = f"{info.n_layers} × {info.heads} = {info.n_layers * info.heads}" if kind == "heads" else None
            label = f"Patch every head ({runs} runs)" if runs else "Patch every layer and position"
            place = st.empty()  # the button, then nothing once measured
            found = patch_map(key, device, pair, kind, info.n_layers, place.button(label, key="rm_patch_go"))
            if found is not None:
                place.empty()
    except ValueError as error:
        st.error(f"patching: {error}")
        return None
    if found is None:
        st.caption("Not measured yet for this pair. Once measured, every reader of this server sees it at once.")
        return None
    style = style_for(settings, side_by_side=presentation, slide=presentation)
    if presentation:  # the kind's row above the map, and (the residual stream's) its tokens slanted above it
        shorter = KIND_ROW + (TOKEN_LABELS if kind == "residual" else 0)
        style = dataclasses.replace(style, max_map_pixels=style.max_map_pixels - slide_pixels(shorter))
    # What is drawn of a map is made once while the server keeps it, for every reader (ui.memo): not on each rerun
    show_figure(remember(found, ("map", style), lambda: patch_figure(found, style)), f"rm-patch-{kind}")
    if presentation:  # its words go in the slide's other column (show_effects)
        return found
    st.markdown(patch_sentence(found))
    if kind == "heads":
        read = style_for(settings)
        sentences, figure = remember(found, ("beside", read), lambda: beside(key, device, pair[0], found, read))
        for sentence in sentences:
            st.markdown(sentence)
        show_figure(figure, "rm-patch-found")
    return found


def beside(key: str, device: str, clean: str, found, style) -> tuple[list[str], object]:
    """Attention beside effect: the sentences, and the maps of the heads that recover most, from the clean prompt's
    trace (run in the worker once per prompt, as any sentence's)."""
    clean_trace = cached_model_trace(key, device, clean)
    last_rows = torch.stack([layer.weights[:, -1, :] for layer in clean_trace.layers])  # [layers, heads, n]
    layers = [clean_trace.layers[layer] for layer, _ in top(found.recovered)]
    return beside_sentences(found, last_rows, clean_trace.tokens), found_heads_figure(found, layers, style)
