"""The builders of the context vectors and the output, and of the stages the variants bring: MLA's latent and
absorption, RoPE, and the KV cache."""

from __future__ import annotations

import numpy as np

from attention_core.composed import parse_mask
from attention_core.masks import window_of
from attention_core.rotary import BASE as ROPE_BASE
from attention_core.rotary import angles
from attention_core.variants import (
    MHA,
    PRESETS,
    VARIANTS,
    absorbed_scores,
    folded_with_rotated_keys,
    look_of,
    rotation_matrix,
)
from figures.cache import BYTES, CONTEXTS, amount, cache_figure, compared_rows, preset_rows
from figures.context import TERMS_DRAWN, context_sum_part, weighted_sum_text
from figures.heatmap import Panel
from figures.stages.panels import (
    banded,
    dim_labels,
    head_title,
    laid_out,
    matrix_panel,
    rows_panel,
    square_panel,
    tokens_of,
)
from figures.stages.records import Built
from figures.style import (
    Matrix,
    Style,
    Title,
    as_numpy,
    shape_text,
)

SLIDE_SUM_TERMS = 6  # a slide (style.band set) draws and writes the weighted sum's largest 6 terms: 12 wrapped past
# its screen, and 20 drawn rows were 7 pixels each


def build_context(trace, head: int, style: Style, query: int | None) -> Built:
    """The context vectors, and, for a chosen query token, its context as the weighted sum of value rows."""
    values = as_numpy(trace.context[head])
    n, dv = trace.n_tokens, trace.d_v
    title = Title("context", "A·V", f"{shape_text(n, n)}·{shape_text(n, dv)} = {shape_text(n, dv)}")
    parts = [rows_panel(trace, values, "context", title, style, subtitle=head_title(trace, head))]
    code = ""
    if query is not None:
        slide = bool(style.band)  # a slide draws and writes the same largest terms
        parts.append(context_sum_part(trace, head, query, style, most=SLIDE_SUM_TERMS if slide else TERMS_DRAWN))
        code = weighted_sum_text(trace, head, query, style, limit=SLIDE_SUM_TERMS if slide else 12)
    notes = ["Under the causal mask each row mixes only the values of its own token and the ones before it."]
    return Built(*laid_out(parts, style), notes if trace.mask is not None else [], code=code)


def build_output(trace, head: int, style: Style, query: int | None) -> Built:
    n, h, dv = trace.n_tokens, trace.heads, trace.d_v
    if trace.x is not None and not trace.params:
        return Built([], [], idea="Without projections there is no W_O: the context vectors are the output.")
    concat = as_numpy(trace.concat)
    heads = {1: "head 1", 2: "heads 1, 2"}.get(h, f"heads 1–{h}")  # short: a slide's column is narrow
    concat_panel = Panel(
        banded(concat, style, rows=False, cols=True),
        Title(f"concat({heads})", shape=shape_text(n, h * dv)),
        row_labels=tokens_of(trace),
        x_title="head · dimension",
        y_title="token",
    )
    parts = [(concat_panel, Matrix("concat", concat, tokens_of(trace), dim_labels(h * dv, style)))]
    if trace.w_o is not None:
        d_model, w_o = trace.x.shape[1], as_numpy(trace.w_o)
        title = Title("W_O", shape=shape_text(h * dv, d_model))
        parts.append(matrix_panel(w_o, "W_O", title, style, "concat dimension", "output dimension"))
    if trace.output is not None:
        out = as_numpy(trace.output)
        how = look_of(trace.variant).output_title
        shapes = f"{shape_text(n, h * dv)}·{shape_text(h * dv, out.shape[1])}" if trace.w_o is not None else ""
        title = Title("output", how, shapes or shape_text(n, out.shape[1]))
        parts.append(rows_panel(trace, out, "output", title, style))
    notes = []
    if trace.output is None:
        notes.append("Here only the concatenation is shown: the model applies its own output projection next.")
    return Built(*laid_out(parts, style), notes)


