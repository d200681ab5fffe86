"""The stages of self-attention, as one ordered registry. Plotly and NumPy only; no Streamlit.

A stage is one `Stage` record in STAGES: its key (the trace's own name where it has one), a short
label for buttons, a title, a formula, the idea in one sentence, whether it needs X and the W
matrices (a real model's trace starts at Q, K, V), its builder, and, where it has one, the
[heads, n, n] map the Multi-head page draws for every head and a per-query detail. Headings are
numbered by position, pages and tests look stages up by key. Adding a stage is one record and
one builder.

A builder returns its figures, the matrices they export, and `notes`: sentences about the numbers
on screen, computed from them (tests/test_claims.py checks each against the trace).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from attention_core.scaling import score_variances
from figures.context import context_sum_part, weighted_sum_text
from figures.glossary import link
from figures.heatmap import Panel, heatmaps
from figures.peakiness import peakiness_figure
from figures.style import (
    DEFAULT_STYLE,
    Figure,
    Matrix,
    Style,
    as_numpy,
    escape,
    markdown_literal,
    shape_text,
    subscript,
)

CAPTURED_NOTE = (
    "Captured from the model's own forward pass: its learned projections (with their biases, "
    "and rotary positions where the model has them) are already applied."
)


@dataclasses.dataclass
class Built:
    """What a stage builder makes for one head."""

    figures: list[Figure]
    matrices: list[Matrix]
    notes: list[str] = dataclasses.field(default_factory=list)
    idea: str | None = None  # replaces the stage's idea where it would not be true (e.g. no projections)
    code: str = ""  # a computation written out, shown as text (a context vector as its weighted sum)


@dataclasses.dataclass(frozen=True)
class Stage:
    key: str
    label: str  # short, for buttons: "softmax"
    title: str  # the heading, without its number
    formula: str  # LaTeX
    idea: str  # one sentence (markdown), true whatever the numbers
    needs_x: bool  # needs X and the W matrices: only a from-scratch trace has them
    build: Callable[[object, int, Style, int | None], Built]  # (trace, head, style, query token or None)
    grid: str | None = None  # the [h, n, n] field drawn for every head on the Multi-head page
    per_query: bool = False  # the view can show one chosen query token in detail


@dataclasses.dataclass
class StageView:
    """One stage of one head, ready to show: what show_stage in ui/show.py lays out."""

    key: str
    heading: str
    latex: str
    explanation: str
    figures: list[Figure]
    matrices: list[Matrix]
    code: str = ""


def _tokens(trace) -> list[str]:
    return list(trace.tokens)


def _dims(count: int, style: Style, prefix: str = "d") -> list[str]:
    return [f"{prefix}{style.index(i)}" for i in range(count)]


def _head(trace, head: int) -> str:
    """Which head a figure shows; a one-head trace names itself by its label (e.g. a what-if)."""
    return f"head {head + 1} of {trace.n_heads}" if trace.n_heads > 1 else trace.label


def _allowed(trace) -> np.ndarray | None:
    return None if trace.mask is None else trace.mask.cpu().numpy()


def _rows_panel(trace, values, name: str, title: str, style: Style, subtitle: str = "") -> tuple[Panel, Matrix]:
    """A matrix with one row per token (X, Q, K, V, context, output)."""
    panel = Panel(values, title, subtitle, row_labels=_tokens(trace), x_title="dimension", y_title="token")
    return panel, Matrix(name, values, _tokens(trace), _dims(values.shape[1], style))


def _square_panel(trace, values, name, title, *, diverging, masked, subtitle="", hover=None, zrange=None):
    """A query x key map. `masked`: draw the mask's hidden cells grey with a ✕ (masked scores, weights);
    scores and scaled scores exist for every pair, the mask comes after them."""
    panel = Panel(
        values,
        title,
        subtitle,
        row_labels=_tokens(trace),
        col_labels=_tokens(trace),
        x_title="key (attended to)",
        y_title="query (attending)",
        diverging=diverging,
        allowed=_allowed(trace) if masked else None,
        hover_text=hover,
        zrange=zrange,
    )
    return panel, Matrix(name, values, _tokens(trace), _tokens(trace))


def _matrix_panel(values, name, title, style, row_name, col_name, subtitle="") -> tuple[Panel, Matrix]:
    """A weight matrix (W_Q, W_K, W_V, W_O): numbered rows and columns."""
    rows, cols = values.shape
    panel = Panel(values, title, subtitle, x_title=col_name, y_title=row_name)
    return panel, Matrix(name, values, _dims(rows, style), _dims(cols, style))


def _figure(parts: list[tuple[Panel, Matrix]], style: Style) -> tuple[list[Figure], list[Matrix]]:
    """A stage's panels as ONE figure (side by side where the style says so, else stacked), and its exports."""
    panels, matrices = zip(*parts, strict=True)
    return [heatmaps(list(panels), style, stacked=not style.side_by_side)], list(matrices)


