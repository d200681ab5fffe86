"""A context vector as the weighted sum it is: one query token, term by term (lecture 000, Step 4)."""

from __future__ import annotations

import numpy as np

from figures.heatmap import Panel, heatmaps
from figures.style import DEFAULT_STYLE, Figure, Matrix, Style, as_numpy, shorten

TERMS_DRAWN = 24  # the largest weights drawn as rows; the sum below them is over every key


def context_terms(trace, head: int, query: int) -> list[tuple[int, str, float]]:
    """(position, key token, weight) for the keys one query row may see, in sentence order."""
    weights = as_numpy(trace.weights[head, query])
    visible = [True] * trace.n_tokens if trace.mask is None else trace.mask[query].tolist()
    return [(j, t, float(w)) for j, (t, w, ok) in enumerate(zip(trace.tokens, weights, visible, strict=True)) if ok]


def weighted_sum_text(trace, head: int, query: int, style: Style = DEFAULT_STYLE, limit: int = 12) -> str:
    """ "context(next) = 0.10 × v(The) + 0.50 × v(next) + ..." (the largest `limit` terms if the row is long)."""
    terms = context_terms(trace, head, query)
    shown = terms if len(terms) <= limit else sorted(terms, key=lambda t: -t[2])[:limit]
    parts = [f"{w:.2f} × v({token})" for _, token, w in shown]
    rest = "" if len(shown) == len(terms) else f" + … ({len(terms) - limit} smaller terms)"
    if trace.mask is not None and len(terms) < trace.n_tokens:
        rest += f"   (the {trace.n_tokens - len(terms)} later tokens are masked)"
    return f"context({trace.tokens[query]}, row {style.index(query)}) = " + " + ".join(parts) + rest


def context_sum_part(trace, head: int, query: int, style: Style = DEFAULT_STYLE) -> tuple[Panel, Matrix]:
    """The weighted sum, drawn: one row w_j·v_j per key, then their sum (= the context row); and its export."""
    weights = as_numpy(trace.weights[head, query])
    values = as_numpy(trace.v[head])
    order = np.argsort(-weights)[:TERMS_DRAWN] if len(weights) > TERMS_DRAWN else np.arange(len(weights))
    terms = np.vstack([weights[order, None] * values[order], as_numpy(trace.context[head, query])[None]])
    rows = [f"{weights[j]:.2f} × v({shorten(trace.tokens[j])})" for j in order]
    rows.append(f"= context({shorten(trace.tokens[query])})")
    panel = Panel(
        terms,
        f"context of “{shorten(trace.tokens[query], 24)}” as a weighted sum of value rows",
        row_labels=rows,
        x_title="value dimension",
        label_chars=40,  # the tokens inside are already cut to 16 characters
    )
    return panel, Matrix("weighted_sum", terms, rows, [f"d{style.index(j)}" for j in range(terms.shape[1])])


def context_sum_figure(trace, head: int, query: int, style: Style = DEFAULT_STYLE) -> Figure:
    """The weighted sum of one query token as a figure of its own."""
    return heatmaps([context_sum_part(trace, head, query, style)[0]], style)
