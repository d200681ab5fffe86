"""A long text's maps (attention_core/long_maps.py): one head's overview, at most 256 × 256 cells, each the maximum
(or the mean) of the block of weights it covers, with the pooling and the block's size said in its title, and
a log colour scale on request (a weight of 1e-4 beside a sink's 0.9 is white on a linear one)."""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_core.long_maps import CELLS, cell_size, distance_bins
from attention_core.models.needle import top_heads
from figures.heatmap import Panel, heatmap, heatmaps
from figures.scaling import line_layout
from figures.style import DEFAULT_STYLE, Figure, Style, Title, escape, figure, shape_text

LOG_FLOOR = 1e-6  # on the log scale, a weight below this (a hidden key's 0 among them) is drawn at it


def cell_labels(n: int, size: int, base: int = 0) -> list[str]:
    """Each cell's tokens, as positions counted from `base`: "7" for a cell of one token, "16–31" for sixteen."""
    labels = []
    for first in range(0, n, size):
        last = min(first + size, n) - 1
        labels.append(str(first + base) if first == last else f"{first + base}–{last + base}")
    return labels


def overview_figure(
    values: torch.Tensor,
    n: int,
    pool: str,
    where: str,
    log: bool = False,
    causal: bool = True,
    style: Style = DEFAULT_STYLE,
) -> Figure:
    """The overview of one head (`values`: long_maps.overview's cells) over n tokens; `where`: which model, layer
    and head, said under the title. In a causal model a cell whose every key comes after every query is hidden by
    the mask: drawn grey, as every map draws what a mask hides, not as a weight of 0."""
    size = cell_size(n, CELLS)
    side = math.ceil(n / size)
    if values.shape != (side, side):
        raise ValueError(f"an overview of {n:,} tokens has {side} cells a side; got {list(values.shape)}")
    z = values.double().cpu().numpy()
    if log:
        z = np.log10(np.maximum(z, LOG_FLOOR))
    pooled = "one weight a cell" if size == 1 else f"the {pool} of each {size}×{size} block of weights"
    title = Title("log₁₀ weights" if log else "weights", pooled, shape_text(n, n))
    labels = cell_labels(n, size, style.index_base)
    panel = Panel(
        z,
        title,
        where,
        row_labels=labels,
        col_labels=labels,
        x_title="key tokens",
        y_title="query tokens",
        diverging=False,
        allowed=np.tri(side, dtype=bool) if causal else None,
        zrange=(math.log10(LOG_FLOOR), 0.0) if log else (0.0, 1.0),
        colorbar=True,
        drawn_most=CELLS,
    )
    return heatmaps([panel], style)


def region_figure(
    values: torch.Tensor,
    tokens: tuple[str, ...],
    rows,
    keys,
    where: str,
    causal: bool = True,
    style: Style = DEFAULT_STYLE,
) -> Figure:
    """One head's weights over a region, a cell per token pair (`values` [rows, keys]), the tokens on the axes as
    "position token"; in a causal model a key later than its query (hidden by the mask) drawn grey."""
    (first, stop), (left, right) = rows, keys
    z = values.double().cpu().numpy()
    if z.shape != (stop - first, right - left):
        raise ValueError(f"a region of rows {first}–{stop} and keys {left}–{right} is {stop - first}×{right - left}")
    base = style.index_base
    row_labels = [f"{i + base} {tokens[i]}" for i in range(first, stop)]
    col_labels = [f"{j + base} {tokens[j]}" for j in range(left, right)]
    allowed = np.arange(left, right)[None, :] <= np.arange(first, stop)[:, None] if causal else None
    title = Title(
        f"weights of rows {first + base}–{stop - 1 + base} over keys {left + base}–{right - 1 + base}",
        "",
        shape_text(stop - first, right - left),
    )
    panel = Panel(
        z,
        title,
        where,
        row_labels=row_labels,
        col_labels=col_labels,
        x_title="key tokens",
        y_title="query tokens",
        diverging=False,
        allowed=allowed,
        zrange=(0.0, 1.0),
        colorbar=True,
    )
    return heatmaps([panel], style)


def distance_figure(summary, n: int, where: str, style: Style = DEFAULT_STYLE):
    """One head's mean share of a row at each distance, in the log bins of long_maps.distance_bins."""
    names = [str(low) if low == high else f"{low}–{high}" for low, high in distance_bins(n)]
    shares = summary.by_distance.tolist()
    bars = dict(
        type="bar",
        x=names,
        y=shares,
        marker={"color": style.text_colour},
        hovertemplate="distance %{x}<br>share %{y:.3f}<extra></extra>",
    )
    xaxis = {"title": {"text": "distance from the query, in tokens (bins double)"}, "type": "category"}
    yaxis = {"title": {"text": "mean share of a row"}, "range": [0, 1]}
    return figure([bars], line_layout(style, f"Where the weight goes: {escape(where)}", xaxis, yaxis, 320, 0))


GRID_NAMES = {
    "sink": ("Share on the first token", 1.0),
    "local": ("Share on the last 16 tokens", 1.0),
    "reach": ("How far back the weight is (tokens)", None),
    "entropy": ("Entropy of a row (nats)", None),
}


