"""The stages of self-attention, as one ordered registry. Plotly and NumPy only; no Streamlit.

A stage is one `Stage` record in STAGES: its key (the trace's own name where it has one), a short
label for buttons, a title, a formula, the idea in one sentence, which traces it applies to (a real
model's trace starts at Q, K, V; MLA's latent applies to MLA only; RoPE wherever positions are
rotary), its builder, and, where it has one, the [heads, n, n] map the Multi-head page draws for
every head, a per-query detail and the choices the reader makes for it (Option). Headings are
numbered by position among the stages a trace shows, pages and tests look stages up by key.
Adding a stage is one record and one builder; a variant's own stages are named in its record
(attention_core/variants.py).

A builder returns its figures, the matrices they export, and `notes`: sentences about the numbers
on screen, computed from them (tests/test_claims.py checks each against the trace).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from attention_core.lectures import weight_text
from attention_core.rotary import BASE as ROPE_BASE
from attention_core.rotary import angles
from attention_core.scaling import score_variances
from attention_core.variants import (
    MHA,
    PRESETS,
    VARIANTS,
    absorbed_scores,
    folded_with_rotated_keys,
    rotation_matrix,
)
from figures.cache import BYTES, CONTEXTS, amount, cache_figure, compared_rows, preset_rows
from figures.context import TERMS_DRAWN, context_sum_part, weighted_sum_text
from figures.glossary import link
from figures.heatmap import Panel, fit_side_by_side, heatmaps
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
    stacked: bool = False  # its figures go one under the other, even where a stage's figures share a row
    shares: tuple[int, ...] = ()  # where its figures share a row: their widths in proportion (none: equal)


@dataclasses.dataclass(frozen=True)
class Option:
    """A choice the reader makes for a stage (a page draws it and passes its value to the builder by key)."""

    key: str
    label: str
    choices: tuple[str, ...]  # as shown, and as the address holds them
    default: str

    def refusal(self, raw: str) -> str:
        """Why a link's value for this choice cannot be used ("" when it can); as ui.controls.Control's."""
        if raw in self.choices:
            return ""
        return (f"The link asked for {self.label} = {raw[:40]!r}, which is not used: it must be one of "
                f"{', '.join(self.choices)}. Showing {self.default!r} instead.")  # fmt: skip


def from_scratch(trace) -> bool:
    """X and the weights exist: a real model's trace starts at Q, K, V."""
    return trace.x is not None


def any_trace(trace) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Stage:
    key: str
    label: str  # short, for buttons: "softmax"
    title: str  # the heading, without its number
    formula: str  # LaTeX
    idea: str  # one sentence (markdown), true whatever the numbers
    applies: Callable[[object], bool]  # which traces show this stage
    build: Callable[..., Built]  # (trace, head, style, query token or None, **options)
    grid: str | None = None  # the [h, n, n] field drawn for every head on the Multi-head page
    per_query: bool = False  # the view can show one chosen query token in detail
    options: tuple[Option, ...] = ()

    def _for(self, trace, field: int, default: str) -> str:
        """A variant's own title, formula or idea for this stage (Variant.stage_text), where it has one."""
        variant = VARIANTS.get(getattr(trace, "variant", None))
        own = variant.stage_text.get(self.key) if variant else None
        return own[field] if own else default

    def title_for(self, trace=None) -> str:
        return self._for(trace, 0, self.title)

    def formula_for(self, trace=None) -> str:
        return self._for(trace, 1, self.formula)

    def idea_for(self, trace=None) -> str:
        return self._for(trace, 2, self.idea)


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
    stacked: bool = False
    shares: tuple[int, ...] = ()  # as Built's


def _tokens(trace) -> list[str]:
    return list(trace.tokens)


def _dims(count: int, style: Style, prefix: str = "d") -> list[str]:
    return [f"{prefix}{style.index(i)}" for i in range(count)]


def _head(trace, head: int) -> str:
    """Which head a figure shows; a one-head trace names itself by its label (e.g. a what-if)."""
    return f"head {head + 1} of {trace.n_heads}" if trace.n_heads > 1 else trace.label


def _allowed(trace) -> np.ndarray | None:
    return None if trace.mask is None else trace.mask.cpu().numpy()


def banded(values: np.ndarray, style: Style, rows: bool, cols: bool) -> np.ndarray:
    """What a map draws of `values` on a slide: along an axis that counts dimensions (`rows`, `cols`) and has more
    than style.band of them, the first style.band (a band: band_note says so beside the maps, and the title keeps
    the whole shape). Token axes are never cut; exports keep every number."""
    band = style.band
    cut_rows, cut_cols = rows and band and values.shape[0] > band, cols and band and values.shape[1] > band
    return values[: band if cut_rows else None, : band if cut_cols else None]