def build_latent(trace, head: int, style: Style, query: int | None) -> Built:
    """MLA: the latent c_KV every key and value is made from, and this head's keys and values made from it
    (the weights W_DKV, W_UK, W_UV are on the projections stage)."""
    p, w = trace.parts, trace.params
    n, d_c = trace.n_tokens, p["c_kv"].shape[-1]
    parts = [
        rows_panel(trace, as_numpy(p["c_kv"]), "c_KV", Title("c_KV", "RMSNorm(X·W_DKV)", shape_text(n, d_c)), style),
        rows_panel(
            trace,
            as_numpy(p["k_c"][head]),
            "k^C",
            Title("k^C", "c_KV·W_UK", shape_text(n, p["k_c"].shape[-1])),
            style,
            head_title(trace, head),
        ),
        rows_panel(
            trace,
            as_numpy(p["v_c"][head]),
            "V",
            Title("V", "c_KV·W_UV", shape_text(n, trace.d_v)),
            style,
            head_title(trace, head),
        ),
    ]
    if "c_q" in p:
        parts.insert(
            0,
            rows_panel(
                trace,
                as_numpy(p["c_q"]),
                "c_Q",
                Title("c_Q", "RMSNorm(X·W_DQ)", shape_text(n, p["c_q"].shape[-1])),
                style,
            ),
        )
    figures, matrices = laid_out(parts, style)
    sizes, variant = trace.sizes, VARIANTS[trace.variant]
    mha = MHA.cache_per_token(sizes)
    kept = variant.cache_per_token(sizes)
    rotary = f" and k^R (d_h^R = {sizes.d_rope})" if sizes.d_rope else ""
    heads = "this one head" if trace.heads == 1 else f"these {trace.heads} heads"
    notes = [
        f"A cache keeps c_KV (d_c = {d_c} numbers){rotary} per token and layer: {kept} numbers, where MHA with "
        f"{heads} keeps h·(d_k + d_v) = {mha}. Each head's k^C and V are made from c_KV when needed, or folded "
        "away (the absorption stage)."
    ]
    gains = [w[name] for name in ("g_kv", "g_q") if name in w]
    if gains and all(bool((g == 1).all()) for g in gains):
        notes.append(
            "RMSNorm scales each latent to a root-mean-square of 1, then by a learned gain (all ones here, "
            "as before training)."
        )
    return Built(figures, matrices, notes)


def _shifted_score(q_row, k_row, i: int, j: int, shift: int, base: float) -> float:
    """The score of an unturned query row at position i + shift and key row at j + shift, once both are turned."""
    w = q_row.shape[-1]
    q = q_row.double() @ rotation_matrix(i + shift, w, base)
    k = k_row.double() @ rotation_matrix(j + shift, w, base)
    return float(q @ k)


