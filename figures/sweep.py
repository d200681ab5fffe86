"""The masks after MLA measured on a real model (attention_core/models/sparse.py), drawn and said in words.

A point is read by its fields only (mask, budget, keys_kept, loss, lost [layers, heads]), so this module needs no
model: every sentence here is computed from the points it is given."""

from __future__ import annotations

import numpy as np

from attention_core.masks import MASKS, SINKS
from figures.heatmap import heatmap
from figures.scaling import line_layout
from figures.style import DEFAULT_STYLE, Figure, Style, figure

# Okabe-Ito's colours, told apart without colour too: each mask has its own marker and dash.
LINES = {
    "window": ("#D55E00", "circle", "solid"),
    "sinks": ("#0072B2", "square", "dash"),
    "top_k": ("#009E73", "diamond", "dot"),
    "dsa": ("#CC79A7", "triangle-up", "dashdot"),
}
LABELS = {"window": "sliding window w", "sinks": f"{SINKS} sinks + window w", "top_k": "top-k per head",
          "dsa": "DSA top-k (oracle indexer)"}  # fmt: skip


def reference(points) -> object:
    """The model as trained: the point with the full causal mask."""
    return next(point for point in points if point.mask == "causal")


def sweep_figure(points, style: Style = DEFAULT_STYLE, title: str = "What each mask costs the next token") -> Figure:
    """The loss's rise over full causal attention against the most keys a row keeps, one line per mask."""
    full = reference(points).loss
    traces, budgets = [], sorted({p.budget for p in points if p.budget})  # ticks: sinks' 4 more sit beside them
    for mask, (colour, symbol, dash) in LINES.items():
        mine = sorted((p for p in points if p.mask == mask), key=lambda p: p.keys_kept)
        if not mine:
            continue
        traces.append(
            dict(
                type="scatter",
                x=[p.keys_kept for p in mine],
                y=[p.loss - full for p in mine],
                mode="lines+markers",
                name=LABELS[mask],
                line={"color": colour, "dash": dash, "width": 3},
                marker={"symbol": symbol, "size": 10, "color": colour},
                hovertemplate=f"{LABELS[mask]}<br>keys kept %{{x}}<br>loss +%{{y:.3f}} nats<extra></extra>",
            )
        )
    xaxis = {"type": "log", "title": {"text": "keys a row keeps (log scale)"}, "tickmode": "array",
             "tickvals": budgets, "ticktext": [str(b) for b in budgets]}  # fmt: skip
    yaxis = {"title": {"text": "extra loss (nats)"}, "rangemode": "tozero"}
    return figure(traces, line_layout(style, title, xaxis, yaxis, legend_rows=2))


def lost_figure(point, style: Style = DEFAULT_STYLE) -> Figure:
    """[layers, heads]: the mean weight each head's rows gave the keys the point's mask drops."""
    lost = np.asarray(point.lost, dtype=np.float64)
    layers, heads = lost.shape
    return heatmap(
        lost,
        title=f"Weight lost per head: {mask_name(point)}",
        subtitle="mean over rows of the full softmax's weight on the keys dropped",
        style=style,
        row_labels=[f"L{i + 1}" for i in range(layers)],
        col_labels=[f"H{j + 1}" for j in range(heads)],
        x_title="head",
        y_title="layer",
        diverging=False,
        zrange=(0.0, 1.0),
    )


def rows_lost_figure(point, style: Style = DEFAULT_STYLE) -> Figure:
    """The weight each row loses under the point's mask (the mean over layers and heads), by the row's position."""
    rows = np.asarray(point.lost_rows, dtype=np.float64)
    colour, symbol, dash = LINES.get(point.mask, ("#6b6b6b", "circle", "solid"))
    trace = dict(type="scatter", x=list(range(1, len(rows) + 1)), y=rows.tolist(), mode="lines", name=mask_name(point),
                 line={"color": colour, "dash": dash, "width": 2},
                 hovertemplate="row %{x}<br>weight lost %{y:.3f}<extra></extra>")  # fmt: skip
    xaxis = {"title": {"text": "row (the query's position in the text)"}}
    yaxis = {"title": {"text": "weight lost"}, "range": [0, 1]}
    return figure([trace], line_layout(style, f"Weight each row loses: {mask_name(point)}", xaxis, yaxis, 300, 1))


def mask_name(point) -> str:
    """ "sliding window w = 8", "top-k per head k = 8", "full causal"."""
    if point.mask == "causal":
        return "full causal"
    return f"{LABELS[point.mask].removesuffix(' w')} {MASKS[point.mask].budget} = {point.budget}"


def heads_losing_most(point, count: int = 3) -> str:
    """ "L18 H4 (0.97), …": the heads whose rows lose the most weight under the point's mask."""
    lost = np.asarray(point.lost, dtype=np.float64)
    order = np.argsort(-lost, axis=None, kind="stable")[:count]
    heads = lost.shape[1]
    return ", ".join(f"layer {i // heads + 1} head {i % heads + 1} ({lost.flat[i]:.2f})" for i in order)


def streaming_sentence(points, short: bool = False) -> str:
    """StreamingLLM's finding put to this model: at each window, the window alone against it with the sinks.
    `short`: the slide's words."""
    full, by = reference(points).loss, {(p.mask, p.budget): p for p in points}
    windows = sorted(b for m, b in by if m == "window" and ("sinks", b) in by)
    if not windows:
        return ""
    w = windows[0]
    alone, with_sinks = by["window", w].loss - full, by["sinks", w].loss - full
    better = sum(by["sinks", b].loss < by["window", b].loss for b in windows)
    found = better == len(windows)
    if short:
        return (
            f"**Window of {w} alone: +{alone:.2f} nats; with {SINKS} sinks: +{with_sinks:.2f}.** Sinks help at "
            f"{better} of {len(windows)} windows{', as StreamingLLM found' if found else ''}."
        )
    verdict = (
        f"as StreamingLLM found, the first {SINKS} tokens are worth keeping"
        if found
        else "unlike StreamingLLM's models, the sinks do not help at every window"
    )
    return (
        f"A window of {w} keys alone raises the loss by {alone:.2f} nats; with the first {SINKS} tokens kept too, "
        f"by {with_sinks:.2f}. With the sinks the loss is lower at {better} of {len(windows)} windows: {verdict}."
    )


def sparse_sentence(points, short: bool = False) -> str:
    """Top-k per head against DSA's one choice per layer (and the window), at the smallest budget they share."""
    full, by = reference(points).loss, {(p.mask, p.budget): p for p in points}
    budgets = sorted(b for m, b in by if m == "top_k" and ("dsa", b) in by)
    if not budgets:
        return ""
    k = budgets[0]
    rise = {mask: by[mask, k].loss - full for mask in ("top_k", "dsa")}
    if short:
        return (
            f"At {k} keys chosen by score: top-k per head +{rise['top_k']:.2f}, DSA's one choice per layer "
            f"+{rise['dsa']:.2f} nats (its indexer: an oracle)."
        )
    window = f"the last {k} (a window) +{by['window', k].loss - full:.2f}, " if ("window", k) in by else ""
    return (
        f"At {k} keys a row: {window}the {k} each head scores highest +{rise['top_k']:.2f}, DSA's one choice for "
        f"all of a layer's heads +{rise['dsa']:.2f} nats. Its indexer here is an oracle: the layer's own q·k "
        "through a ReLU, summed over heads; DeepSeek-V3.2 trains a small one to imitate the attention."
    )
