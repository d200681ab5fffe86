"""The views of an AttentionTrace: one StageView per step of the pipeline, plus multi-head,
peakiness and √d_k figures. Plotly and NumPy only; pages decide how to lay them out.

Every figure reads the trace's tensors directly, so a from-scratch head and a real model's
head share these views.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.heatmap import (
    PAGE_PIXELS,
    SEQUENTIAL,
    axis_ticks,
    block_ranges,
    escape,
    heatmap,
    shorten,
    tick_widths,
    widest_tick,
)

PEAKINESS_NOTE = "normalized entropy: 0 = all on one token, 1 = uniform; effective tokens = e^entropy"
STAGE_KEYS = ("x", "projections", "qkv", "scores", "scaled", "mask", "weights", "context", "output")
# A real model's trace starts at Q, K, V: its X and projections (biases, rotary positions) are not plain X·W.
CAPTURED_STAGE_KEYS = STAGE_KEYS[2:]
CAPTURED_NOTE = (
    "Captured from the model's own forward pass: its learned projections (with their biases, "
    "and rotary positions where the model has them) are already applied."
)


@dataclasses.dataclass
class Matrix:
    """A matrix to export exactly (CSV), with its labels."""

    name: str
    values: np.ndarray
    row_labels: list[str]
    col_labels: list[str]

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([self.name, *self.col_labels])
        for label, row in zip(self.row_labels, self.values, strict=True):
            writer.writerow([label, *(f"{v:.9g}" for v in row)])
        return buffer.getvalue()


@dataclasses.dataclass
class StageView:
    key: str
    heading: str
    latex: str
    explanation: str
    figures: list[go.Figure]
    matrices: list[Matrix]


@dataclasses.dataclass(frozen=True)
class Style:
    font_size: int = 16
    show_numbers: bool = True
    width: int = PAGE_PIXELS  # about how wide a chart is drawn, in pixels
    side_by_side: bool = False  # a stage's figures share one row of the page (each gets a share of `width`)


def _beside(style: Style, count: int) -> Style:
    """The style for each of a stage's `count` figures: narrower when they share a row."""
    return dataclasses.replace(style, width=style.width // count) if style.side_by_side else style


DEFAULT_STYLE = Style()
GRID_PANEL_PIXELS = 240  # the height of one head's map in the multi-head grid


def _np(tensor) -> np.ndarray:
    return tensor.detach().cpu().double().numpy()


def _shape(*dims: int) -> str:
    return "[" + "x".join(str(d) for d in dims) + "]"


def _dims(count: int, prefix: str = "d") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def _tok(trace) -> list[str]:
    return list(trace.tokens)


def _captured(trace) -> bool:
    """A real model's trace (no X or W matrices) rather than a from-scratch one."""
    return trace.x is None


def _head_suffix(trace, head: int) -> str:
    return f" (head {head + 1} of {trace.n_heads})" if trace.n_heads > 1 else ""


def _token_matrix_figure(trace, values, name, title, style, *, x_title="dimension", diverging=True):
    figure = heatmap(
        values,
        title=title,
        row_labels=_tok(trace),
        x_title=x_title,
        y_title="token",
        diverging=diverging,
        show_numbers=style.show_numbers,
        font_size=style.font_size,
        width=style.width,
    )
    return figure, Matrix(name, values, _tok(trace), _dims(values.shape[1]))


def weights_hover(trace, head: int) -> np.ndarray | None:
    """Per cell: q_i·k_j = s, s·scale = s', weight = w, with the tokens named (escaped)."""
    n = trace.n_tokens
    if n > 64:
        return None
    tokens = [escape(t) for t in trace.tokens]
    s = _np(trace.scores[head])
    s2 = _np(trace.scaled_scores[head])
    w = _np(trace.weights[head])
    allowed = np.ones((n, n), bool) if trace.mask is None else trace.mask.cpu().numpy()
    root = 1.0 / trace.scale
    scaling = f"{{:.3f}} / {root:.3g} = {{:.3f}}" if trace.scale != 1.0 else "not scaled: {:.3f} = {:.3f}"
    text = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            head_line = f"query <b>{tokens[i]}</b> → key <b>{tokens[j]}</b>"
            if not allowed[i, j]:
                text[i, j] = f"{head_line}<br>masked: weight = 0"
                continue
            text[i, j] = (
                f"{head_line}<br>q<sub>{i}</sub>·k<sub>{j}</sub> = {s[i, j]:.3f}"
                f"<br>{scaling.format(s[i, j], s2[i, j])}<br>weight = softmax → {w[i, j]:.3f}"
            )
    return text


def _square(trace, values, name, title, style, head, *, diverging, allowed=None, hover=None, subtitle=""):
    figure = heatmap(
        values,
        title=title,
        subtitle=subtitle,
        row_labels=_tok(trace),
        col_labels=_tok(trace),
        x_title="key (attended to)",
        y_title="query (attending)",
        diverging=diverging,
        allowed=allowed,
        show_numbers=style.show_numbers,
        hover_text=hover,
        font_size=style.font_size,
        width=style.width,
    )
    return figure, Matrix(name, values, _tok(trace), _tok(trace))


def stage_view(trace, key: str, head: int = 0, style: Style = DEFAULT_STYLE) -> StageView:
    """Build the view of one pipeline stage for one head."""
    n, h, dk, dv = trace.n_tokens, trace.n_heads, trace.d_k, trace.d_v
    d_model = trace.x.shape[1] if trace.x is not None else None
    suffix = _head_suffix(trace, head)
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()

    if key == "x":
        fig, m = _token_matrix_figure(trace, _np(trace.x), "X", f"X  {_shape(n, d_model)}", style)
        return StageView(
            key,
            "1 · Input embeddings X",
            r"X \in \mathbb{R}^{n \times d_{model}}",
            "Each row is one token's vector: its meaning (and, with positional encoding, its position). "
            "No row knows anything about its neighbours yet.",
            [fig],
            [m],
        )
    if key == "projections":
        figures, matrices, style = [], [], _beside(style, 3)
        for name, w, width in (("W_Q", trace.w_q, dk), ("W_K", trace.w_k, dk), ("W_V", trace.w_v, dv)):
            values = _np(w[head])
            figures.append(
                heatmap(
                    values,
                    title=f"{name}  {_shape(d_model, width)}{suffix}",
                    x_title="output dimension",
                    y_title="input dimension",
                    show_numbers=style.show_numbers,
                    font_size=style.font_size,
                    width=style.width,
                )
            )
            matrices.append(Matrix(name, values, _dims(d_model), _dims(width)))
        return StageView(
            key,
            "2 · Projection matrices W_Q, W_K, W_V",
            r"W_Q, W_K \in \mathbb{R}^{d_{model} \times d_k}, \quad W_V \in \mathbb{R}^{d_{model} \times d_v}",
            "Three learned matrices (random here, set by the seed): what to ask, what to advertise, what to share.",
            figures,
            matrices,
        )
    if key == "qkv":
        figures, matrices, style = [], [], _beside(style, 3)
        for name, t, width in (("Q", trace.q, dk), ("K", trace.k, dk), ("V", trace.v, dv)):
            values = _np(t[head])
            # No head suffix: three of these sit side by side and the head is named above them.
            if _captured(trace):
                title = f"{name}  {_shape(n, width)}"
            else:
                title = f"{name} = X·W_{name}  {_shape(n, d_model)}·{_shape(d_model, width)} = {_shape(n, width)}"
            fig, m = _token_matrix_figure(trace, values, name, title, style)
            figures.append(fig)
            matrices.append(m)
        return StageView(
            key,
            "3 · Queries, keys and values",
            r"Q, K, V \text{ as the model computed them}"
            if _captured(trace)
            else r"Q = X W_Q, \quad K = X W_K, \quad V = X W_V",
            "Every token makes three cards: a query (what am I looking for?), a key (what do I offer?) "
            "and a value (what do I pass on?). All tokens at once, in one matrix product each."
            + (" " + CAPTURED_NOTE if _captured(trace) else ""),
            figures,
            matrices,
        )
    if key == "scores":
        values = _np(trace.scores[head])
        title = f"scores = Q·Kᵀ  {_shape(n, dk)}·{_shape(dk, n)} = {_shape(n, n)}{suffix}"
        fig, m = _square(trace, values, "scores", title, style, head, diverging=True)
        return StageView(
            key,
            "4 · Attention scores QKᵀ",
            r"S = Q K^{\top}, \qquad S_{ij} = q_i \cdot k_j",
            "Row i, column j: how well token i's query matches token j's key. Unbounded numbers, not yet percentages.",
            [fig],
            [m],
        )
    if key == "scaled":
        values = _np(trace.scaled_scores[head])
        if trace.scale == 1.0:
            title = f"scaled scores: NOT scaled (scale off)  {_shape(n, n)}{suffix}"
            note = "Scaling is switched off: the scores go to the softmax as they are. Watch the weights get peaky."
        else:
            title = f"scaled scores = scores / √{dk} = scores / {1 / trace.scale:.3g}  {_shape(n, n)}{suffix}"
            note = (
                f"A dot product of {dk} terms has variance about {dk}; dividing by √{dk} = {1 / trace.scale:.3g} "
                "brings it back to about 1 so that the softmax stays soft."
            )
        fig, m = _square(trace, values, "scaled_scores", title, style, head, diverging=True)
        return StageView(key, "5 · Scale by √d_k", r"S' = \frac{Q K^{\top}}{\sqrt{d_k}}", note, [fig], [m])
    if key == "mask":
        if trace.mask is None:
            explanation = (
                "This model is an encoder: every token sees every other token, before and after it."
                if _captured(trace)
                else "Causal masking is off: every token sees every other token, as in an encoder (BERT). "
                "Switch 'causal' on to hide the future, as a decoder (GPT) must during training."
            )
            return StageView(
                key,
                "6 · Mask",
                r"\text{no mask: every query may attend to every key}",
                explanation,
                [],
                [],
            )
        values, style = allowed.astype(np.float64), _beside(style, 2)
        fig = heatmap(
            values,
            title=f"causal mask  {_shape(n, n)}: 1 = may attend, grey ✕ = hidden",
            row_labels=_tok(trace),
            col_labels=_tok(trace),
            x_title="key (attended to)",
            y_title="query (attending)",
            diverging=False,
            allowed=allowed,
            show_numbers=style.show_numbers,
            zrange=(0.0, 1.0),
            font_size=style.font_size,
            width=style.width,
        )
        masked = np.where(allowed, _np(trace.scaled_scores[head]), np.nan)
        fig2, m2 = _square(
            trace,
            masked,
            "masked_scores",
            f"masked scores (−∞ where hidden){suffix}",
            style,
            head,
            diverging=True,
            allowed=allowed,
        )
        return StageView(
            key,
            "6 · Causal mask",
            r"M_{ij} = \begin{cases} S'_{ij} & j \le i \\ -\infty & j > i \end{cases}",
            "A token may not look at tokens that come after it. Hidden cells become −∞, "
            "so after the softmax they get exactly 0.",
            [fig, fig2],
            [Matrix("mask", values, _tok(trace), _tok(trace)), m2],
        )
    if key == "weights":
        values, style = _np(trace.weights[head]), _beside(style, 2)
        fig, m = _square(
            trace,
            values,
            "weights",
            f"attention weights = softmax(rows)  {_shape(n, n)}",
            style,
            head,
            diverging=False,
            allowed=allowed,
            hover=weights_hover(trace, head),
            subtitle=suffix.strip(" ()"),  # on its own line: this map shares its row with the peakiness bars
        )
        fig.update_traces(zmin=0.0, zmax=1.0, selector={"colorscale": SEQUENTIAL})
        return StageView(
            key,
            "7 · Softmax → attention weights",
            r"A = \operatorname{softmax}_{\text{row}}(S'), \qquad A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}}}",
            "Each row now sums to 1: the share of attention token i pays to each token. "
            "Scores are raw similarities; weights are percentages. Hover a cell for its arithmetic.",
            [fig, peakiness_figure(trace, head, style)],
            [m],
        )
    if key == "context":
        values = _np(trace.context[head])
        title = f"context = A·V  {_shape(n, n)}·{_shape(n, dv)} = {_shape(n, dv)}{suffix}"
        fig, m = _token_matrix_figure(trace, values, "context", title, style)
        return StageView(
            key,
            "8 · Context vectors",
            r"C = A V, \qquad c_i = \sum_j A_{ij}\, v_j",
            "Each token's new vector is a weighted sum of all value vectors, weighted by its row of attention.",
            [fig],
            [m],
        )
    if key == "output":
        figures, matrices = [], []
        style = _beside(style, 1 + (trace.w_o is not None) + (trace.output is not None))
        concat = _np(trace.concat)
        figures.append(
            heatmap(
                concat,
                title=f"concat(head 1 … head {h})  {_shape(n, h * dv)}",
                row_labels=_tok(trace),
                x_title="head · dimension",
                y_title="token",
                show_numbers=style.show_numbers,
                font_size=style.font_size,
                width=style.width,
            )
        )
        matrices.append(Matrix("concat", concat, _tok(trace), _dims(h * dv)))
        if trace.w_o is not None:
            w_o = _np(trace.w_o)
            figures.append(
                heatmap(
                    w_o,
                    title=f"W_O  {_shape(h * dv, d_model)}",
                    x_title="output dimension",
                    y_title="concat dimension",
                    show_numbers=style.show_numbers,
                    font_size=style.font_size,
                    width=style.width,
                )
            )
            matrices.append(Matrix("W_O", w_o, _dims(h * dv), _dims(d_model)))
        if trace.output is not None:
            out = _np(trace.output)
            fig, m = _token_matrix_figure(
                trace, out, "output", f"output = concat·W_O  {_shape(n, h * dv)}·{_shape(h * dv, d_model)}", style
            )
            figures.append(fig)
            matrices.append(m)
        explanation = (
            "The heads' context vectors are put side by side and W_O maps them back to d_model, "
            "so the output has the same shape as X and layers can be stacked."
        )
        if trace.w_o is None:
            explanation += " Here only the concatenation is shown: the model applies its own output projection next."
        return StageView(
            key,
            "9 · Concatenate the heads, project with W_O",
            r"\text{MultiHead}(X) = \text{Concat}(C_1, \dots, C_h)\, W_O",
            explanation,
            figures,
            matrices,
        )
    raise ValueError(f"stage must be one of {', '.join(STAGE_KEYS)}; got {key!r}")


def peakiness_figure(trace, head: int, style: Style = DEFAULT_STYLE) -> go.Figure:
    """Per query token: normalized entropy, max weight and effective number of tokens."""
    tokens = [escape(t) for t in trace.tokens]
    y = list(range(len(tokens)))
    columns = (
        ("normalized entropy", _np(trace.normalized_entropy[head]), (0, 1)),
        ("max weight", _np(trace.max_weight[head]), (0, 1)),
        ("effective tokens", _np(trace.effective_tokens[head]), (0, max(1.0, trace.n_tokens))),
    )
    figure = make_subplots(rows=1, cols=3, shared_yaxes=True, subplot_titles=[c[0] for c in columns])
    for index, (name, values, limits) in enumerate(columns, start=1):
        figure.add_trace(
            go.Bar(
                x=values.astype(np.float32),
                y=y,
                orientation="h",
                name=name,
                marker_color="#3b6ea8",
                texttemplate="%{x:.2f}" if len(y) <= 24 else None,
                textposition="outside",
                cliponaxis=False,
                hovertemplate="%{x:.3f}<extra></extra>",
            ),
            row=1,
            col=index,
        )
        figure.update_xaxes(range=[limits[0], limits[1] * 1.25], row=1, col=index)
    ticks = axis_ticks(trace.tokens, [(i, i + 1) for i in y], False)
    figure.update_yaxes(**ticks, autorange="reversed")
    figure.update_xaxes(automargin=False)  # fixed margins: each chart drawn once (see figures.heatmap)
    figure.update_yaxes(automargin=False)
    which = _head_suffix(trace, head)
    font = style.font_size - 2
    figure.update_layout(
        title={
            "text": f"How peaked is each row?{which}<br><sup>{PEAKINESS_NOTE}</sup>",
            "font": {"size": style.font_size + 2},
        },
        showlegend=False,
        height=int(min(700, max(260, 110 + 24 * len(y)))),
        font={"size": font},
        margin={
            "l": round(16 + widest_tick(ticks, len(y), font)),
            "r": 10,
            "t": 80,
            "b": round(14 + 1.3 * font),
            "autoexpand": False,
        },
    )
    figure.update_annotations(font_size=style.font_size - 2)
    return figure


def context_terms(trace, head: int, query: int) -> list[tuple[str, float]]:
    """(key token, weight) for the keys one query row may see, in sentence order."""
    weights = _np(trace.weights[head, query])
    visible = [True] * trace.n_tokens if trace.mask is None else trace.mask[query].tolist()
    return [(t, float(w)) for t, w, ok in zip(trace.tokens, weights, visible, strict=True) if ok]


def weighted_sum_text(trace, head: int, query: int, limit: int = 12) -> str:
    """ "context_next = 0.10·v_the + 0.50·v_next + ..." (largest `limit` terms if the row is long)."""
    terms = context_terms(trace, head, query)
    shown = terms if len(terms) <= limit else sorted(terms, key=lambda t: -t[1])[:limit]
    parts = [f"{w:.2f}·v({token})" for token, w in shown]
    rest = "" if len(shown) == len(terms) else f" + … ({len(terms) - limit} smaller terms)"
    if trace.mask is not None and len(terms) < trace.n_tokens:
        rest += f"   (the {trace.n_tokens - len(terms)} later tokens are masked)"
    return f"context({trace.tokens[query]}) = " + " + ".join(parts) + rest


def context_sum_figure(trace, head: int, query: int, style: Style = DEFAULT_STYLE) -> go.Figure:
    """The weighted sum, drawn: one row w_j·v_j per key, then their sum (= the context row)."""
    weights = _np(trace.weights[head, query])
    values = _np(trace.v[head])
    order = np.argsort(-weights)[:24] if len(weights) > 24 else np.arange(len(weights))
    scaled = weights[order, None] * values[order]
    context = _np(trace.context[head, query])[None]
    rows = [f"{weights[j]:.2f} · v({escape(shorten(trace.tokens[j]))})" for j in order] + [
        f"= context({escape(shorten(trace.tokens[query]))})"
    ]
    figure = heatmap(
        np.vstack([scaled, context]),
        title=f"context of “{escape(trace.tokens[query])}” as a weighted sum of value rows",
        x_title="value dimension",
        show_numbers=style.show_numbers,
        font_size=style.font_size,
        width=style.width,
    )
    ticks = {"tickvals": list(range(len(rows))), "ticktext": rows}
    figure.update_yaxes(**ticks)
    figure.update_layout(margin_l=round(16 + widest_tick(ticks, len(rows), style.font_size)))
    return figure


def multihead_grid(trace, stage: str = "weights", shared_scale: bool = True, style: Style = DEFAULT_STYLE) -> go.Figure:
    """All heads of one n x n stage as small multiples. The queries label the first column, the keys
    the bottom row (every k-th token where they would overlap); every hover names both tokens. With one
    colour scale, one colour bar speaks for every head; with a scale per head, no single bar could,
    so the hover gives each value."""
    h = trace.n_heads
    cols = min(h, 4)
    rows = math.ceil(h / cols)
    maps = _np(getattr(trace, stage))
    diverging = stage != "weights"
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()
    finite = maps[np.isfinite(maps)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    shared_range = ((0.0, 1.0) if not diverging else (-bound, bound)) if shared_scale else None
    label_font = max(9, style.font_size - 4)
    figure = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"head {i + 1}" for i in range(h)],
        horizontal_spacing=0.04,
        vertical_spacing=0.12,
    )
    for i in range(h):
        single = heatmap(
            maps[i],
            title="",
            row_labels=_tok(trace),
            col_labels=_tok(trace),
            x_title="key",
            y_title="query",
            diverging=diverging,
            allowed=allowed,
            show_numbers=False,
            zrange=shared_range,
        )
        single.data[0].showscale = shared_scale and i == 0
        for masked in single.data[1:]:  # grey is enough at this size; crosses would crowd the cells
            masked.text = masked.texttemplate = None
        row, col = i // cols + 1, i % cols + 1
        for trace_part in single.data:
            figure.add_trace(trace_part, row=row, col=col)
    ticks = _grid_ticks(_tok(trace), label_font)
    figure.update_xaxes(**ticks, showticklabels=False, tickangle=-45)
    figure.update_xaxes(showticklabels=True, row=rows)  # under the last row of heads
    figure.update_yaxes(**ticks, showticklabels=False, autorange="reversed")
    figure.update_yaxes(showticklabels=True, col=1)
    for i in range(h - cols, (rows - 1) * cols):  # a head in the last row but one with none below it
        figure.update_xaxes(showticklabels=True, row=i // cols + 1, col=i % cols + 1)
    figure.update_xaxes(showgrid=False, zeroline=False, tickfont={"size": label_font})
    figure.update_yaxes(showgrid=False, zeroline=False, tickfont={"size": label_font})
    below = max(tick_widths(ticks, 1, label_font)) * math.sin(math.pi / 4) + label_font + 10
    scale_note = "one colour scale for all heads" if shared_scale else "a colour scale per head: hover for values"
    figure.update_layout(
        title={"text": f"{stage} of all {h} heads ({scale_note})", "font": {"size": style.font_size + 2}},
        height=round(80 + rows * GRID_PANEL_PIXELS * 1.12 + below),
        font={"size": style.font_size - 2},
        margin={"l": 10, "r": 10, "t": 80, "b": 10},
    )
    return figure


def _grid_ticks(tokens: list[str], label_font: int) -> dict:
    """The walkthrough's token ticks, as many as fit one above the other in a panel."""
    blocks = block_ranges(len(tokens))
    fits = int(GRID_PANEL_PIXELS // (label_font * 1.4))
    return axis_ticks(tokens, blocks, pooled=len(blocks) < len(tokens), most=fits)


def head_summary_figure(trace, style: Style = DEFAULT_STYLE) -> go.Figure:
    """Mean peakiness per head: which heads focus, which spread out."""
    summary = trace.head_summary()
    heads = [f"head {s['head'] + 1}" for s in summary]
    figure = go.Figure(
        [
            go.Bar(name="mean normalized entropy", x=heads, y=[s["mean_normalized_entropy"] for s in summary]),
            go.Bar(name="mean max weight", x=heads, y=[s["mean_max_weight"] for s in summary]),
        ]
    )
    figure.update_layout(
        barmode="group",
        title={"text": "Peakiness per head (low entropy / high max = focused head)", "font": {"size": style.font_size}},
        yaxis={"range": [0, 1.05]},
        height=340,
        font={"size": style.font_size - 2},
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
    )
    return figure


def scaling_figures(result, style: Style = DEFAULT_STYLE) -> tuple[go.Figure, go.Figure]:
    """Variance of q·k vs d_k (log-log), and softmax peakiness vs d_k, scaled and not."""
    d = list(result.d_ks)
    variance = go.Figure(
        [
            go.Scatter(x=d, y=result.var_unscaled, mode="lines+markers", name="Var(q·k)  (unscaled)"),
            go.Scatter(x=d, y=result.var_scaled, mode="lines+markers", name="Var(q·k / √d_k)  (scaled)"),
            go.Scatter(x=d, y=d, mode="lines", name="d_k (theory)", line={"dash": "dot", "color": "grey"}),
        ]
    )
    variance.update_layout(
        title={"text": "The variance of a dot product grows like d_k; scaling keeps it at 1"},
        xaxis={"type": "log", "title": "d_k"},
        yaxis={"type": "log", "title": "variance"},
        height=420,
        font={"size": style.font_size - 2},
    )
    curves = (
        (result.max_weight_unscaled, "max weight, unscaled", "solid"),
        (result.max_weight_scaled, "max weight, scaled", "solid"),
        (result.entropy_unscaled, "normalized entropy, unscaled", "dash"),
        (result.entropy_scaled, "normalized entropy, scaled", "dash"),
    )
    peaks = go.Figure(
        [go.Scatter(x=d, y=y, mode="lines+markers", name=name, line={"dash": dash}) for y, name, dash in curves]
    )
    peaks.update_layout(
        title={"text": f"Softmax over {result.n_keys} keys: unscaled rows turn one-hot as d_k grows"},
        xaxis={"type": "log", "title": "d_k"},
        yaxis={"range": [0, 1.05], "title": "mean over rows"},
        height=420,
        font={"size": style.font_size - 2},
    )
    return variance, peaks


__all__ = [
    "CAPTURED_STAGE_KEYS",
    "STAGE_KEYS",
    "Matrix",
    "StageView",
    "Style",
    "context_sum_figure",
    "context_terms",
    "head_summary_figure",
    "multihead_grid",
    "peakiness_figure",
    "scaling_figures",
    "stage_view",
    "weighted_sum_text",
]