def build_rope(trace, head: int, style: Style, query: int | None) -> Built:
    """RoPE: this head's q and k (MLA: their rotary parts) before and after turning, and the angles."""
    p, n = trace.parts, trace.n_tokens

    def head_of(t):  # [h or g, n, w] or [n, w] -> this head's [n, w]
        return t if t.dim() == 2 else t[trace.copy_for(head, t.shape[0])]

    q0, q1, k0, k1 = (head_of(p[name]) for name in ("q_unrotated", "q_rotated", "k_unrotated", "k_rotated"))
    width, base = q0.shape[-1], trace.rope_base
    theta = as_numpy(angles(n, width, base))
    pairs = [f"({style.index(i)}, {style.index(i + width // 2)})" for i in range(width // 2)]
    angle_panel = Panel(
        theta,
        Title("θ", "position · base^(−2i/w)", shape_text(n, width // 2)),
        f"base {base:,.0f}, radians",
        row_labels=tokens_of(trace),
        col_labels=pairs,
        x_title="pair",
        y_title="token",
        diverging=False,
    )
    what = "q^R, k^R (MLA's rotary parts)" if "q_r" in trace.parts else "q, k"
    if "q_r" not in trace.parts and width < trace.d_qk:  # partial RoPE (DeepSeek-V4): the rest is not turned
        what = f"the last {width} of q's and k's {trace.d_qk} dimensions (the rest are not turned)"
    parts = [
        (angle_panel, Matrix("angles", theta, tokens_of(trace), pairs)),
        rows_panel(
            trace,
            as_numpy(q0),
            "q before",
            Title("q before RoPE", shape=shape_text(n, width)),
            style,
            head_title(trace, head),
        ),
        rows_panel(trace, as_numpy(q1), "q after", Title("q after RoPE", shape=shape_text(n, width)), style),
        rows_panel(trace, as_numpy(k0), "k before", Title("k before RoPE", shape=shape_text(n, width)), style),
        rows_panel(trace, as_numpy(k1), "k after", Title("k after RoPE", shape=shape_text(n, width)), style),
    ]
    figures, matrices = laid_out(parts, style)
    stretch = float((q1.double().norm(dim=-1) - q0.double().norm(dim=-1)).abs().max())
    notes = [
        f"Here {what}, {head_title(trace, head) or 'the one head'}. A turn keeps lengths: a query's length changes "
        f"by at most {stretch:.1e}. The first token, at position 0, is not turned."
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


def build_absorb(trace, head: int, style: Style, query: int | None) -> Built:
    """MLA: W_UK folded into the query gives the content scores without ever forming K."""
    p, w, n = trace.parts, trace.params, trace.n_tokens
    absorbed = absorbed_scores(p, w)  # [h, n, n]
    direct = p["q_c"] @ p["k_c"].transpose(-2, -1)
    d_c = p["c_kv"].shape[-1]
    folded_query = as_numpy(p["q_c"][head] @ w["w_uk"][head].T)  # [n, d_c]
    parts = [
        square_panel(
            trace,
            as_numpy(direct[head]),
            "q^C·k^Cᵀ",
            Title("q^C·k^Cᵀ", shape=shape_text(n, n)),
            diverging=True,
            masked=False,
            subtitle=f"K formed · {head_title(trace, head) or 'content scores'}",
        ),
        square_panel(
            trace,
            as_numpy(absorbed[head]),
            "(q^C·W_UKᵀ)·c_KVᵀ",
            Title("(q^C·W_UKᵀ)·c_KVᵀ", shape=shape_text(n, n)),
            diverging=True,
            masked=False,
            subtitle="K never formed",
        ),
    ]
    figures, matrices = laid_out(parts, style)
    matrices.insert(0, Matrix("q^C·W_UKᵀ", folded_query, tokens_of(trace), [style.index(i) for i in range(d_c)]))
    gap = float((absorbed[head] - direct[head]).abs().max())
    notes = [f"The two maps agree to {gap:.1e} (rounding). W_UV folds into W_O the same way."]
    why = (
        "Why the position travels apart, in k^R: were k^C turned by RoPE, a rotation that depends on the key's "
        "position would sit between q^C and W_UK"
    )
    content = trace.d_k  # the content part's width (q and k meet at d_qk: the rotary part too)
    if n >= 2 and content % 2 == 0:
        exact, folded = folded_with_rotated_keys(p, w, trace.rope_base or ROPE_BASE)
        off = float((exact[head, :, 1:] - folded[head, :, 1:]).abs().max())
        notes.append(
            f"{why}. Folded in for a key at position 0, W_UK gives this head's scores exactly in that "
            f"column and off by up to {off:.3g} in the others."
        )
    elif n >= 2:
        notes.append(
            f"{why}, so one fold of W_UK could not serve every key. (RoPE turns pairs of dimensions: with "
            f"an even d_k this stage shows the numbers; d_k = {content} here.)"
        )
    return Built(figures, matrices, notes)


def build_cache(
    trace, head: int, style: Style, query: int | None, kv_bytes: str = "fp16/bf16", kv_context: str = "32k"
) -> Built:
    """What a KV cache keeps per token: every variant at these sizes, and published models at theirs."""
    per, kv_context = BYTES[kv_bytes], CONTEXTS[kv_context]
    here, presets = compared_rows(trace.sizes, trace.variant), preset_rows()
    figures = [
        cache_figure(here, "KV cache per token and layer, at these sizes", kv_bytes, kv_context, style),
        cache_figure(
            presets, "KV cache per token, all layers, at published sizes", kv_bytes, kv_context, style, log=True
        ),
    ]
    rows = [*here, *presets]
    values = np.array([[n, n * per, n * per * kv_context] for n in (r.per_token_at(kv_context) for r in rows)], float)
    matrices = [
        Matrix(
            "kv_cache",
            values,
            [r.name for r in rows],
            ["numbers per token", "bytes per token", f"bytes for {kv_context:,} tokens"],
        )
    ]
    current = next(r for r in here if r.variant == trace.variant)
    deepseek, as_mha = (next(r for r in presets if r.name == p.name) for p in PRESETS[:2])
    notes = [
        f"Here ({VARIANTS[trace.variant].label}): {current.formula} numbers per token and layer, "
        f"{amount(current.per_token * kv_context, per)} for {kv_context:,} tokens in {kv_bytes}.",
        f"DeepSeek-V2's MLA keeps {deepseek.per_token:,} per token in 60 layers, MHA "
        f"{as_mha.per_token:,} ({as_mha.per_token / deepseek.per_token:.1f}× more).",
    ]
    window = None if trace.mask is None or trace.top_k or trace.composed else window_of(trace.mask.cpu())
    notes += composed_cache(trace, current.per_token, per, kv_context)
    if trace.top_k:
        notes.append(
            f"Top-k reads {trace.top_k} keys a query, but the cache keeps every one: a later query may pick any."
        )
    if window is not None:  # the mask lets the cache drop what no later query will see
        sinks, w, most = window
        kept = f"{sinks} sinks + the last {w}" if sinks else f"the last {w}"
        bounded, whole = amount(current.per_token * most, per), amount(current.per_token * kv_context, per)
        notes.append(
            f"With this window the cache stops at {most} {'token' if most == 1 else 'tokens'} ({kept}): "
            f"{bounded} a layer at any length, not {whole}."
        )
    return Built(figures, matrices, notes, stacked=True)


def composed_cache(trace, per_token: int, per: int, kv_context: int) -> list[str]:
    """What a composed mask lets a decoder's cache drop (its pieces' bound, composed.Mask.cached), and that a bend
    drops nothing: it is computed from the positions at each step."""
    notes = []
    composed = parse_mask(trace.composed) if trace.composed else None
    if composed and not composed.causal:
        notes.append("This composed mask lets a token see later ones: a decoder could not keep to it.")
    elif composed:
        most = composed.cached(kv_context)
        if most < kv_context:
            notes.append(
                f"With {composed.words()} the cache need hold at most {most} tokens: "
                f"{amount(per_token * most, per)} a layer at any length, not {amount(per_token * kv_context, per)}."
            )
        else:
            notes.append(
                f"With {composed.words()} no piece bounds how many keys a later token reads, so "
                "the cache has no fixed size."
            )
    if trace.bend:
        notes.append(f"The bend ({trace.bend}) changes no key the cache keeps: a step bends its row at its positions.")
    return notes
