"""The √d_k experiment drawn, and what it says in words (every sentence computed from its numbers)."""

from __future__ import annotations

import math

import numpy as np

from figures.style import DEFAULT_STYLE, TITLE_PAD, Figure, Style, escape, figure

LINE_COLOURS = {"unscaled": "#c0392b", "scaled": "#2e6fb0", "theory": "#6b6b6b"}


def _log_axis(values, title: str) -> dict:
    """A log axis labelled at the powers of ten it spans (Plotly's own labels read "2 5 10 2 5 100")."""
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    low, high = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    ticks = [10.0**p for p in range(low, high + 1)]
    return {
        "type": "log",
        "title": {"text": title},
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": [f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks],
    }


def _d_k_axis(d_ks) -> dict:
    return {
        "type": "log",
        "title": {"text": "d_k"},
        "tickmode": "array",
        "tickvals": list(d_ks),
        "ticktext": [str(d) for d in d_ks],
    }


def line_layout(style: Style, title: str, xaxis: dict, yaxis: dict, height: int = 480, legend_rows: int = 2) -> dict:
    """Title on top, the legend under the x axis (its rows get their own room, so nothing overlaps). No taller
    than a map may be (presentation mode: a slide fits the screen)."""
    height = min(height, style.max_map_pixels - 80)
    line = 1.3 * style.font_size
    axis = 2 * line + 10  # tick labels and the axis title
    legend = {**style.base_layout()["legend"], "orientation": "h", "x": 0, "y": 0, "yref": "container"}
    return style.layout(
        title={**style.title(escape(title)), "x": 0, "xanchor": "left"},
        xaxis=xaxis,
        yaxis=yaxis,
        height=round(height + legend_rows * line),
        margin={"l": 80, "r": 20, "t": round(TITLE_PAD + 16 + line), "b": round(axis + legend_rows * line + 10)},
        legend={**legend, "yanchor": "bottom"},
    )


def variance_figure(d_ks, var_unscaled, var_scaled, title: str, style: Style = DEFAULT_STYLE) -> Figure:
    """Var(q·k) and Var(q·k/√d_k) against d_k, log-log, with the theory line Var = d_k."""
    d = list(d_ks)
    traces = [
        dict(
            type="scatter",
            x=d,
            y=list(var_unscaled),
            mode="lines+markers",
            name="Var(q·k), unscaled",
            line={"color": LINE_COLOURS["unscaled"]},
        ),
        dict(
            type="scatter",
            x=d,
            y=list(var_scaled),
            mode="lines+markers",
            name="Var(q·k / √d_k), scaled",
            line={"color": LINE_COLOURS["scaled"]},
        ),
        dict(
            type="scatter",
            x=d,
            y=d,
            mode="lines",
            name="d_k (theory)",
            line={"dash": "dot", "color": LINE_COLOURS["theory"]},
        ),
    ]
    layout = line_layout(style, title, _d_k_axis(d), _log_axis([*var_unscaled, *var_scaled, *d], "variance"))
    return figure(traces, layout)


def peaks_figure(
    d_ks, unscaled, scaled, title: str, style: Style = DEFAULT_STYLE, entropy=None, over: str = "rows"
) -> Figure:
    """The mean largest softmax weight of a row against d_k, scaled and not (and, if given, the mean
    normalized entropy as dashed lines)."""
    d = list(d_ks)
    traces = [
        dict(
            type="scatter",
            x=d,
            y=list(unscaled),
            mode="lines+markers",
            name="max weight, unscaled",
            line={"color": LINE_COLOURS["unscaled"]},
        ),
        dict(
            type="scatter",
            x=d,
            y=list(scaled),
            mode="lines+markers",
            name="max weight, scaled",
            line={"color": LINE_COLOURS["scaled"]},
        ),
    ]
    if entropy is not None:
        for values, name, colour in ((entropy[0], "unscaled", "unscaled"), (entropy[1], "scaled", "scaled")):
            traces.append(
                dict(
                    type="scatter",
                    x=d,
                    y=list(values),
                    mode="lines",
                    name=f"normalized entropy, {name}",
                    line={"dash": "dash", "color": LINE_COLOURS[colour]},
                )
            )
    layout = line_layout(style, title, _d_k_axis(d), {"range": [0, 1.05], "title": {"text": f"mean over {over}"}})
    return figure(traces, layout)


