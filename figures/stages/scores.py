"""The builders of the scores, their scaling by √d_k, the causal mask and the softmax: the stages whose numbers
the claims about variance and peakedness read."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attention_core.composed import parse_mask, sentence_rule, sentences
from attention_core.lectures import weight_text
from attention_core.masks import window_of
from attention_core.scaling import score_variances
from figures.glossary import link
from figures.heatmap import Panel, heatmaps
from figures.peakiness import peakiness_figure
from figures.stages.bent import block_note, block_panel
from figures.stages.panels import allowed_cells, head_title, laid_out, square_panel, tokens_of
from figures.stages.records import Built
from figures.style import (
    DEFAULT_STYLE,
    Matrix,
    Style,
    Title,
    as_numpy,
    escape,
    markdown_literal,
    shape_text,
    subscript,
)


def build_scores(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.scores[head])
    n, dk = trace.n_tokens, trace.d_qk
    title = Title("scores", "Q·Kᵀ", f"{shape_text(n, dk)}·{shape_text(dk, n)} = {shape_text(n, n)}")
    part = square_panel(trace, values, "scores", title, diverging=True, masked=False, subtitle=head_title(trace, head))
    note = f"Here they run from {values.min():.2f} to {values.max():.2f}."
    return Built(*laid_out([part], style), [note])


UNIT_VARIANCE = (0.8, 1.25)  # q's and k's entries count as unit-variance within this range
NEAR_ONE = (0.5, 2.0)  # a variance measured over one small map counts as "about 1" within this range


def scaling_notes(trace, head: int) -> list[str]:
    """What the scaled-scores stage says about this head's numbers (tests/test_claims.py checks each)."""
    stats = score_variances(trace, head)
    dk, cells = stats.d_qk, trace.n_tokens**2
    if cells == 1:
        return [
            "With one token there is one score, and a single number has no variance to measure: the √d_k "
            "argument needs many scores (*Why √d_k* runs it)."
        ]
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
    if not math.isclose(root * root, dk, rel_tol=1e-6):  # a model's own scale (Gemma: 1/√query_pre_attn_scalar)
        return [
            f"This model scales by its own factor, 1/{root:.3g} (= 1/√{root * root:.4g}), not by 1/√d_k = "
            f"1/√{dk}: the variance is divided by {root * root:.4g}, here from {stats.var_scores:.2f} to "
            f"{stats.var_scaled:.2f}."
        ]
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


def build_scaled(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.scaled_scores[head])
    n, dk = trace.n_tokens, trace.d_qk
    if trace.softcap:  # Gemma 2: scaled by its own factor, then capped
        c = f"{trace.softcap:g}"
        formula = f"{c}·tanh(scores · {trace.scale:.3g} / {c})"
        title = Title("scaled, soft-capped scores", formula, shape_text(n, n))
    elif trace.scale == 1.0 and dk != 1:  # at d_k = 1 scaled and not are the same numbers
        title = Title("scaled scores: NOT scaled (scale off)", shape=shape_text(n, n))
    elif not math.isclose(trace.scale**-2, dk, rel_tol=1e-6):  # the model's own scale
        title = Title("scaled scores", f"scores × {trace.scale:.3g} (this model's scale)", shape_text(n, n))
    else:
        title = Title("scaled scores", f"scores / √{dk} = scores / {1 / trace.scale:.3g}", shape_text(n, n))
    part = square_panel(
        trace, values, "scaled_scores", title, diverging=True, masked=False, subtitle=head_title(trace, head)
    )
    notes = scaling_notes(trace, head)
    if trace.softcap:
        notes.insert(
            0,
            f"This model soft-caps its scores: each scaled score s becomes c·tanh(s/c) with c = {trace.softcap:g}, "
            f"so no score leaves ±{trace.softcap:g} (Gemma 2). Small scores pass almost unchanged; large ones are "
            "flattened, which keeps the softmax from becoming one-hot.",
        )
    if "q_c" in trace.parts:  # MLA's content queries, with (or without) a rotary part beside them
        content = trace.parts["q_c"].shape[-1]
        notes.insert(
            0,
            f"MLA's queries and keys are a content part and a rotary part side by side, so d_k here is "
            f"d_h + d_h^R = {content} + {dk - content} = {dk}, as DeepSeek-V2 scales them.",
        )
    return Built(*laid_out([part], style), notes)


