"""The stages a variant declares in its folder (attention_core/variants/look.py, OwnStage): each drawn the same way,
its matrices one row per token for the head on screen, its sentences read off the same numbers. Adding such a
stage is its declaration alone; a stage that needs a drawing of its own (MLA's latent) has a builder here instead.
"""

from __future__ import annotations

import functools

from attention_core.variants import VARIANTS, OwnStage
from figures.stages.panels import head_title, laid_out, rows_panel, square_panel, tokens_of
from figures.stages.records import Built, Stage, brought_by_variant
from figures.style import Style, Title, as_numpy, markdown_literal, shape_text


def shown_parts(trace) -> dict:
    """What a declared stage may show, by name: the trace's parts, its weights and context, and what each head hands
    on."""
    handed = trace.context if trace.handed is None else trace.handed
    return {**trace.parts, "weights": trace.weights, "context": trace.context, "handed": handed}


def build_declared(own: OwnStage, trace, head: int, style: Style, query: int | None) -> Built:
    parts, n = shown_parts(trace), trace.n_tokens
    panels = []
    for shown in own.shown:
        values = parts[shown.part]
        values = as_numpy(values[head] if values.dim() == 3 else values)  # [n, width]: this head's, or shared
        title = Title(shown.title, shown.formula, shape_text(n, values.shape[1]))
        subtitle = head_title(trace, head) if parts[shown.part].dim() == 3 else ""
        if shown.columns == "key":  # a query × key map (differential attention's two softmaxes), hidden cells grey
            signed = bool((values < 0).any())  # a negative weight is drawn in the other colour, as such
            zrange = None if signed else (0.0, 1.0)
            map_ = square_panel(
                trace, values, shown.title, title, diverging=signed, masked=True, zrange=zrange, subtitle=subtitle
            )
            panels.append(map_)
        else:
            panels.append(rows_panel(trace, values, shown.title, title, style, subtitle, shown.columns))
    tokens = tuple(markdown_literal(token) for token in tokens_of(trace))  # quoted as written, never as markdown
    return Built(*laid_out(panels, style), own.says(parts, head, tokens))


def declared_stages() -> list[tuple[Stage, str]]:
    """Every registered variant's own stages, each with the key of the stage it follows; a stage two variants bring
    (the learned sink: gpt-oss's and DeepSeek-V4's) once."""
    owns = {own.key: own for variant in VARIANTS.values() for own in variant.own_stages}
    return [
        (
            Stage(
                own.key,
                own.label,
                own.title,
                own.formula,
                own.idea,
                brought_by_variant(own.key),
                functools.partial(build_declared, own),
                brought=True,
            ),
            own.after,
        )
        for own in owns.values()
    ]