def scaling_figures(result, style: Style = DEFAULT_STYLE) -> tuple[Figure, Figure]:
    """The random-vector experiment (scaling_experiment): variance and peakiness against d_k."""
    variance = variance_figure(
        result.d_ks, result.var_unscaled, result.var_scaled, "Random q, k: the variance of q·k against d_k", style
    )
    peaks = peaks_figure(
        result.d_ks,
        result.max_weight_unscaled,
        result.max_weight_scaled,
        f"Softmax over {result.n_keys} keys against d_k",
        style,
        entropy=(result.entropy_unscaled, result.entropy_scaled),
    )
    return variance, peaks


def row_figure(tokens, unscaled, scaled, d_k: int, query: int, style: Style = DEFAULT_STYLE) -> Figure:
    """One query row's weights with and without ÷√d_k, as grouped bars over the keys."""
    x = list(range(len(tokens)))
    labels = [escape(t) for t in tokens]
    xaxis = {"tickmode": "array", "tickvals": x, "ticktext": labels, "title": {"text": "key"}}
    yaxis = {"range": [0, 1.05], "title": {"text": "weight"}}
    layout = {
        **line_layout(style, f"weights of “{tokens[query]}” at d_k = {d_k}", xaxis, yaxis, height=400, legend_rows=1),
        "barmode": "group",
    }
    return figure(
        [
            dict(
                type="bar",
                name=f"scaled (÷√{d_k})",
                x=x,
                y=np.asarray(scaled, dtype=np.float32),
                marker={"color": LINE_COLOURS["scaled"]},
            ),
            dict(
                type="bar",
                name="not scaled",
                x=x,
                y=np.asarray(unscaled, dtype=np.float32),
                marker={"color": LINE_COLOURS["unscaled"]},
            ),
        ],
        layout=layout,
    )


def experiment_claims(result) -> list[str]:
    """What the random-vector experiment measured, in words."""
    first, last = result.d_ks[0], result.d_ks[-1]
    return [
        f"Measured over {result.samples:,} random pairs: Var(q·k) is {result.var_unscaled[0]:.2f} at d_k = {first} "
        f"and {result.var_unscaled[-1]:,.0f} at d_k = {last}, close to d_k each time; divided by √d_k it stays "
        f"between {min(result.var_scaled):.2f} and {max(result.var_scaled):.2f}.",
        f"Unscaled, a row's largest weight goes from {result.max_weight_unscaled[0]:.2f} to "
        f"{result.max_weight_unscaled[-1]:.2f}; scaled it stays between {min(result.max_weight_scaled):.2f} "
        f"and {max(result.max_weight_scaled):.2f}.",
    ]


ONE_HOT = 0.9  # a row whose largest weight is at least this is "almost one-hot"


def one_hot_without_scaling(result, query: int) -> bool:
    """Whether the row's top weight climbs to almost one-hot without scaling, and stays below that with it."""
    top_u = [row[query] for row in result.max_weight_unscaled]
    top_s = [row[query] for row in result.max_weight_scaled]
    return top_u[-1] >= ONE_HOT and top_u[-1] - top_u[0] >= 0.3 and max(top_s) < ONE_HOT


def sentence_claims(result, query: int) -> list[str]:
    """What the sentence experiment measured for one query row, in words (each number from `result`)."""
    first, last = result.d_ks[0], result.d_ks[-1]
    top_u = [row[query] for row in result.max_weight_unscaled]
    top_s = [row[query] for row in result.max_weight_scaled]
    token = result.tokens[query]
    ratios = [v / d for v, d in zip(result.var_unscaled, result.d_ks, strict=True)]
    claims = [
        f"q's and k's entries have variance {result.var_entries:.2f} at every d_k. Over {result.draws} draws of "
        f"W_Q and W_K, Var(q·k) is d_k times {min(ratios):.2f} to {max(ratios):.2f}, so the scaled scores' variance "
        f"(Var(q·k) / d_k) stays between {min(result.var_scaled):.2f} and {max(result.var_scaled):.2f}.",
        f"The row of “{token}”: unscaled, its largest weight averages {top_u[0]:.2f} at d_k = {first} and "
        f"{top_u[-1]:.2f} at d_k = {last}; scaled, {top_s[0]:.2f} and {top_s[-1]:.2f}.",
    ]
    if one_hot_without_scaling(result, query):
        claims.append("Without √d_k the row turns almost one-hot as d_k grows; with it, it does not.")
    return claims
