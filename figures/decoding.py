"""Decoding one token at a time: what one step computes, what the KV cache holds, what a step costs.
Plotly and NumPy only; the numbers come from attention_core/decoding.py (from scratch) and
attention_core/models/generation.py (a real model writing).

What was not recomputed at a step is drawn under a grey veil: the cache's rows of earlier tokens (read, not
made again), and the earlier rows of attention (made at earlier steps, not needed now).
"""

from __future__ import annotations

import numpy as np

from attention_core.decoding import Decoding, step_flops
from attention_core.variants import VARIANTS, Sizes, part_words
from figures.cache import amount
from figures.heatmap import Panel, heatmaps
from figures.style import DEFAULT_STYLE, Figure, Style, as_numpy, figure

VEIL = "rgba(128, 128, 128, 0.62)"  # over what a step did not recompute: on light and dark pages alike


def _veil(fig: Figure, panel: int, rows: int, cols: int) -> Figure:
    """fig with the first `rows` rows of panel `panel` (0-based) under the grey veil."""
    if rows <= 0:
        return fig
    suffix = "" if panel == 0 else str(panel + 1)
    shape = dict(
        type="rect",
        xref=f"x{suffix}",
        yref=f"y{suffix}",
        x0=-0.5,
        x1=cols - 0.5,
        y0=-0.5,
        y1=rows - 0.5,
        fillcolor=VEIL,
        line={"width": 0},
        layer="above",
    )
    return figure(fig.traces, {**fig.parts, "shapes": [*fig.parts.get("shapes", []), shape]})


def _kv_index(part, decoding: Decoding, head: int) -> tuple[int | None, str]:
    """Which copy of a cached part the head reads: a key/value head of K and V (GQA shares them; differential
    attention's second keys too: a part [g, n, d]), or the one latent (MLA's c_KV and k^R, Q = K = V = X's rows,
    [n, d]) that every head reads."""
    if part.dim() == 3:
        kv = decoding.steps[0].kv_head_of[head]
        return kv, f"kv head {kv + 1}"
    return None, "all heads read it"


def cache_and_rows_figure(decoding: Decoding, t: int, head: int, style: Style = DEFAULT_STYLE) -> Figure:
    """After step t (0-based), one figure: what the KV cache holds (each part the variant caches, a row per token
    it keeps, the new token's last) and every row of attention so far (row i was step i's, over the keys it read:
    the cells after each row's token hidden as the causal mask hides them, nothing later exists when that row is
    made, and under a sliding window the keys it had dropped). The rows of earlier tokens are under the veil:
    read from the cache, or made at earlier steps, and not recomputed."""
    tokens, kept = list(decoding.tokens[: t + 1]), list(decoding.steps[t].keys)
    panels = []
    for name, part in decoding.cache_at(t + 1).items():
        index, whose = _kv_index(part, decoding, head)
        values = as_numpy(part if index is None else part[index])
        label = part_words(name)[0].replace(" (per key/value head)", "")
        panels.append(
            Panel(
                values,
                f"cached {label}",
                f"[{values.shape[0]} × {values.shape[1]}] · {whose}",
                row_labels=[tokens[j] for j in kept],
                x_title="dimension",
            )
        )
    rows = np.full((t + 1, t + 1), np.nan)
    read = np.zeros((t + 1, t + 1), dtype=bool)
    for i in range(t + 1):
        keys = list(decoding.steps[i].keys)
        rows[i, keys], read[i, keys] = as_numpy(decoding.steps[i].weights[head]), True
    panels.append(
        Panel(
            rows,
            "every row so far",
            f"[{t + 1} × {t + 1}]: the last row is new",
            row_labels=tokens,
            col_labels=tokens,
            diverging=signed(decoding),
            allowed=read,
            zrange=None if signed(decoding) else (0.0, 1.0),
            x_title="key",
        )
    )
    fig = heatmaps(panels, style)
    for k, panel in enumerate(panels):
        fig = _veil(fig, k, panel.matrix.shape[0] - 1, panel.matrix.shape[1])
    return fig


def signed(decoding: Decoding) -> bool:
    """Its weights may be negative (differential attention, A₁ − λ·A₂): drawn in two colours, either side of 0."""
    return VARIANTS[decoding.config.variant].lambda_of is not None