def band_note(parts: list[tuple[Panel, Matrix]], style: Style) -> str:
    """The sentence that says which of these maps `banded` cut (a panel that draws less than its export), ""
    if none."""
    cut = [f"{m.name} {shape_text(*m.values.shape)}" for panel, m in parts if np.shape(panel.matrix) != m.values.shape]
    if not cut:
        return ""
    return f"On this slide: the first {style.band} dimensions of {', '.join(cut)}; the export has every number."


def _rows_panel(trace, values, name: str, title: str, style: Style, subtitle: str = "") -> tuple[Panel, Matrix]:
    """A matrix with one row per token (X, Q, K, V, context, output); on a slide a band of its dimensions."""
    shown = banded(values, style, rows=False, cols=True)
    panel = Panel(shown, title, subtitle, row_labels=_tokens(trace), x_title="dimension", y_title="token")
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
    """A weight matrix (W_Q, W_K, W_V, W_O): numbered rows and columns; on a slide a band of each."""
    rows, cols = values.shape
    panel = Panel(banded(values, style, rows=True, cols=True), title, subtitle, x_title=col_name, y_title=row_name)
    return panel, Matrix(name, values, _dims(rows, style), _dims(cols, style))


MOST_IN_A_ROW = 5  # maps side by side in one figure; more go in two rows


class Drawn(list):
    """A stage's figures, as _figure makes them: `rows`, whether they are the rows of one picture (drawn one under
    the other, never side by side); `band`, the sentence saying which maps draw a band of their numbers."""

    rows: bool = False
    band: str = ""


