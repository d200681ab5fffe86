"""A context vector as the weighted sum it is: one query token, term by term (lecture 000, Step 4)."""

from __future__ import annotations

import numpy as np

from figures.describe import number
from figures.heatmap import Panel, heatmaps
from figures.style import DEFAULT_STYLE, Figure, Matrix, Style, as_numpy, shorten

TERMS_DRAWN = 24  # the largest weights drawn as rows; the sum below them is over every key


def context_terms(trace, head: int, query: int) -> list[tuple[int, str, float]]:
    """(position, key token, weight) for the keys one query row may see, in sentence order."""
    weights = as_numpy(trace.weights[head, query])
    visible = [True] * trace.n_tokens if trace.mask is None else trace.mask[query].tolist()
    return [(j, t, float(w)) for j, (t, w, ok) in enumerate(zip(trace.tokens, weights, visible, strict=True)) if ok]


def weighted_sum_text(trace, head: int, query: int, style: Style = DEFAULT_STYLE, limit: int = 12) -> str:
    """ "context(next) = 0.10 × v(The) + 0.50 × v(next) + ..." (the largest `limit` terms if the row is long). A
    weight too small for two decimals is written in two significant digits (0.0031), never a false 0.00."""
    terms = context_terms(trace, head, query)
    shown = terms if len(terms) <= limit else sorted(terms, key=lambda t: -t[2])[:limit]
    parts = [f"{number(w)} × v({token})" for _, token, w in shown]
    rest = "" if len(shown) == len(terms) else f" + … ({len(terms) - limit} smaller terms)"
    if trace.mask is not None and len(terms) < trace.n_tokens:
        rest += f"   (the {trace.n_tokens - len(terms)} later tokens are masked)"
    return f"context({trace.tokens[query]}, row {style.index(query)}) = " + " + ".join(parts) + rest


def context_sum_part(
    trace, head: int, query: int, style: Style = DEFAULT_STYLE, most: int = TERMS_DRAWN
) -> tuple[Panel, Matrix]:
    """The weighted sum, drawn: one row w_j·v_j per key (the `most` largest, largest first, where there are more),
    then their sum over every key (= the context row); and its export."""
    weights = as_numpy(trace.weights[head, query])
    values = as_numpy(trace.v[head])
    cut = len(weights) > most
    order = np.argsort(-weights, kind="stable")[:most] if cut else np.arange(len(weights))
    terms = np.vstack([weights[order, None] * values[order], as_numpy(trace.context[head, query])[None]])
    rows = [f"{number(weights[j])} × v({shorten(trace.tokens[j])})" for j in order]
    rows.append(f"= context({shorten(trace.tokens[query])})" + (f": all {len(weights)} terms" if cut else ""))
    panel = Panel(
        terms,
        # As the sum is written (context(he, row 15) = 0.44 × v(mad) + …): short enough for a slide's column, and
        # where a long token makes it too wide, " = " puts its second half on the subtitle line, not cut
        f"context({shorten(trace.tokens[query], 24)}) = Σ weight × v(token)",
        row_labels=rows,
        x_title="value dimension",
        label_chars=40,  # the tokens inside are already cut to 16 characters
    )
    return panel, Matrix("weighted_sum", terms, rows, [f"d{style.index(j)}" for j in range(terms.shape[1])])


def context_sum_figure(trace, head: int, query: int, style: Style = DEFAULT_STYLE) -> Figure:
    """The weighted sum of one query token as a figure of its own."""
    return heatmaps([context_sum_part(trace, head, query, style)[0]], style)