def step_figure(decoding: Decoding, t: int, head: int, style: Style = DEFAULT_STYLE) -> Figure:
    """Step t for one head: the new token's query (one row, labelled with its token), its scaled scores and
    weights over every token its cache holds, and the context row they make."""
    step = decoding.steps[t]
    token = [step.token]
    tokens = [decoding.tokens[j] for j in step.keys]
    q, scores, weights, context = (
        as_numpy(tensor[head])[None] for tensor in (step.q, step.scaled_scores, step.weights, step.context)
    )
    scaled = "q·Kᵀ, scaled" if decoding.config.scaled else "q·Kᵀ, not scaled"
    keys = len(tokens)
    return heatmaps(
        [
            Panel(
                q,
                f"q of “{step.token}”",
                f"[1 × {q.shape[1]}] · made at this step",
                row_labels=token,
                x_title="dimension",
            ),
            Panel(scores, "its scores", f"{scaled}: [1 × {keys}]", row_labels=token, col_labels=tokens, x_title="key"),
            Panel(
                weights,
                "its weights",
                f"{'A₁ − λ·A₂' if signed(decoding) else 'softmax'}: [1 × {keys}]",
                row_labels=token,
                col_labels=tokens,
                diverging=signed(decoding),
                zrange=None if signed(decoding) else (0.0, 1.0),
                x_title="key",
            ),
            Panel(
                context, "its context", f"weights·V: [1 × {context.shape[1]}]", row_labels=token, x_title="dimension"
            ),
        ],
        style,
    )


def cost_figures(
    variant: str, sizes: Sizes, steps: int, bytes_per: int, style: Style = DEFAULT_STYLE, held=None, height=None
) -> tuple[Figure, Figure]:
    """How a step's FLOPs grow with t, with a KV cache and without, and how the cache grows, up to `steps`.
    held(t): the tokens a cache holds after t (a sliding window's stops growing); by default all t. height: each
    chart's pixels (a slide's are shorter)."""
    t = np.arange(1, steps + 1)
    held = held or (lambda tokens: tokens)
    kept = np.array([held(int(i)) for i in t])
    with_cache = [step_flops(variant, sizes, int(i), True, int(k)) for i, k in zip(t, kept, strict=True)]
    without = [step_flops(variant, sizes, int(i), False) for i in t]
    line = {"type": "scatter", "mode": "lines", "x": t}
    flops = figure(
        [
            line | {"y": without, "name": "without a cache: the whole pass again", "line": {"color": "#b5651d"}},
            line | {"y": with_cache, "name": "with a KV cache: the new token alone", "line": {"color": "#1a7f5a"}},
        ],
        style.layout(
            title=style.title("FLOPs of step t, one layer", "matrix products; t = tokens so far"),
            xaxis={"title": {"text": "t"}},
            yaxis={"title": {"text": "FLOPs"}, "rangemode": "tozero"},
            # the legend at the figure's foot, its two rows with room of their own under the axis title
            legend={"orientation": "h", "x": 0, "y": 0, "yref": "container", "yanchor": "bottom"},
            height=height or 360,
            margin={"t": 80, "l": 70, "r": 20, "b": round(4 * 1.3 * style.font_size + 20)},
        ),
    )
    per_token = VARIANTS[variant].cache_per_token(sizes) * bytes_per
    at_end = f"{per_token:,} bytes per token ({amount(per_token * int(kept[-1]), 1)} at t = {steps})"
    cache = figure(
        [
            line
            | {
                "y": per_token * kept,
                "name": "cache",
                "line": {"color": "#2e6fb0"},
                "hovertemplate": "t = %{x}: %{y:,} bytes<extra></extra>",
            }
        ],
        style.layout(
            title=style.title("KV cache after t tokens, one layer", at_end),
            xaxis={"title": {"text": "t"}},
            yaxis={"title": {"text": "bytes"}, "rangemode": "tozero"},
            showlegend=False,
            height=height or 360,
            margin={"t": 80, "l": 70, "r": 20, "b": 60},
        ),
    )
    return flops, cache


# ------------------------------------------------------------------------------------------------
# A real model writing (attention_core/models/generation.py)


def generated_row_figure(tokens: list[str], row, title: str, style: Style = DEFAULT_STYLE) -> Figure:
    """One head's attention row of the token at the end of `tokens`, over every token so far."""
    values = np.asarray(row, dtype=np.float64)[None]
    return heatmaps(
        [
            Panel(
                values,
                title,
                f"[1 × {len(tokens)}]: the newest token's weights over every token so far",
                row_labels=[tokens[-1]],
                col_labels=tokens,
                diverging=False,
                zrange=(0.0, 1.0),
                x_title="key",
            )
        ],
        style,
    )


def step_entropy(rows) -> np.ndarray:
    """[layers, heads] normalized entropy of each head's row (0: on one token, 1: even); NaN for a row with one
    key, which has nothing to spread over."""
    p = np.asarray(rows, dtype=np.float64)
    keys = p.shape[-1]
    if keys < 2:
        return np.full(p.shape[:-1], np.nan)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=-1) / np.log(keys)


def step_entropy_figure(rows, head_labels: list[str], style: Style = DEFAULT_STYLE) -> Figure:
    values = step_entropy(rows)
    return heatmaps(
        [
            Panel(
                values,
                "How peaked every head's newest row is",
                "normalized entropy: 0 = on one token, 1 = spread evenly",
                row_labels=[f"layer {i + 1}" for i in range(values.shape[0])],
                col_labels=head_labels,
                diverging=False,
                zrange=(0.0, 1.0),
                x_title="head",
                y_title="layer",
            )
        ],
        style,
    )