def _figure(parts: list[tuple[Panel, Matrix]], style: Style) -> tuple[list[Figure], list[Matrix]]:
    """A stage's panels as ONE figure (side by side where the style says so, else stacked), and its exports. Too
    many for one row (MLA's weights), or on a slide too narrow to share one (GPT-2's concat, W_O and output) or to
    write their titles whole (RoPE's five maps): two rows of shorter maps, one screen."""
    panels, matrices = zip(*parts, strict=True)
    crowded = (
        style.side_by_side
        and style.band
        and len(panels) > 1
        and not fit_side_by_side(list(panels), style, whole_titles=True)
    )
    if style.side_by_side and (len(panels) > MOST_IN_A_ROW or crowded):
        half = math.ceil(len(panels) / 2)
        rows = [list(panels[:half]), list(panels[half:])]
        shorter = dataclasses.replace(style, max_map_pixels=style.max_map_pixels * 2 // 5)
        drawn = Drawn(heatmaps(row, shorter) for row in rows)
        drawn.rows = True
    else:
        drawn = Drawn([heatmaps(list(panels), style, stacked=not style.side_by_side)])
    drawn.band = band_note(parts, style)
    return drawn, list(matrices)


def origin(trace, names: tuple[str, ...]) -> str:
    """Where these matrices come from: typed, drawn (with which init and seed) or the model's own."""
    typed = [n for n in names if n in trace.given]
    drawn = [n for n in names if n not in trace.given]
    label = {"x": "X"} | {spec.name: spec.label for spec in VARIANTS[trace.variant].weights}
    parts = []
    if typed:
        parts.append(f"{', '.join(label[n] for n in typed)} {trace.typed_as}")
    if drawn and trace.drawn:
        parts.append(f"{', '.join(label[n] for n in drawn)} random ({trace.drawn})")
    return "; ".join(parts)


def made(given: set[str], needed: set[str], typed_as: str = "typed") -> str:
    """How a layer's weights came to be, in a word or three: "random", `typed_as` ("typed", "trained (...)") when
    every one it needs was given, else "some typed, the rest random". given: the names given; needed: those the
    layer uses."""
    given = given & needed
    if not given:
        return "random"
    return typed_as if given == needed else f"some {typed_as.split(' (')[0]}, the rest random"


# ------------------------------------------------------------------------------------------------
# The builders, one per stage.


def _build_x(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.x)
    figures, matrices = _figure([_rows_panel(trace, values, "X", f"X  {shape_text(*values.shape)}", style)], style)
    notes = [f"Here X is {trace.typed_as}."] if "x" in trace.given else []
    return Built(figures, matrices, notes)


def _copy_of(trace, name: str, head: int) -> tuple[int, str]:
    """Which copy of a per-head weight query head `head` uses, and how to say so."""
    copies = trace.params[name].shape[0]
    if copies == trace.n_heads:
        return head, _head(trace, head)
    kv = trace.copy_for(head, copies)
    readers = ", ".join(str(h + 1) for h in trace.heads_sharing(kv))
    return kv, f"key/value head {kv + 1} of {copies}, read by head{'s' if ',' in readers else ''} {readers}"


def _weight_parts(trace, head: int, style: Style, names: tuple[str, ...]) -> list:
    """The panels of some of the variant's weights (the copy head `head` uses of the per-head ones)."""
    parts = []
    specs = {spec.name: spec for spec in VARIANTS[trace.variant].weight_specs(trace.sizes)}
    for spec in (specs[name] for name in names if name in specs and name in trace.params):
        weight = trace.params[spec.name]
        if spec.kind == "gain":
            continue  # a vector of ones until trained: named in the notes, not drawn
        subtitle = ""
        if weight.dim() == 3:
            copy, subtitle = _copy_of(trace, spec.name, head)
            weight = weight[copy]
        values = as_numpy(weight)
        title = f"{spec.label}  {shape_text(*values.shape)}"
        parts.append(_matrix_panel(values, spec.label, title, style, "input dimension", "output dimension", subtitle))
    return parts


def _build_projections(trace, head: int, style: Style, query: int | None) -> Built:
    if not trace.params:
        idea = "No projection matrices here: Q = K = V = X, as in lecture 003's first attempt."
        return Built([], [], idea=idea)
    rotary_first = ("w_q", "w_dq", "w_uq", "w_qr", "w_kr")  # MLA: the queries and the rotary key, then the latent's
    names = tuple(sorted((n for n in trace.params if n != "w_o"), key=lambda n: n not in rotary_first))
    figures, matrices = _figure(_weight_parts(trace, head, style, names), style)
    variant = VARIANTS[trace.variant]
    notes = []
    if trace.kv_heads < trace.n_heads:
        notes.append(f"{variant.label}: {trace.n_heads} query heads share {trace.kv_heads} key/value "
                     f"head{'s' if trace.kv_heads > 1 else ''}, so W_K and W_V have {trace.kv_heads} "
                     f"cop{'ies' if trace.kv_heads > 1 else 'y'} and W_Q has {trace.n_heads}.")  # fmt: skip
    if note := variant.weights_note(set(trace.params)):
        notes.append(note)
    where = origin(trace, names)
    return Built(figures, matrices, notes + ([f"Here: {where}."] if where else []), stacked=len(figures) > 1)


def _build_qkv(trace, head: int, style: Style, query: int | None) -> Built:
    n = trace.n_tokens
    if trace.x is not None and not trace.params:  # no projections: one matrix plays all three parts
        values = as_numpy(trace.q[head])
        title = f"Q = K = V = X  {shape_text(*values.shape)}"
        figures, matrices = _figure([_rows_panel(trace, values, "Q", title, style)], style)
        idea = "Without projections each token's query, key and value are all its own row of X."
        return Built(figures, matrices, idea=idea)
    parts, notes = [], []
    titles = VARIANTS[trace.variant].qkv_titles  # how the variant makes them, where not X·W_Q, X·W_K, X·W_V
    for i, (name, t) in enumerate((("Q", trace.q), ("K", trace.k), ("V", trace.v))):
        values = as_numpy(t[head])
        width = values.shape[1]
        # No head suffix: three of these sit side by side and the head is named above them.
        if trace.x is None:
            title = f"{name}  {shape_text(n, width)}"
        elif titles:
            title = f"{titles[i]}  {shape_text(n, width)}"
        else:
            d_model = trace.x.shape[1]
            rotated = "RoPE(X·W_{0})" if name != "V" and "q_rotated" in trace.parts else "X·W_{0}"
            title = (f"{name} = {rotated.format(name)}  {shape_text(n, d_model)}·{shape_text(d_model, width)} = "
                     f"{shape_text(n, width)}")  # fmt: skip
        subtitle = ""
        if name != "Q" and trace.kv_heads < trace.n_heads:
            subtitle = _copy_of(trace, "w_k" if name == "K" else "w_v", head)[1] if trace.params else ""
        parts.append(_rows_panel(trace, values, name, title, style, subtitle))
    if trace.x is None:
        notes.append(CAPTURED_NOTE)
    if trace.kv_heads < trace.n_heads:
        notes.append(f"This head reads key/value head {trace.kv_head_of[head] + 1}, with "
                     f"{len(trace.heads_sharing(trace.kv_head_of[head])) - 1} other query head"
                     f"{'s' if len(trace.heads_sharing(trace.kv_head_of[head])) > 2 else ''}: the same K and V, "
                     "its own Q.")  # fmt: skip
    if "k_r" in trace.parts:  # MLA's rotary key: a content part and a rotary part side by side
        d_r = trace.parts["k_r"].shape[-1]
        notes.append(f"Each query and key is its content part (width {trace.d_k - d_r}) and its rotary part "
                     f"(width {d_r}) side by side, so q·k = q^C·k^C + q^R·k^R; k^R is the same for every "
                     "head.")  # fmt: skip
        if not has_rotary(trace):
            notes.append("The positional encoding is not rotary here, so the rotary parts are not turned: choose "
                         "*rotary* to see RoPE carry each token's position.")  # fmt: skip
    figures, matrices = _figure(parts, style)
    return Built(figures, matrices, notes)


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
    if cells == 1:
        return ["With one token there is one score, and a single number has no variance to measure: the √d_k "
                "argument needs many scores (*Why √d_k* runs it)."]  # fmt: skip
    if dk == 1:
        return [
            f"With d_k = 1 each score is one product q·k, and √1 = 1: dividing by it changes nothing, so the "
            f"scores go to the softmax as they are, scaled or not (their variance is {stats.var_scores:.2f} here)."
        ]
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
            f"the scaled variance happens to be {stats.var_scaled:.2f} anyway, near 1 by this page's rule"
            if near_one
            else f"so the scaled variance, {stats.var_scaled:.2f}, is not near 1"
        )
        notes.append(
            f"Var(q·k) is about d_k = {dk} only when q's and k's entries have variance 1; here they have "
            f"{stats.var_q:.2f} and {stats.var_k:.2f}, {outcome} (near 1: from {NEAR_ONE[0]} to {NEAR_ONE[1]:g}). "
            "*Why √d_k* runs the fair experiment."
        )
    return notes


