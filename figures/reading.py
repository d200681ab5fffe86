"""Views that read a whole trained model: a per-head statistic over layers × heads, and attention rollout.
Plotly and NumPy only; they take the arrays they draw (a grid, a rolled-out map) and the labels."""

from __future__ import annotations

import html

import numpy as np
import torch

from attention_core.lectures import weight_text
from attention_core.statistics import ONLY_FIRST, Statistic, without_first
from figures.heatmap import heatmap
from figures.style import DEFAULT_STYLE, Figure, Style, markdown_literal

# The rollout's and the norm map's rows and columns drawn at most (more are averaged in blocks, and said): at the
# 128-token cap, drawn whole with their masked cells, the two took the Real model page over its 2 MB.
DRAWN_MOST = 64
SINK_SHARE = 0.5  # a head that puts at least this share of rows 2..n on token 1 is named an attention sink
ROLLOUT_TOP = 3  # tokens named in "what a token draws on"


def statistic_grid_figure(
    grid,
    statistic: Statistic,
    layer_names: list[str],
    head_names: list[str],
    note: str,
    style: Style = DEFAULT_STYLE,
    title: str = "",
) -> Figure:
    """A [layers, heads] grid of one statistic (attention_core.statistics), every value written where it fits;
    a cell with no value (no row it is defined on) is blank. `note`: which rows and which sequence."""
    values = np.asarray(grid, dtype=np.float64)
    top = statistic.top if statistic.top is not None else max(1.0, float(np.nanmax(values, initial=1.0)))
    return heatmap(
        values,
        title=title or f"{statistic.name.capitalize()} per layer and head",
        subtitle=note,
        style=style,
        row_labels=layer_names,
        col_labels=head_names,
        x_title="head",
        y_title="layer",
        diverging=False,
        zrange=(0.0, top),
    )


def token_map(
    matrix,
    tokens: tuple[str, ...],
    title: str,
    subtitle: str,
    axes: tuple[str, str],
    style: Style = DEFAULT_STYLE,
    **options,
) -> Figure:
    """A map with the tokens (or words) on both axes, coloured from 0: `axes` = (rows' title, columns' title)."""
    return heatmap(
        np.asarray(matrix, dtype=np.float64),
        title=title,
        subtitle=subtitle,
        style=style,
        row_labels=list(tokens),
        col_labels=list(tokens),
        y_title=axes[0],
        x_title=axes[1],
        diverging=False,
        **options,
    )


def averaged(tokens: tuple[str, ...]) -> str:
    """What a subtitle adds where a map of these tokens is drawn averaged down to DRAWN_MOST a side."""
    return f"; averaged down to {DRAWN_MOST}x{DRAWN_MOST}" if len(tokens) > DRAWN_MOST else ""


def first_hidden(matrix: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For display only: the first token's column greyed and each row re-normalized over the other keys
    (statistics.without_first); a row with weight on nothing else (a causal row 1) is greyed whole."""
    spread, kept = without_first(torch.from_numpy(matrix))
    allowed = allowed.copy()
    allowed[:, 0] = False
    allowed[~kept.numpy(), :] = False
    return spread.numpy(), allowed


def rollout_figure(
    rolled, tokens: tuple[str, ...], upto: int, layers: int, style: Style = DEFAULT_STYLE, hide_first: bool = False
) -> Figure:
    """The rolled-out map [n, n]: row i, how much of token i after `upto` layers comes from each token. With
    `hide_first` the first token's column is greyed and each row re-normalized over the others (statistics.
    without_first); a row with nothing else is greyed whole."""
    through = f"layers 1–{upto}" if upto > 1 else "layer 1"
    rolled = np.asarray(rolled, dtype=np.float64)
    allowed = np.ones(rolled.shape, dtype=bool)
    subtitle = "½·(mean of the heads) + ½·I per layer, multiplied; each row sums to 1"
    if hide_first and len(tokens) > 1:
        rolled, allowed = first_hidden(rolled, allowed)
        subtitle = "½·(mean of the heads) + ½·I per layer, multiplied; the first token hidden, rows re-normalized"
    return token_map(
        rolled,
        tokens,
        f"Attention rollout through {through} of {layers}",
        subtitle + averaged(tokens),
        ("token (query)", "draws on (key)"),
        style,
        zrange=(0.0, 1.0),
        allowed=allowed,
        drawn_most=DRAWN_MOST,
    )


def norms_figure(norms, tokens: tuple[str, ...], allowed, where: str, style: Style = DEFAULT_STYLE) -> Figure:
    """What each weight of one head moves, ‖α_ij·v_j·W_O^h‖ (Kobayashi et al. 2020), [n, n], to read beside the
    head's weights; masked keys grey; past DRAWN_MOST tokens averaged in blocks (said in its subtitle)."""
    norms = np.asarray(norms, dtype=np.float64)
    top = float(np.nanmax(np.where(allowed, norms, np.nan) if allowed is not None else norms, initial=0.0))
    return token_map(
        norms,
        tokens,
        "‖α·v·W_O‖: what each weight moves",
        where + averaged(tokens),
        ("query", "key"),
        style,
        zrange=(0.0, max(top, 1e-12)),
        allowed=allowed,
        drawn_most=DRAWN_MOST,
    )


