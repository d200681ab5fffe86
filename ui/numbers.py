"""The lectures' own numbers on the Walkthrough: tables to type X, W_Q, W_K, W_V, W_O into, and the
lecture example's printed numbers beside what the arithmetic gives.

Typed numbers live in the sidebar's typed-number fields (ui.controls.TYPED), so they are in the URL
and survive page switches; a table's edit writes the whole matrix back there as compact text.
"""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

from attention_core.lectures import pattern_for
from attention_core.matrices import EMPTY, TYPED_NAMES, can_type, typed_from_npz
from attention_core.training import LECTURE_SENTENCE, checkpoint_npz, load_lecture_model
from attention_core.variants import MHA, VARIANTS
from figures.stages import made
from figures.style import markdown_literal
from ui.controls import Settings, current_example
from ui.links import NUMBERS_FROM
from ui.pages import by_address, navigation_page
from ui.sidebar import numbers_from


def _copies(trace, name: str) -> list[np.ndarray]:
    """Every copy of a per-head matrix (none for a single one), as the tables write them back."""
    weight = trace.params[name]
    return [copy.cpu().double().numpy() for copy in weight] if weight.dim() == 3 else []


def _matrices(trace, head: int) -> dict[str, np.ndarray]:
    """What the tables start from: the trace's own X and those of its weights that can be typed (the copy of
    head `head` of the per-head ones)."""
    matrices = {"x": trace.x.cpu().double().numpy()}
    for name in TYPED_NAMES:
        weight = trace.params.get(name)
        if weight is not None:
            matrices[name] = (
                (weight[trace.copy_for(head, weight.shape[0])] if weight.dim() == 3 else weight).cpu().double().numpy()
            )
    return matrices


def _labels(name: str, shape: tuple[int, int], trace, base: int) -> tuple[list[str], list[str]]:
    rows, cols = shape
    if name == "x":
        return [f"{i + base} · {t}" for i, t in enumerate(trace.tokens)], [f"d{j + base}" for j in range(cols)]
    return [f"in {i + base}" for i in range(rows)], [f"out {j + base}" for j in range(cols)]


def _cells(matrix: np.ndarray) -> list[list[str]]:
    return [[f"{value:.6g}" for value in row] for row in matrix]


def _write_back(name: str, key: str, start: np.ndarray, columns: list[str], others: list, copy: int) -> None:
    """on_change of a table: apply its edits to the matrix it started from and store the typed text
    (every copy of a per-head matrix: the others keep the numbers they had)."""
    cells = _cells(start)
    for row, changes in st.session_state[key].get("edited_rows", {}).items():
        for column, value in changes.items():
            cells[int(row)][columns.index(column)] = EMPTY if value is None else f"{float(value):.6g}"
    blocks = [*map(_cells, others[:copy]), cells, *map(_cells, others[copy + 1 :])] if others else [cells]
    st.session_state[name] = "|".join(";".join(",".join(row) for row in block) for block in blocks)


def use_weights(data: bytes, trained: tuple[int, int] | None = None, **settings) -> None:
    """Put the weights of an .npz (the Training page's export, or one's own) into the typed-number fields and
    the sidebar: the sentence, the sizes they need, the variant MHA, and `settings` (e.g. causal, scaled).
    `trained`: (seed, step) of the Training page's run they come from, which the pages then name instead of
    "typed". A ValueError names what in the file cannot be used; then nothing is changed."""
    texts, sizes = typed_from_npz(data)
    st.session_state.update({**dict.fromkeys(TYPED_NAMES, ""), **texts, **sizes, "variant": MHA.key, **settings})
    typed = tuple((name, texts[name]) for name in TYPED_NAMES if texts.get(name))  # as Settings.typed reads them
    st.session_state[NUMBERS_FROM.key] = numbers_from(*trained, typed) if trained else ""


def _load_npz(key: str) -> None:
    """on_change of the uploader: load the file's weights, or keep the refusal to show it."""
    upload = st.session_state.get(key)
    st.session_state["npz_refusal"] = ""
    if upload is not None:
        try:
            use_weights(upload.getvalue())
        except ValueError as error:
            st.session_state["npz_refusal"] = f"{upload.name}: {error}"