def _build_scaled(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.scaled_scores[head])
    n, dk = trace.n_tokens, trace.d_k
    if trace.scale == 1.0 and dk != 1:  # at d_k = 1 scaled and not are the same numbers
        title = f"scaled scores: NOT scaled (scale off)  {shape_text(n, n)}"
    else:
        title = f"scaled scores = scores / √{dk} = scores / {1 / trace.scale:.3g}  {shape_text(n, n)}"
    part = _square_panel(
        trace, values, "scaled_scores", title, diverging=True, masked=False, subtitle=_head(trace, head)
    )
    notes = scaling_notes(trace, head)
    if "q_c" in trace.parts:  # MLA's content queries, with (or without) a rotary part beside them
        content = trace.parts["q_c"].shape[-1]
        notes.insert(0, f"MLA's queries and keys are a content part and a rotary part side by side, so d_k here is "
                        f"d_h + d_h^R = {content} + {dk - content} = {dk}, as DeepSeek-V2 scales them.")  # fmt: skip
    return Built(*_figure([part], style), notes)


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
        # two spaces: where the title is too wide, what follows them moves to the subtitle line, not cut
        trace, masked, "masked_scores", "masked scores  (−∞ where hidden)", diverging=True, masked=True,
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


WIDE_MAP_TOKENS = 8  # with more tokens the weights map takes 3/5 of the row it shares with the peakiness bars