def origin(trace, names: tuple[str, ...]) -> str:
    """Where these matrices come from: typed, drawn (with which init and seed) or the model's own."""
    typed = [n for n in names if n in trace.given]
    drawn = [n for n in names if n not in trace.given]
    label = {"x": "X", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O"}
    parts = []
    if typed:
        parts.append(f"{', '.join(label[n] for n in typed)} typed")
    if drawn and trace.drawn:
        parts.append(f"{', '.join(label[n] for n in drawn)} random ({trace.drawn})")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# The builders, one per stage.


def _build_x(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.x)
    figures, matrices = _figure([_rows_panel(trace, values, "X", f"X  {shape_text(*values.shape)}", style)], style)
    notes = ["Here X is typed."] if "x" in trace.given else []
    return Built(figures, matrices, notes)


def _build_projections(trace, head: int, style: Style, query: int | None) -> Built:
    if trace.w_q is None:
        idea = "No projection matrices here: Q = K = V = X, as in lecture 003's first attempt."
        return Built([], [], idea=idea)
    d_model, suffix = trace.x.shape[1], _head(trace, head)
    parts = []
    for name, w in (("W_Q", trace.w_q), ("W_K", trace.w_k), ("W_V", trace.w_v)):
        values = as_numpy(w[head])
        title = f"{name}  {shape_text(d_model, values.shape[1])}"
        parts.append(_matrix_panel(values, name, title, style, "input dimension", "output dimension", suffix))
    figures, matrices = _figure(parts, style)
    where = origin(trace, ("w_q", "w_k", "w_v"))
    return Built(figures, matrices, [f"Here: {where}."] if where else [])


def _build_qkv(trace, head: int, style: Style, query: int | None) -> Built:
    n = trace.n_tokens
    if trace.x is not None and trace.w_q is None:  # no projections: one matrix plays all three parts
        values = as_numpy(trace.q[head])
        title = f"Q = K = V = X  {shape_text(*values.shape)}"
        figures, matrices = _figure([_rows_panel(trace, values, "Q", title, style)], style)
        idea = "Without projections each token's query, key and value are all its own row of X."
        return Built(figures, matrices, idea=idea)
    parts = []
    for name, t in (("Q", trace.q), ("K", trace.k), ("V", trace.v)):
        values = as_numpy(t[head])
        width = values.shape[1]
        # No head suffix: three of these sit side by side and the head is named above them.
        if trace.x is None:
            title = f"{name}  {shape_text(n, width)}"
        else:
            d_model = trace.x.shape[1]
            title = (
                f"{name} = X·W_{name}  {shape_text(n, d_model)}·{shape_text(d_model, width)} = {shape_text(n, width)}"
            )
        parts.append(_rows_panel(trace, values, name, title, style))
    figures, matrices = _figure(parts, style)
    return Built(figures, matrices, [CAPTURED_NOTE] if trace.x is None else [])


def _build_scores(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.scores[head])
    n, dk = trace.n_tokens, trace.d_k
    title = f"scores = Q·Kᵀ  {shape_text(n, dk)}·{shape_text(dk, n)} = {shape_text(n, n)}"
    part = _square_panel(trace, values, "scores", title, diverging=True, masked=False, subtitle=_head(trace, head))
    note = f"Here they run from {values.min():.2f} to {values.max():.2f}."
    return Built(*_figure([part], style), [note])


UNIT_VARIANCE = (0.8, 1.25)  # q's and k's entries count as unit-variance within this range
NEAR_ONE = (0.5, 2.0)  # a variance measured over one small map counts as "about 1" within this range


def scaling_notes(trace, head: int) -> list[str]:
    """What the scaled-scores stage says about this head's numbers (tests/test_claims.py checks each)."""
    stats = score_variances(trace, head)
    dk, cells = stats.d_k, trace.n_tokens**2
    if stats.scale == 1.0:
        return [
            f"Scaling is switched off: the scores go to the softmax as they are (their variance is "
            f"{stats.var_scores:.2f} here, with d_k = {dk})."
        ]
    root = 1 / stats.scale
    notes = [
        f"Every score is divided by √{dk} = {root:.3g}, so their variance is divided by {dk} "
        f"(Var(a·X) = a²·Var(X)): here from {stats.var_scores:.2f} to {stats.var_scaled:.2f}."
    ]
    near_one = NEAR_ONE[0] <= stats.var_scaled <= NEAR_ONE[1]
    if UNIT_VARIANCE[0] <= stats.var_q <= UNIT_VARIANCE[1] and UNIT_VARIANCE[0] <= stats.var_k <= UNIT_VARIANCE[1]:
        measured = (
            f"these {cells} scores give {stats.var_scaled:.2f}"
            if near_one
            else f"these {cells} scores give {stats.var_scaled:.2f}: too few numbers to measure it well"
        )
        notes.append(
            f"q's and k's entries have variance {stats.var_q:.2f} and {stats.var_k:.2f}, about 1: that is when "
            f"Var(q·k) is about d_k = {dk} and the scaled variance about 1 ({measured})."
        )
    else:
        outcome = (
            f"the scaled variance happens to be {stats.var_scaled:.2f} anyway"
            if near_one
            else f"so the scaled variance, {stats.var_scaled:.2f}, is not near 1"
        )
        notes.append(
            f"Var(q·k) is about d_k = {dk} only when q's and k's entries have variance 1; here they have "
            f"{stats.var_q:.2f} and {stats.var_k:.2f}, {outcome}. *Why √d_k* runs the fair experiment."
        )
    return notes


def _build_scaled(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.scaled_scores[head])
    n, dk = trace.n_tokens, trace.d_k
    if trace.scale == 1.0:
        title = f"scaled scores: NOT scaled (scale off)  {shape_text(n, n)}"
    else:
        title = f"scaled scores = scores / √{dk} = scores / {1 / trace.scale:.3g}  {shape_text(n, n)}"
    part = _square_panel(
        trace, values, "scaled_scores", title, diverging=True, masked=False, subtitle=_head(trace, head)
    )
    return Built(*_figure([part], style), scaling_notes(trace, head))


def _build_mask(trace, head: int, style: Style, query: int | None) -> Built:
    if trace.mask is None:
        if trace.x is None:
            note = "This model is an encoder: every token sees every other token, before and after it."
        else:
            note = (
                "Causal masking is off: every token sees every other token, before and after it, as in an encoder "
                "(BERT). Switch *causal mask* on to hide the future, as a decoder (GPT) does when it is trained "
                "and when it writes text: each token may only use what comes before it."
            )
        return Built([], [], [note])
    allowed = _allowed(trace)
    n = trace.n_tokens
    values = allowed.astype(np.float64)
    mask_panel = Panel(
        values,
        f"causal mask  {shape_text(n, n)}",
        "1 = may attend, ✕ = hidden",
        row_labels=_tokens(trace),
        col_labels=_tokens(trace),
        x_title="key (attended to)",
        y_title="query (attending)",
        diverging=False,
        allowed=allowed,
        zrange=(0.0, 1.0),
    )
    masked = np.where(allowed, as_numpy(trace.scaled_scores[head]), np.nan)
    masked_part = _square_panel(
        trace, masked, "masked_scores", "masked scores (−∞ where hidden)", diverging=True, masked=True,
        subtitle=_head(trace, head),
    )  # fmt: skip
    figures, matrices = _figure(
        [(mask_panel, Matrix("mask", values, _tokens(trace), _tokens(trace))), masked_part], style
    )
    hidden = int((~allowed).sum())
    note = f"Here {hidden} of the {n * n} cells are hidden: every key after its query."
    return Built(figures, matrices, [note])


def weights_hover(trace, head: int, style: Style = DEFAULT_STYLE) -> np.ndarray | None:
    """Per cell: q_i·k_j = s_ij, s_ij·scale = s'_ij, α_ij = w, with the tokens named (escaped), counted as the
    reader counts (style.index_base)."""
    n = trace.n_tokens
    if n > 64:
        return None
    tokens = [escape(t) for t in trace.tokens]
    s, s2, w = (as_numpy(t[head]) for t in (trace.scores, trace.scaled_scores, trace.weights))
    allowed = np.ones((n, n), bool) if trace.mask is None else trace.mask.cpu().numpy()
    root = 1.0 / trace.scale
    text = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            a, b = subscript(style.index(i)), subscript(style.index(j))
            ij = f"{a},{b}" if n > 9 else f"{a}{b}"
            line = f"query <b>{tokens[i]}</b> → key <b>{tokens[j]}</b>"
            if not allowed[i, j]:
                text[i, j] = f"{line}<br>masked: α{ij} = 0"
                continue
            scaled = f"s{ij} / {root:.3g} = {s2[i, j]:.3f}" if trace.scale != 1.0 else f"not scaled: {s2[i, j]:.3f}"
            text[i, j] = f"{line}<br>q{a}·k{b} = s{ij} = {s[i, j]:.3f}<br>{scaled}<br>α{ij} = softmax → {w[i, j]:.3f}"
    return text


def _build_weights(trace, head: int, style: Style, query: int | None) -> Built:
    values, n = as_numpy(trace.weights[head]), trace.n_tokens
    beside = style.beside(2)
    part = _square_panel(
        trace,
        values,
        "weights",
        f"attention weights = softmax(rows)  {shape_text(n, n)}",
        diverging=False,
        masked=True,
        subtitle=_head(trace, head),  # on its own line: this map shares its row with the peakiness bars
        hover=weights_hover(trace, head, style),
        zrange=(0.0, 1.0),
    )
    figure = heatmaps([part[0]], beside)
    top = as_numpy(trace.max_weight[head])
    choices = np.ones(n, bool) if trace.mask is None else trace.mask.cpu().numpy().sum(axis=1) > 1
    notes = []
    if choices.any():  # a row that may see only itself is one-hot whatever the numbers
        peaked = int(np.flatnonzero(choices)[np.argmax(top[choices])])
        token = markdown_literal(trace.tokens[peaked])  # shown as written, never as markdown
        notes.append(
            f"Of the rows with more than one token to look at, the most peaked is “{token}” "
            f"(row {style.index(peaked)}): {top[peaked]:.2f} of its attention on one token."
        )
    return Built([figure, peakiness_figure(trace, head, beside)], [part[1]], notes)


def _build_context(trace, head: int, style: Style, query: int | None) -> Built:
    """The context vectors, and, for a chosen query token, its context as the weighted sum of value rows."""
    values = as_numpy(trace.context[head])
    n, dv = trace.n_tokens, trace.d_v
    title = f"context = A·V  {shape_text(n, n)}·{shape_text(n, dv)} = {shape_text(n, dv)}"
    parts = [_rows_panel(trace, values, "context", title, style, subtitle=_head(trace, head))]
    code = ""
    if query is not None:
        parts.append(context_sum_part(trace, head, query, style))
        code = weighted_sum_text(trace, head, query, style)
    notes = ["Under the causal mask each row mixes only the values of its own token and the ones before it."]
    return Built(*_figure(parts, style), notes if trace.mask is not None else [], code=code)


def _build_output(trace, head: int, style: Style, query: int | None) -> Built:
    n, h, dv = trace.n_tokens, trace.n_heads, trace.d_v
    if trace.x is not None and trace.w_q is None:
        return Built([], [], idea="Without projections there is no W_O: the context vectors are the output.")
    concat = as_numpy(trace.concat)
    heads = {1: "head 1", 2: "head 1, head 2"}.get(h, f"head 1 … head {h}")
    concat_panel = Panel(concat, f"concat({heads})  {shape_text(n, h * dv)}", row_labels=_tokens(trace),
                         x_title="head · dimension", y_title="token")  # fmt: skip
    parts = [(concat_panel, Matrix("concat", concat, _tokens(trace), _dims(h * dv, style)))]
    if trace.w_o is not None:
        d_model, w_o = trace.x.shape[1], as_numpy(trace.w_o)
        title = f"W_O  {shape_text(h * dv, d_model)}"
        parts.append(_matrix_panel(w_o, "W_O", title, style, "concat dimension", "output dimension"))
    if trace.output is not None:
        out = as_numpy(trace.output)
        title = f"output = concat·W_O  {shape_text(n, h * dv)}·{shape_text(h * dv, out.shape[1])}"
        parts.append(_rows_panel(trace, out, "output", title, style))
    notes = []
    if trace.w_o is None:
        notes.append("Here only the concatenation is shown: the model applies its own output projection next.")
    return Built(*_figure(parts, style), notes)


# ------------------------------------------------------------------------------------------------
# The registry.

STAGES: tuple[Stage, ...] = (
    Stage(
        "x",
        "X",
        "Input embeddings X",
        r"X \in \mathbb{R}^{n \times d_{model}}",
        "Each row is one token's vector: its meaning (and, with positional encoding, its position). "
        "No row knows anything about its neighbours yet.",
        True,
        _build_x,
    ),
    Stage(
        "projections",
        "W_Q W_K W_V",
        "Projection matrices W_Q, W_K, W_V",
        r"W_Q, W_K \in \mathbb{R}^{d_{model} \times d_k}, \quad W_V \in \mathbb{R}^{d_{model} \times d_v}",
        "Three learned matrices, shared by every token: what to ask, what to advertise, what to share.",
        True,
        _build_projections,
    ),
    Stage(
        "qkv",
        "Q K V",
        "Queries, keys and values",
        r"Q = X W_Q, \quad K = X W_K, \quad V = X W_V",
        f"Every token makes three cards ({link('Q, K, V')}): a query (what am I looking for?), a key "
        "(what do I offer?) and a value (what do I pass on?). All tokens at once, in one matrix product each.",
        False,
        _build_qkv,
    ),
    Stage(
        "scores",
        "QKᵀ",
        "Attention scores QKᵀ",
        r"S = Q K^{\top}, \qquad S_{ij} = q_i \cdot k_j",
        f"Row i, column j: how well token i's query matches token j's key. {link('Scores', 'scores vs weights')} "
        "are unbounded numbers, not yet percentages.",
        False,
        _build_scores,
        grid="scores",
    ),
    Stage(
        "scaled_scores",
        "/√d_k",
        "Scale by √d_k",
        r"S' = \frac{Q K^{\top}}{\sqrt{d_k}}",
        f"A dot product of d_k independent terms has d_k times the variance of one; dividing by {link('√d_k')} takes "
        "that factor away, so the softmax does not get peakier just because d_k is larger.",
        False,
        _build_scaled,
        grid="scaled_scores",
    ),
    Stage(
        "mask",
        "mask",
        "Causal mask",
        r"M_{ij} = \begin{cases} S'_{ij} & j \le i \\ -\infty & j > i \end{cases}",
        f"A {link('causal mask')} hides from each token the tokens after it: −∞ before the softmax, "
        "so exactly 0 after it.",
        False,
        _build_mask,
        grid="masked_scores",
    ),
    Stage(
        "weights",
        "softmax",
        "Softmax → attention weights",
        r"A = \operatorname{softmax}_{\text{row}}(S'), \qquad A_{ij} = \frac{e^{S'_{ij}}}{\sum_{l} e^{S'_{il}}}",
        "Each row now sums to 1: the share of attention token i pays to each token. Scores are raw "
        f"similarities; weights are percentages. Hover a cell for its arithmetic; the bars say how "
        f"{link('peaked', 'entropy and effective tokens')} each row is.",
        False,
        _build_weights,
        grid="weights",
    ),
    Stage(
        "context",
        "·V",
        "Context vectors",
        r"C = A V, \qquad c_i = \sum_j A_{ij}\, v_j",
        "Each token's new vector is a weighted sum of the value vectors, weighted by its row of attention.",
        False,
        _build_context,
        per_query=True,
    ),
    Stage(
        "output",
        "concat·W_O",
        "Concatenate the heads, project with W_O",
        r"\text{MultiHead}(X) = \text{Concat}(C_1, \dots, C_h)\, W_O",
        "The heads' context vectors are put side by side and W_O maps them back to d_model, "
        "so the output has the same shape as X and layers can be stacked.",
        False,
        _build_output,
    ),
)
BY_KEY = {stage.key: stage for stage in STAGES}
GRID_STAGES = tuple(stage for stage in STAGES if stage.grid)  # the maps the Multi-head page offers


def stages_for(trace) -> tuple[Stage, ...]:
    """The stages this trace can show: a real model's starts at Q, K, V."""
    return tuple(stage for stage in STAGES if trace.x is not None or not stage.needs_x)


def heading(key: str) -> str:
    """ "5 · Scale by √d_k": numbered by the stage's place in the pipeline."""
    index = [stage.key for stage in STAGES].index(key)
    return f"{index + 1} · {STAGES[index].title}"


def stage_view(trace, key: str, head: int = 0, style: Style = DEFAULT_STYLE, query: int | None = None) -> StageView:
    """Build the view of one stage for one head (and, for a per-query stage, one query token in detail)."""
    if key not in BY_KEY:
        raise ValueError(f"stage must be one of {', '.join(BY_KEY)}; got {key!r}")
    if not 0 <= head < trace.n_heads:
        raise ValueError(f"head must be between 1 and {trace.n_heads}; got {head + 1}")
    stage = BY_KEY[key]
    if query is not None and not 0 <= query < trace.n_tokens:
        raise ValueError(f"query token must be between 1 and {trace.n_tokens}; got {query + 1}")
    built = stage.build(trace, head, style, query if stage.per_query else None)
    explanation = " ".join([built.idea or stage.idea, *built.notes])
    return StageView(key, heading(key), stage.formula, explanation, built.figures, built.matrices, built.code)


__all__ = [
    "BY_KEY",
    "GRID_STAGES",
    "STAGES",
    "Built",
    "Stage",
    "StageView",
    "heading",
    "scaling_notes",
    "stage_view",
    "stages_for",
    "weights_hover",
]