def without_first_figure(weights, tokens: tuple[str, ...], allowed, where: str, style: Style = DEFAULT_STYLE) -> Figure:
    """One head's weights [n, n] with the first token hidden (first_hidden), to read beside its captured weights:
    what the head does with the attention it does not park on the first token."""
    weights = np.asarray(weights, dtype=np.float64)
    allowed = np.ones(weights.shape, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    shown, allowed = first_hidden(weights, allowed) if len(tokens) > 1 else (weights, allowed)
    return token_map(
        shown,
        tokens,
        "attention weights, the first token hidden",
        f"{where}; rows re-normalized without it" + averaged(tokens),
        ("query", "key"),
        style,
        zrange=(0.0, 1.0),
        allowed=allowed,
        drawn_most=DRAWN_MOST,
    )


def words_figure(merged, words: tuple[str, ...], pieces: list[str], where: str, style: Style = DEFAULT_STYLE) -> Figure:
    """One head's weights by words [w, w] (reading.merge_words); hovering a cell lists each word's pieces."""
    named = [html.escape(p) for p in pieces]  # hover text is drawn as HTML
    hover = np.array(
        [[f"{named[i]} → {named[j]}: {merged[i, j]:.3f}" for j in range(len(words))] for i in range(len(words))]
    )
    subtitle = f"{where}; a word's row is its pieces' mean, its column their sum"
    return token_map(
        merged,
        words,
        "attention weights by words",
        subtitle,
        ("query word", "key word"),
        style,
        zrange=(0.0, 1.0),
        hover_text=hover,
    )


SINK_WHY = (
    "Why: a softmax row must sum to 1, so a head with nothing to look at must still put its weight somewhere; "
    "trained models learn to park it on a token that every row can see and whose value changes little, the first. "
    "StreamingLLM (Xiao et al. 2023) keeps the first 4 tokens in its cache for this reason: without them a model "
    "that reads a long stream falls apart. A large weight on the sink says little about meaning: the switch above "
    "hides it and re-normalizes the other weights, for display only."
)
SINK_WHY_SHORT = (
    "Why: every softmax row must sum to 1, so a head with nothing to look at parks its weight on the first token "
    "(StreamingLLM keeps 4 such tokens in its cache)."
)


def share_text(value: float) -> str:
    """A share as a whole percentage, never one that reads as something it is not ("< 1%", "> 99%")."""
    if 0 < value < 0.005:
        return "<\u00a01%"
    if 0.995 <= value < 1:
        return ">\u00a099%"
    return f"{value:.0%}"


def sink_summary(model_trace) -> str:
    """The sink, measured: the mean share of rows 2..n on the first token over every head, and how many heads
    put at least SINK_SHARE there. "" for a one-token text (no row 2)."""
    grid = model_trace.grid("first")
    if bool(grid.isnan().all()):
        return ""
    heads = grid.numel()
    parked = int((grid >= SINK_SHARE).sum())
    first = markdown_literal(model_trace.tokens[0])
    kind = (
        "a special token"
        if model_trace.special and model_trace.special[0]
        else "the first word: this model starts a text with no special token"
    )
    return (
        f"Over all {heads} heads, rows 2 onward put **{share_text(float(grid.mean()))}** of their weight on the "
        f"first token, “{first}” ({kind}); **{parked}** head{'s' if parked != 1 else ''} put {SINK_SHARE:.0%} or "
        "more there."
    )


def special_shares(model_trace) -> list[dict]:
    """Per layer, the mean weight (all heads, all rows) on each kind of special token ([CLS], [SEP])."""
    kinds = sorted({raw for raw, special in zip(model_trace.raw_tokens, model_trace.special, strict=True) if special})
    table = []
    for index, layer in enumerate(model_trace.layers):
        weights = layer.weights.double().mean(dim=0)  # [n, n]: heads averaged
        shares = {
            kind: float(
                weights[:, [i for i, raw in enumerate(model_trace.raw_tokens) if raw == kind]].sum(dim=-1).mean()
            )
            for kind in kinds
        }
        table.append({"layer": index + 1, **{f"on {kind}": round(share, 3) for kind, share in shares.items()}})
    return table


def drawn_on(rolled, tokens, row: int, most: int = ROLLOUT_TOP, hide_first: bool = False) -> str:
    """What token `row` draws on through the layers, in words: its `most` largest shares of the rolled-out row;
    with `hide_first`, the first token's share said first and the others re-normalized without it."""
    shares = np.asarray(rolled[row], dtype=np.float64)
    token = markdown_literal(tokens[row])
    said = f"“{token}” draws most on"
    keys = range(len(tokens))
    rest = float(shares[1:].sum())
    if hide_first and len(tokens) > 1 and rest > ONLY_FIRST:  # a row with something besides the first token
        said = f"Leaving out the first token (it takes {weight_text(shares[0])}), “{token}” draws most on"
        shares, keys = shares / rest, range(1, len(tokens))
    order = sorted(keys, key=lambda j: -shares[j])[:most]
    return said + " " + ", ".join(f"“{markdown_literal(tokens[j])}” {weight_text(shares[j])}" for j in order) + "."