def numbers_editor(trace, settings: Settings, head: int) -> None:
    """Tables to type the lecture's numbers into (small sizes only), starting from the trace shown.
    They are made only while the box is open (on_change="rerun"): five tables were a quarter of every
    Walkthrough rerun, open or not (README "A whole class at once"). The box opens by itself when numbers
    are typed; its key names that, so that typing the first number (or forgetting the last) opens (closes) it."""
    box = st.expander(
        "✎ Type your own numbers: X, W_Q, W_K, W_V, W_O",
        expanded=bool(settings.typed),
        key=f"numbers-{'typed' if settings.typed else 'drawn'}",
        on_change="rerun",
    )
    with box:
        if not box.open:
            return
        st.file_uploader(
            "Load weights (.npz: the Training page's export, or arrays x, w_q, w_k, w_v, w_o)",
            type=["npz"],
            key="load-npz",
            on_change=_load_npz,
            args=("load-npz",),
        )
        if st.session_state.get("npz_refusal"):
            st.warning(markdown_literal(st.session_state["npz_refusal"]), icon="📂")
        variant = VARIANTS[trace.variant]
        if not trace.params:
            st.caption(
                "No projections (Q = K = V = X): only X can be typed; choose another variant to type W_Q, W_K, W_V."
            )
        elif any(spec.name not in TYPED_NAMES for spec in variant.weights):
            st.caption(
                f"{variant.label}'s other weights are drawn from the seed: tables for X and "
                f"{', '.join(TYPED_NAMES[n] for n in TYPED_NAMES if n in trace.params)} only."
            )
        reason = can_type(settings.config, trace.n_tokens)
        if reason:
            st.caption(f"Tables appear for small sizes: {reason}.")
            return
        st.caption(
            "Every stage below is recomputed from these numbers. Edited tables go to the address bar, so the "
            "link restores them. A cleared cell is named until it holds a number again."
        )
        import pandas as pd  # here, not at the top: not on a fresh server's first page, for a box seldom opened

        matrices = _matrices(trace, head)
        names = [name for name in TYPED_NAMES if name in matrices]
        for place, name in zip(st.columns(len(names)), names, strict=True):
            start = matrices[name]
            rows, cols = _labels(name, start.shape, trace, settings.index_base)
            fingerprint = hashlib.blake2b(start.tobytes(), digest_size=6).hexdigest()
            key = f"edit-{name}-{head}-{fingerprint}"  # a new table whenever the numbers it starts from change
            others = _copies(trace, name) if name != "x" else []
            copy = trace.copy_for(head, len(others)) if others else 0
            with place:
                suffix = ""
                if others and len(others) > 1:
                    suffix = f" (head {head + 1})" if len(others) == trace.heads else f" (key/value head {copy + 1})"
                typed = trace.typed_as.split(" (")[0] if name in trace.given else "drawn"
                st.markdown(f"**{TYPED_NAMES[name]}**{suffix} · {typed}")
                st.data_editor(
                    pd.DataFrame(np.round(start, 6), index=rows, columns=cols),
                    key=key,
                    on_change=_write_back,
                    args=(name, key, start, cols, others, copy),
                    width="stretch",
                )
        if settings.typed:
            st.button(
                "Forget typed numbers",
                on_click=st.session_state.update,
                kwargs=dict.fromkeys(TYPED_NAMES, ""),
                key="forget_typed",
            )


def lecture_panel(trace) -> None:
    """For a lecture example: where it comes from, what was chosen here, and its printed numbers checked."""
    example = current_example(st.session_state)
    if example is None or not (example.notes or example.checks):
        return
    with st.expander(f"📝 Lecture {example.source}", expanded=True):
        for note in example.notes:
            st.markdown(f"- {note}")
        if example.checks is None:
            return
        checks = example.checks(trace)
        st.dataframe(
            [
                {
                    "": "✓" if check.agrees else "≠",
                    "quantity": check.quantity,
                    "the lecture prints": check.text(check.printed),
                    "computed here": check.text(check.computed),
                }
                for check in checks
            ],
            hide_index=True,
        )
        for check in checks:
            if check.note:
                st.caption(f"{'✓' if check.agrees else '≠'} {check.quantity}: {check.note}.")


def _use_lecture_model() -> None:
    """Lecture 002's trained model (the Training page's, at its default sizes) into the typed-number fields."""
    run = load_lecture_model().run
    checkpoint = run.checkpoints[-1]
    use_weights(
        checkpoint_npz(checkpoint, run, LECTURE_SENTENCE),
        trained=(run.config.seed, checkpoint.step),
        causal=run.config.causal,
        scaled=run.config.scaled,
    )


def pattern_note(trace, heads, presentation: bool = False, offer_place=None, key: str = "pattern") -> None:
    """Where a lecture example's point is a pattern that trained weights make (eat → Alice), say what its row
    does in `heads` (a head, or a range of them) with these weights; with random ones, that they have learned
    nothing, and offer trained ones: lecture 002's model for its sentence, a pretrained model (Real model page)
    for the others (in `offer_place`, on a slide the other column)."""
    pattern = pattern_for(trace.tokens)
    if pattern is None or not trace.params:  # no lecture pattern here, or no weights to have learned it (Q = K = V = X)
        return
    heads = [heads] if isinstance(heads, int) else list(heads)
    here = "; ".join(pattern.here_text(trace, h, most=not presentation) for h in heads)
    if not here:  # the sentence lacks the pattern's words
        return
    weights_are = made(set(trace.given), set(trace.params), trace.typed_as)
    if weights_are != "random":
        st.caption(f"{pattern.point_text(short=presentation)}. With these {weights_are} weights {here}.")
        return
    if presentation:  # a slide's words, not a box
        st.markdown(f"**Random weights** have learned nothing: here {here}. {pattern.point_text(short=True)}.")
    else:
        st.info(
            f"{pattern.point_text()}. These weights are random ({trace.drawn}): they have learned nothing, so "
            f"what this row shows is chance. Here {here}.",
            icon="🎲",
        )
    place = offer_place or st.container()
    if pattern.trained == "model":
        place.button(
            "Show it with trained weights",
            key=f"{key}-trained",
            on_click=_use_lecture_model,
            icon=":material/school:",
            help="Lecture 002's model, from the Training page",
        )
    else:
        place.page_link(
            navigation_page(by_address()["/real_model"].path),
            label="See this sentence in a trained model (Real model page)",
            icon=":material/psychology:",
        )