def grid_figure(maps: dict, name: str, note: str, style: Style = DEFAULT_STYLE):
    """One of every head's four numbers (long_maps.grid) as a layer × head map."""
    values = maps[name].double().cpu().numpy()
    title, top = GRID_NAMES[name]
    layers, heads = values.shape
    return heatmap(
        values,
        title=f"{title}, per layer and head",
        subtitle=note,
        style=style,
        row_labels=[f"L{i + 1}" for i in range(layers)],
        col_labels=[f"H{j + 1}" for j in range(heads)],
        x_title="head",
        y_title="layer",
        diverging=False,
        zrange=(0.0, top if top is not None else max(1.0, float(values.max()))),
    )


# ---- Sentences about a long text's numbers (each computed from them; tests/test_long_page.py checks them) ----


def percent(share: float) -> str:
    """A share as a percentage that never says 0 or 100 of what is not: "under 0.1 %", "over 99.9 %"."""
    if share <= 0:
        return "0 %"
    if share >= 1:
        return "100 %"
    if share < 0.001:
        return "under 0.1 %"
    if share > 0.999:
        return "over 99.9 %"
    return f"{share:.1%}".replace("%", " %")


def head_sentence(summary, tokens: tuple[str, ...], base: int = 0) -> str:
    """One head's summary in words: its sink, how much is near, which keys receive most, how spread its rows are."""
    n = len(tokens)
    if n == 1:
        return "One token: its row has one key, itself, with all the weight."
    near = sum(
        share for (low, _), share in zip(distance_bins(n), summary.by_distance.tolist(), strict=True) if low < 16
    )
    top = summary.received.topk(min(3, n))
    receivers = ", ".join(
        f"{int(j) + base} “{tokens[int(j)]}” ({float(v):,.1f} rows' worth)"
        for v, j in zip(top.values, top.indices, strict=True)
    )
    entropy = float(summary.entropy.mean())
    return (
        f"A row puts {percent(summary.sink)} of its weight on the first token (“{tokens[0]}”) on average, and "
        f"{percent(near)} within 15 tokens of itself. The keys that receive the most, summed over the {n:,} rows: "
        f"{receivers}. Its rows' entropy is {entropy:.2f} nats on average (a row spread evenly over all "
        f"{n:,} keys: {math.log(n):.2f})."
    )


def grid_sentence(maps: dict) -> str:
    """Which heads are sinks, which are local, which reach farthest: counted from every head's four numbers."""
    sink, local, reach = (maps[name].double() for name in ("sink", "local", "reach"))
    total = sink.numel()
    heads = sink.shape[1]

    def named(flat: int) -> str:
        return f"L{flat // heads + 1} H{flat % heads + 1}"

    sinks = int((sink > 0.5).sum())
    locals_ = int((local > 0.5).sum())
    far = int(reach.flatten().argmax())
    layers = sorted({int(i) // heads + 1 for i in torch.nonzero((sink > 0.5).flatten()).flatten()})
    where = (
        f" (in layers {layers[0]}–{layers[-1]})" if len(layers) > 1 else f" (in layer {layers[0]})" if layers else ""
    )
    return (
        f"Sinks: {sinks} of {total} heads put over half of a row's weight on the first token{where}. Local: "
        f"{locals_} of {total} put over half on the last 16 tokens. Reaching farthest: {named(far)}, whose weight "
        f"is {float(reach.flatten()[far]):,.0f} tokens back on average."
    )


def needle_sentence(read, shares: torch.Tensor, title: str, expected: str, base: int = 0) -> str:
    """Where the needle is, what the model answered, and which heads look at the needle from the answering row."""
    first, stop = read.placed.needle
    needle_words = "".join(read.tokens[first:stop]).replace("·", " ").strip()
    top = ", ".join(f"L{layer + 1} H{head + 1} ({percent(share)})" for layer, head, share in top_heads(shares, 3))
    said = (
        f" {title} answers “{read.answer.strip()}”, which "
        f"{'holds' if expected.lower() in read.answer.lower() else 'does not hold'} “{expected}”."
        if read.causal and expected
        else f" {title} writes no answer (an encoder): its heads are read at the question's last token."
        if not read.causal
        else f" {title} answers “{read.answer.strip()}”."
    )
    return (
        f"The needle, “{needle_words}”, is tokens {first + base}–{stop - 1 + base} of {read.n_tokens:,} "
        f"({read.placed.depth * 100:.0f} % of the way into the text).{said} From the answering row (token "
        f"{read.placed.answer_row + base}, “{read.tokens[read.placed.answer_row]}”), the heads with the most weight on "
        f"the needle: {top}."
    )


def cache_sentence(info, n: int) -> str:
    """What the model's KV cache holds at this text's length: every layer's keys and values for each token."""
    if not info.causal:
        return f"{info.title} is an encoder: it reads the text whole and keeps no KV cache."
    per_token = info.n_layers * info.n_kv_heads * 2 * info.d_k * 4
    return (
        f"Its KV cache at these {n:,} tokens: {info.n_layers} layers × {info.n_kv_heads} key/value heads × "
        f"(K and V, {info.d_k} numbers each) × 4 bytes = {per_token:,} bytes a token, {per_token * n / 1e6:,.1f} MB "
        f"in float32 ({per_token * n / 2e6:,.1f} MB in bfloat16)."
    )