def build_mask(trace, head: int, style: Style, query: int | None, mask_block: str = "2") -> Built:
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
    allowed = allowed_cells(trace)
    n = trace.n_tokens
    values = allowed.astype(np.float64)
    mask_panel = Panel(
        values,
        Title(mask_title(trace), shape=shape_text(n, n)),
        "1 = may attend, ✕ = hidden",
        row_labels=tokens_of(trace),
        col_labels=tokens_of(trace),
        x_title="key (attended to)",
        y_title="query (attending)",
        diverging=False,
        allowed=allowed,
        zrange=(0.0, 1.0),
    )
    before = trace.scaled_scores if trace.bent_scores is None else trace.bent_scores  # bent first, where bent
    masked = np.where(allowed, as_numpy(before[head]), np.nan)
    masked_part = square_panel(
        # two spaces: where the title is too wide, what follows them moves to the subtitle line, not cut
        trace,
        masked,
        "masked_scores",
        Title("masked scores", shape="(−∞ where hidden)"),
        diverging=True,
        masked=True,
        subtitle=head_title(trace, head),
    )
    asked = int(mask_block)
    block = max(asked, -(-n // BLOCKS_MOST))  # a long sentence's blocks: at most BLOCKS_MOST a side
    mask_part = (mask_panel, Matrix("mask", values, tokens_of(trace), tokens_of(trace)))
    # A slide has room for two maps: a composed mask's blocks (what its pieces save), else the masked scores.
    parts = [mask_part, masked_part, block_panel(trace, block, style)]
    if style.band:
        parts = [mask_part, parts[2]] if trace.composed else [mask_part, masked_part]
    figures, matrices = laid_out(parts, style)
    said = composed_note(trace, style.band) if trace.composed else mask_note(trace.mask, trace.top_k)
    raised = (
        f" (Blocks of {asked} would be {-(-n // asked)} a side: drawn at {block}, at most {BLOCKS_MOST} a side.)"
        if block > asked
        else ""
    )
    blocks = [block_note(trace, block) + raised] if len(parts) == 3 or trace.composed else []
    return Built(figures, matrices, [said, *blocks], idea=COMPOSED_IDEA if trace.composed else None)


BLOCKS_MOST = 16  # the block map's blocks a side at most: a larger block for a long sentence (a real model's 128)
COMPOSED_IDEA = (
    f"A {link('composed mask')}: pieces, each a mask_mod (True where query i may see key j), joined by & (a key both "
    "keep) and | (one either keeps); −∞ before the softmax for the rest."
)


def composed_note(trace, slide: bool = False) -> str:
    """A composed mask in words, what it hides and the keys each query keeps (read off the mask); with a document
    piece, how many sentences and the rule that cut them (on a slide, where a line is precious, how many alone: the
    page read normally and the glossary say the rule)."""
    kept = trace.mask.sum(dim=1)
    n, hidden = trace.n_tokens, int((~trace.mask).sum())
    least, most = int(kept.min()), int(kept.max())
    keeps = f"{least} {'key' if least == 1 else 'keys'}" if least == most else f"from {least} to {most} keys"
    mask = parse_mask(trace.composed)
    said = f"Here: {mask.words()}. {hidden} of the {n * n} cells are hidden; each query keeps {keeps}."
    if any(piece.key == "document" for piece in mask.pieces()):
        count = int(sentences(trace.tokens).max()) + 1
        said += f" {count} {'sentence' if count == 1 else 'sentences'}" + (
            "." if slide else f": {sentence_rule(trace.tokens)}"
        )
    return said


def mask_title(trace) -> str:
    """ "causal mask", "window mask", "top-k mask" or "composed mask": what hides the keys."""
    if trace.composed:
        return "composed mask"
    if trace.top_k:
        return "top-k mask"
    return "causal mask" if window_of(trace.mask) is None else "window mask"


def mask_note(mask, top_k: int = 0) -> str:
    """What the mask hides, read off the mask itself ([n, n] bool tensor, True = may see): the future, and a sliding
    window's far past, with the sinks every query keeps and the most keys a row keeps (what a decoder's KV cache
    must hold); or, with DSA's top-k, the keys chosen."""
    allowed = mask.cpu().numpy()
    n = allowed.shape[0]
    hidden = int((~allowed).sum())
    if top_k:
        most = int(allowed.sum(axis=1).max())
        return (
            f"Here {hidden} of the {n * n} cells are hidden. Each query keeps at most {top_k} keys"
            + (f" (here {most} at most)" if most < top_k else "")
            + ", the ones DeepSeek's indexer scores highest of those the mask leaves it, the same for every head. "
            "The indexer is an oracle: Σ over heads of ReLU(q·k/√d_k). The cache still keeps every key: a later "
            "query may choose any."
        )
    window = window_of(mask.cpu())
    if window is None:
        return f"Here {hidden} of the {n * n} cells are hidden: every key after its query."
    sinks, w, most = window
    far = int((~allowed & np.tri(n, dtype=bool)).sum())  # hidden at or before the query: the window's doing
    kept = f"the first {sinks} tokens (sinks, which every query keeps) and " if sinks else ""
    return (
        f"Here {hidden} of the {n * n} cells are hidden: every key after its query, and {far} too far back for "
        f"the sliding window. Each query sees {kept}its last {w} {'key' if w == 1 else 'keys'}, its own included: "
        f"at most {most} a row, so a decoder's KV cache need hold no more than {most} {'key' if most == 1 else 'keys'}."
    )


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
    how = "softmax with the sink" if "sink_share" in trace.parts else "softmax"  # a learned sink's column joins it
    if trace.signed:  # differential attention: each cell's two softmaxes, and λ
        first, second = (as_numpy(trace.parts[name][head]) for name in ("weights_1", "weights_2"))
        lam = trace.lam
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
            if trace.signed:
                how = f"A₁ − λ·A₂ = {first[i, j]:.3f} − {lam:.3f}·{second[i, j]:.3f}"
            text[i, j] = f"{line}<br>q{a}·k{b} = s{ij} = {s[i, j]:.3f}<br>{scaled}<br>α{ij} = {how} → {w[i, j]:.3f}"
    return text


def weights_formula(trace) -> str:
    """The weights map's formula in its title: each row's softmax, with a learned sink's column where it joins, or
    differential attention's difference of two."""
    if trace.signed:
        return f"A₁ − {trace.lam:.3f}·A₂"
    return "softmax(rows, sink)" if "sink_share" in trace.parts else "softmax(rows)"


def one_key_note(trace) -> str:
    """What the weights are where every row has one token to look at: 1 whatever the scores; with a learned sink, 1
    less the sink's share; in differential attention, 1 − λ (each map gives the token 1)."""
    if trace.signed:
        return (
            "Every row here has one token to look at: each map gives it 1 whatever the scores, so A gives it "
            f"1 − λ = {1 - trace.lam:.3f}."
        )
    if "sink_share" in trace.parts:
        return (
            "Every row here has one token to look at: it shares the row with the sink, so its weight is 1 less the "
            "sink's share, e^S′ / (e^S′ + e^s): its one score against the sink's logit decides it."
        )
    return "Every row here has one token to look at, so its weight on it is 1 whatever the scores."


WIDE_MAP_TOKENS = 8  # with more tokens the weights map takes 3/5 of the row it shares with the peakiness bars


def build_weights(trace, head: int, style: Style, query: int | None) -> Built:
    values, n = as_numpy(trace.weights[head]), trace.n_tokens
    # Many tokens: the map needs the room more than the bars do (lecture 003's 15 on a 1400 x 900 slide: a map 112
    # pixels wide in half of the column, 186 in 3/5 of it).
    shares = (3, 2) if n > WIDE_MAP_TOKENS else (1, 1)
    beside = bars = style  # one under the other: each the whole width
    if style.side_by_side:
        beside, bars = (dataclasses.replace(style, width=style.width * share // sum(shares)) for share in shares)
    part = square_panel(
        trace,
        values,
        "weights",
        Title("attention weights", weights_formula(trace), shape_text(n, n)),
        diverging=trace.signed,  # a negative weight (differential attention) in the other colour, as such
        masked=True,
        subtitle=head_title(trace, head),  # on its own line: this map shares its row with the peakiness bars
        hover=weights_hover(trace, head, style),
        zrange=None if trace.signed else (0.0, 1.0),
    )
    figure = heatmaps([part[0]], beside)
    top = as_numpy(trace.max_weight[head])
    seen = np.full(n, n) if trace.mask is None else trace.mask.cpu().numpy().sum(axis=1)  # keys each row sees
    choices = seen > 1
    notes = []
    if not choices.any():
        notes.append(one_key_note(trace))
    if choices.any():  # a row that may see only itself is one-hot whatever the numbers
        peaked = int(np.flatnonzero(choices)[np.argmax(top[choices])])
        token = markdown_literal(trace.tokens[peaked])  # shown as written, never as markdown
        share = f"{weight_text(top[peaked])} of its attention on one token"
        if trace.signed:  # a row that sums to 1 − λ, with negative weights: its largest weight, not a share
            share = f"its largest weight, {top[peaked]:.2f}, on one token, in a row that sums to {1 - trace.lam:.3f}"
        notes.append(
            f"Of the rows with more than one token to look at, the most peaked is “{token}” "
            f"(row {style.index(peaked)}): {share}."
        )
    return Built([figure, peakiness_figure(trace, head, bars)], [part[1]], notes, shares=shares)