def _build_weights(trace, head: int, style: Style, query: int | None) -> Built:
    values, n = as_numpy(trace.weights[head]), trace.n_tokens
    # Many tokens: the map needs the room more than the bars do (lecture 003's 15 on a 1400 x 900 slide: a map 112
    # pixels wide in half of the column, 186 in 3/5 of it).
    shares = (3, 2) if n > WIDE_MAP_TOKENS else (1, 1)
    beside = bars = style  # one under the other: each the whole width
    if style.side_by_side:
        beside, bars = (dataclasses.replace(style, width=style.width * share // sum(shares)) for share in shares)
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
    seen = np.full(n, n) if trace.mask is None else trace.mask.cpu().numpy().sum(axis=1)  # keys each row sees
    choices = seen > 1
    notes = []
    if not choices.any():
        notes.append("Every row here has one token to look at, so its weight on it is 1 whatever the scores.")
    if choices.any():  # a row that may see only itself is one-hot whatever the numbers
        peaked = int(np.flatnonzero(choices)[np.argmax(top[choices])])
        token = markdown_literal(trace.tokens[peaked])  # shown as written, never as markdown
        notes.append(
            f"Of the rows with more than one token to look at, the most peaked is “{token}” "
            f"(row {style.index(peaked)}): {weight_text(top[peaked])} of its attention on one token."
        )
    return Built([figure, peakiness_figure(trace, head, bars)], [part[1]], notes, shares=shares)


SLIDE_SUM_TERMS = 6  # a slide (style.band set) draws and writes the weighted sum's largest 6 terms: 12 wrapped past
# its screen, and 20 drawn rows were 7 pixels each


def _build_context(trace, head: int, style: Style, query: int | None) -> Built:
    """The context vectors, and, for a chosen query token, its context as the weighted sum of value rows."""
    values = as_numpy(trace.context[head])
    n, dv = trace.n_tokens, trace.d_v
    title = f"context = A·V  {shape_text(n, n)}·{shape_text(n, dv)} = {shape_text(n, dv)}"
    parts = [_rows_panel(trace, values, "context", title, style, subtitle=_head(trace, head))]
    code = ""
    if query is not None:
        slide = bool(style.band)  # a slide draws and writes the same largest terms
        parts.append(context_sum_part(trace, head, query, style, most=SLIDE_SUM_TERMS if slide else TERMS_DRAWN))
        code = weighted_sum_text(trace, head, query, style, limit=SLIDE_SUM_TERMS if slide else 12)
    notes = ["Under the causal mask each row mixes only the values of its own token and the ones before it."]
    return Built(*_figure(parts, style), notes if trace.mask is not None else [], code=code)


def _build_output(trace, head: int, style: Style, query: int | None) -> Built:
    n, h, dv = trace.n_tokens, trace.n_heads, trace.d_v
    if trace.x is not None and not trace.params:
        return Built([], [], idea="Without projections there is no W_O: the context vectors are the output.")
    concat = as_numpy(trace.concat)
    heads = {1: "head 1", 2: "heads 1, 2"}.get(h, f"heads 1–{h}")  # short: a slide's column is narrow
    concat_panel = Panel(banded(concat, style, rows=False, cols=True), f"concat({heads})  {shape_text(n, h * dv)}",
                         row_labels=_tokens(trace), x_title="head · dimension", y_title="token")  # fmt: skip
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


def _build_latent(trace, head: int, style: Style, query: int | None) -> Built:
    """MLA: the latent c_KV every key and value is made from, and this head's keys and values made from it
    (the weights W_DKV, W_UK, W_UV are on the projections stage)."""
    p, w = trace.parts, trace.params
    n, d_c = trace.n_tokens, p["c_kv"].shape[-1]
    parts = [
        _rows_panel(trace, as_numpy(p["c_kv"]), "c_KV", f"c_KV = RMSNorm(X·W_DKV)  {shape_text(n, d_c)}", style),
        _rows_panel(trace, as_numpy(p["k_c"][head]), "k^C", f"k^C = c_KV·W_UK  {shape_text(n, p['k_c'].shape[-1])}",
                    style, _head(trace, head)),
        _rows_panel(trace, as_numpy(p["v_c"][head]), "V", f"V = c_KV·W_UV  {shape_text(n, trace.d_v)}", style,
                    _head(trace, head)),
    ]  # fmt: skip
    if "c_q" in p:
        parts.insert(0, _rows_panel(trace, as_numpy(p["c_q"]), "c_Q", f"c_Q = RMSNorm(X·W_DQ)  "
                                    f"{shape_text(n, p['c_q'].shape[-1])}", style))  # fmt: skip
    figures, matrices = _figure(parts, style)
    sizes, variant = trace.sizes, VARIANTS[trace.variant]
    mha = MHA.cache_per_token(sizes)
    kept = variant.cache_per_token(sizes)
    rotary = f" and k^R (d_h^R = {sizes.d_rope})" if sizes.d_rope else ""
    heads = "this one head" if trace.n_heads == 1 else f"these {trace.n_heads} heads"
    notes = [
        f"A cache keeps c_KV (d_c = {d_c} numbers){rotary} per token and layer: {kept} numbers, where MHA with "
        f"{heads} keeps h·(d_k + d_v) = {mha}. Each head's k^C and V are made from c_KV when needed, or folded "
        "away (the absorption stage)."
    ]
    gains = [w[name] for name in ("g_kv", "g_q") if name in w]
    if gains and all(bool((g == 1).all()) for g in gains):
        notes.append("RMSNorm scales each latent to a root-mean-square of 1, then by a learned gain (all ones here, "
                     "as before training).")  # fmt: skip
    return Built(figures, matrices, notes)


def has_rotary(trace) -> bool:
    return "q_rotated" in trace.parts


def _shifted_score(q_row, k_row, i: int, j: int, shift: int, base: float) -> float:
    """The score of an unturned query row at position i + shift and key row at j + shift, once both are turned."""
    w = q_row.shape[-1]
    q = q_row.double() @ rotation_matrix(i + shift, w, base)
    k = k_row.double() @ rotation_matrix(j + shift, w, base)
    return float(q @ k)


def _build_rope(trace, head: int, style: Style, query: int | None) -> Built:
    """RoPE: this head's q and k (MLA: their rotary parts) before and after turning, and the angles."""
    p, n = trace.parts, trace.n_tokens

    def head_of(t):  # [h or g, n, w] or [n, w] -> this head's [n, w]
        return t if t.dim() == 2 else t[trace.copy_for(head, t.shape[0])]

    q0, q1, k0, k1 = (head_of(p[name]) for name in ("q_unrotated", "q_rotated", "k_unrotated", "k_rotated"))
    width, base = q0.shape[-1], trace.rope_base
    theta = as_numpy(angles(n, width, base))
    pairs = [f"({style.index(i)}, {style.index(i + width // 2)})" for i in range(width // 2)]
    angle_panel = Panel(theta, f"θ = position · base^(−2i/w)  {shape_text(n, width // 2)}",
                        f"base {base:,.0f}, radians", row_labels=_tokens(trace), col_labels=pairs,
                        x_title="pair", y_title="token", diverging=False)  # fmt: skip
    what = "q^R, k^R (MLA's rotary parts)" if "q_r" in trace.parts else "q, k"
    parts = [
        (angle_panel, Matrix("angles", theta, _tokens(trace), pairs)),
        _rows_panel(trace, as_numpy(q0), "q before", f"q before RoPE  {shape_text(n, width)}", style,
                    _head(trace, head)),
        _rows_panel(trace, as_numpy(q1), "q after", f"q after RoPE  {shape_text(n, width)}", style),
        _rows_panel(trace, as_numpy(k0), "k before", f"k before RoPE  {shape_text(n, width)}", style),
        _rows_panel(trace, as_numpy(k1), "k after", f"k after RoPE  {shape_text(n, width)}", style),
    ]  # fmt: skip
    figures, matrices = _figure(parts, style)
    stretch = float((q1.double().norm(dim=-1) - q0.double().norm(dim=-1)).abs().max())
    notes = [
        f"Here {what}, {_head(trace, head) or 'the one head'}. A turn keeps lengths: a query's length changes by at "
        f"most {stretch:.1e}. The first token, at position 0, is not turned."
    ]
    if n >= 2:
        shift = 5
        a = _shifted_score(q0[1], k0[0], 1, 0, 0, base)
        b = _shifted_score(q0[1], k0[0], 1, 0, shift, base)
        notes.append(
            f"Only distance counts: token {style.index(1)}'s query and token {style.index(0)}'s key score {a:.3f} at "
            f"positions 1 and 0, and {b:.3f} moved {shift} places later."
        )
    return Built(figures, matrices, notes)


def _build_absorb(trace, head: int, style: Style, query: int | None) -> Built:
    """MLA: W_UK folded into the query gives the content scores without ever forming K."""
    p, w, n = trace.parts, trace.params, trace.n_tokens
    absorbed = absorbed_scores(p, w)  # [h, n, n]
    direct = p["q_c"] @ p["k_c"].transpose(-2, -1)
    d_c = p["c_kv"].shape[-1]
    folded_query = as_numpy(p["q_c"][head] @ w["w_uk"][head].T)  # [n, d_c]
    parts = [
        _square_panel(trace, as_numpy(direct[head]), "q^C·k^Cᵀ", f"q^C·k^Cᵀ  {shape_text(n, n)}", diverging=True,
                      masked=False, subtitle=f"K formed · {_head(trace, head) or 'content scores'}"),
        _square_panel(trace, as_numpy(absorbed[head]), "(q^C·W_UKᵀ)·c_KVᵀ", f"(q^C·W_UKᵀ)·c_KVᵀ  {shape_text(n, n)}",
                      diverging=True, masked=False, subtitle="K never formed"),
    ]  # fmt: skip
    figures, matrices = _figure(parts, style)
    matrices.insert(0, Matrix("q^C·W_UKᵀ", folded_query, _tokens(trace), [style.index(i) for i in range(d_c)]))
    gap = float((absorbed[head] - direct[head]).abs().max())
    notes = [f"The two maps agree to {gap:.1e} (rounding). W_UV folds into W_O the same way."]
    why = ("Why the position travels apart, in k^R: were k^C turned by RoPE, a rotation that depends on the key's "
           "position would sit between q^C and W_UK")  # fmt: skip
    content = p["q_c"].shape[-1]  # d_k of the content part (trace.d_k counts the rotary part too)
    if n >= 2 and content % 2 == 0:
        exact, folded = folded_with_rotated_keys(p, w, trace.rope_base or ROPE_BASE)
        off = float((exact[head, :, 1:] - folded[head, :, 1:]).abs().max())
        notes.append(f"{why}. Folded in for a key at position 0, W_UK gives this head's scores exactly in that "
                     f"column and off by up to {off:.3g} in the others.")  # fmt: skip
    elif n >= 2:
        notes.append(f"{why}, so one fold of W_UK could not serve every key. (RoPE turns pairs of dimensions: with "
                     f"an even d_k this stage shows the numbers; d_k = {content} here.)")  # fmt: skip
    return Built(figures, matrices, notes)


def _build_cache(trace, head: int, style: Style, query: int | None, kv_bytes: str = "fp16/bf16",
                 kv_context: str = "32k") -> Built:  # fmt: skip
    """What a KV cache keeps per token: every variant at these sizes, and published models at theirs."""
    per, kv_context = BYTES[kv_bytes], CONTEXTS[kv_context]
    here, presets = compared_rows(trace.sizes, trace.variant), preset_rows()
    figures = [
        cache_figure(here, "KV cache per token and layer, at these sizes", kv_bytes, kv_context, style),
        cache_figure(presets, "KV cache per token, all layers, at published sizes", kv_bytes, kv_context, style,
                     log=True),
    ]  # fmt: skip
    rows = [*here, *presets]
    values = np.array([[r.per_token, r.per_token * per, r.per_token * per * kv_context] for r in rows], float)
    matrices = [Matrix("kv_cache", values, [r.name for r in rows],
                       ["numbers per token", "bytes per token", f"bytes for {kv_context:,} tokens"])]  # fmt: skip
    current = next(r for r in here if r.variant == trace.variant)
    deepseek, as_mha = (next(r for r in presets if r.name == p.name) for p in PRESETS[:2])
    notes = [
        f"Here ({VARIANTS[trace.variant].label}): {current.formula} numbers per token and layer, "
        f"{amount(current.per_token * kv_context, per)} for {kv_context:,} tokens in {kv_bytes}.",
        f"DeepSeek-V2's MLA keeps {deepseek.per_token:,} per token in 60 layers; MHA would keep "
        f"{as_mha.per_token:,}: {as_mha.per_token / deepseek.per_token:.1f}× more.",
    ]
    return Built(figures, matrices, notes, stacked=True)


def brought_by_variant(key: str) -> Callable[[object], bool]:
    """A stage's `applies` for a stage a variant lists as its own (Variant.stages: MLA's latent, absorption)."""
    return lambda trace: from_scratch(trace) and key in VARIANTS[trace.variant].stages


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
        from_scratch,
        _build_x,
    ),
    Stage(
        "projections",
        "W_Q W_K W_V",
        "Projection matrices W_Q, W_K, W_V",
        r"W_Q, W_K \in \mathbb{R}^{d_{model} \times d_k}, \quad W_V \in \mathbb{R}^{d_{model} \times d_v}",
        "Three learned matrices, shared by every token: what to ask, what to advertise, what to share.",
        from_scratch,
        _build_projections,
    ),
    Stage(
        "latent",
        "c_KV",
        "MLA: the latent c_KV",
        r"\begin{aligned} c^{KV} &= \operatorname{RMSNorm}(X W^{DKV}) \\ k^C_h = c^{KV} W^{UK}_h, & \quad "
        r"v_h = c^{KV} W^{UV}_h \end{aligned}",
        f"DeepSeek's multi-head latent attention ({link('MLA')}) squeezes each token into one small latent c_KV; "
        "every head makes its keys and values from it.",
        brought_by_variant("latent"),
        _build_latent,
    ),
    Stage(
        "rope",
        "RoPE",
        "Rotary positions (RoPE)",
        r"\begin{aligned} \theta_{p,i} &= p \cdot b^{-2i/w} \\ (x_i,\, x_{i+w/2}) &\mapsto R(\theta_{p,i})\,(x_i,\,"
        r"x_{i+w/2}) \end{aligned}",
        "Instead of adding a position to X, RoPE turns (R: a rotation) each pair of a query's and a key's "
        f"dimensions by an angle that grows with the position ({link('RoPE')}, {link('positional encoding')}).",
        has_rotary,
        _build_rope,
    ),
    Stage(
        "qkv",
        "Q K V",
        "Queries, keys and values",
        r"Q = X W_Q, \quad K = X W_K, \quad V = X W_V",
        f"Every token makes three cards ({link('Q, K, V')}): a query (what am I looking for?), a key "
        "(what do I offer?) and a value (what do I pass on?). All tokens at once, in one matrix product each.",
        any_trace,
        _build_qkv,
    ),
    Stage(
        "scores",
        "QKᵀ",
        "Attention scores QKᵀ",
        r"S = Q K^{\top}, \qquad S_{ij} = q_i \cdot k_j",
        f"Row i, column j: how well token i's query matches token j's key. {link('Scores', 'scores vs weights')} "
        "are unbounded numbers, not yet percentages.",
        any_trace,
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
        any_trace,
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
        any_trace,
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
        any_trace,
        _build_weights,
        grid="weights",
    ),
    Stage(
        "context",
        "·V",
        "Context vectors",
        r"C = A V, \qquad c_i = \sum_j A_{ij}\, v_j",
        "Each token's new vector is a weighted sum of the value vectors, weighted by its row of attention.",
        any_trace,
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
        any_trace,
        _build_output,
    ),
    Stage(
        "absorb",
        "absorb W_UK",
        "MLA: absorbing W_UK into the query",
        r"q^C_h (c^{KV} W^{UK}_h)^{\top} = (q^C_h W^{UK\top}_h)\, c^{KV\top}",
        "Matrix products regroup: with W_UK folded into the query, the content scores come out the same, so a "
        "decoder compares each new query with the cached latents c_KV and never forms the keys.",
        brought_by_variant("absorb"),
        _build_absorb,
    ),
    Stage(
        "cache",
        "KV cache",
        "The KV cache, per token",
        r"\begin{aligned} \text{MHA: } & h(d_k + d_v) & \text{GQA: } & g(d_k + d_v) \\ \text{MQA: } & d_k + d_v "
        r"& \text{MLA: } & d_c + d_h^R \end{aligned}",
        f"A decoder keeps the keys and values of every token so far ({link('KV cache')}); the variants change "
        "how many.",
        from_scratch,
        _build_cache,
        options=(
            Option("kv_bytes", "bytes per number", tuple(BYTES), "fp16/bf16"),
            Option("kv_context", "context length (tokens)", tuple(CONTEXTS), "32k"),
        ),
    ),
)
BY_KEY = {stage.key: stage for stage in STAGES}
VARIANT_STAGES = (
    "latent",
    "rope",
    "absorb",
    "cache",
)  # the stages the variants brought (the Multi-head page adds them)
GRID_STAGES = tuple(stage for stage in STAGES if stage.grid)  # the maps the Multi-head page offers


def stages_for(trace) -> tuple[Stage, ...]:
    """The stages this trace shows: a real model's starts at Q, K, V; a variant's own where they apply."""
    return tuple(stage for stage in STAGES if stage.applies(trace))


def heading(key: str, trace=None) -> str:
    """ "5 · Scale by √d_k": numbered by the stage's place among the stages the trace shows (all, without one)."""
    keys = [stage.key for stage in (stages_for(trace) if trace is not None else STAGES)]
    index = keys.index(key) if key in keys else [stage.key for stage in STAGES].index(key)
    return f"{index + 1} · {BY_KEY[key].title_for(trace)}"


def stage_view(trace, key: str, head: int = 0, style: Style = DEFAULT_STYLE, query: int | None = None,
               options: dict | None = None) -> StageView:  # fmt: skip
    """Build the view of one stage for one head (and, for a per-query stage, one query token in detail; for a
    stage with choices, `options` by key: missing ones take their defaults)."""
    if key not in BY_KEY:
        raise ValueError(f"stage must be one of {', '.join(BY_KEY)}; got {key!r}")
    if not 0 <= head < trace.n_heads:
        raise ValueError(f"head must be between 1 and {trace.n_heads}; got {head + 1}")
    stage = BY_KEY[key]
    if not stage.applies(trace):
        raise ValueError(f"the stage {stage.title!r} does not apply to this trace ({VARIANTS[trace.variant].label})")
    if query is not None and not 0 <= query < trace.n_tokens:
        raise ValueError(f"query token must be between 1 and {trace.n_tokens}; got {query + 1}")
    chosen = {}
    for option in stage.options:
        value = (options or {}).get(option.key, option.default)
        if value not in option.choices:
            raise ValueError(f"{option.label} must be one of {', '.join(option.choices)}; got {value!r}")
        chosen[option.key] = value
    built = stage.build(trace, head, style, query if stage.per_query else None, **chosen)
    drawn = built.figures if isinstance(built.figures, Drawn) else Drawn(built.figures)
    explanation = " ".join(filter(None, [built.idea or stage.idea_for(trace), *built.notes, drawn.band]))
    return StageView(key, heading(key, trace), stage.formula_for(trace), explanation, list(built.figures),
                     built.matrices, built.code, built.stacked or drawn.rows, built.shares)  # fmt: skip


__all__ = [
    "BY_KEY",
    "VARIANT_STAGES",
    "GRID_STAGES",
    "STAGES",
    "Built",
    "Option",
    "Stage",
    "StageView",
    "heading",
    "scaling_notes",
    "stage_view",
    "stages_for",
    "weights_hover",
]
