"""The builders of the stages before the scores: X, the projection matrices, and Q, K, V."""

from __future__ import annotations

from attention_core.variants import (
    VARIANTS,
    look_of,
)
from figures.stages.panels import head_title, laid_out, matrix_panel, origin, rows_panel
from figures.stages.records import CAPTURED_NOTE, Built, has_rotary
from figures.style import (
    Style,
    Title,
    as_numpy,
    shape_text,
)


def build_x(trace, head: int, style: Style, query: int | None) -> Built:
    values = as_numpy(trace.x)
    figures, matrices = laid_out(
        [rows_panel(trace, values, "X", Title("X", shape=shape_text(*values.shape)), style)], style
    )
    notes = [f"Here X is {trace.typed_as}."] if "x" in trace.given else []
    return Built(figures, matrices, notes)


def _copy_of(trace, name: str, head: int) -> tuple[int, str]:
    """Which copy of a per-head weight query head `head` uses, and how to say so."""
    copies = trace.params[name].shape[0]
    if copies == trace.heads:
        return head, head_title(trace, head)
    kv = trace.copy_for(head, copies)
    readers = ", ".join(str(h + 1) for h in trace.heads_sharing(kv))
    return kv, f"key/value head {kv + 1} of {copies}, read by head{'s' if ',' in readers else ''} {readers}"


def _weight_parts(trace, head: int, style: Style, names: tuple[str, ...]) -> list:
    """The panels of some of the variant's weights (the copy head `head` uses of the per-head ones)."""
    parts = []
    specs = {spec.name: spec for spec in VARIANTS[trace.variant].weight_specs(trace.sizes)}
    for spec in (specs[name] for name in names if name in specs and name in trace.params):
        weight = trace.params[spec.name]
        if spec.vector:
            continue  # a gain (ones until trained) or a logit per head: named in the notes or its stage, not drawn
        subtitle = ""
        if weight.dim() == 3 and spec.copies == "o_groups":  # one per group of heads (DeepSeek-V4's W_OA)
            groups = weight.shape[0]
            copy = head * groups // trace.heads
            subtitle, weight = f"group {copy + 1} of {groups}, of head {head + 1}", weight[copy]
        elif weight.dim() == 3:
            copy, subtitle = _copy_of(trace, spec.name, head)
            weight = weight[copy]
        values = as_numpy(weight)
        title = Title(spec.label, shape=shape_text(*values.shape))
        parts.append(matrix_panel(values, spec.label, title, style, "input dimension", "output dimension", subtitle))
    return parts


def build_projections(trace, head: int, style: Style, query: int | None) -> Built:
    if not trace.params:
        idea = "No projection matrices here: Q = K = V = X, as in lecture 003's first attempt."
        return Built([], [], idea=idea)
    rotary_first = ("w_q", "w_dq", "w_uq", "w_qr", "w_kr")  # MLA: the queries and the rotary key, then the latent's
    names = tuple(sorted((n for n in trace.params if n != "w_o"), key=lambda n: n not in rotary_first))
    figures, matrices = laid_out(_weight_parts(trace, head, style, names), style)
    variant = VARIANTS[trace.variant]
    notes = []
    if trace.kv_heads < trace.heads and "w_k" in trace.params:  # (V4's one vector is said by its weights_note)
        notes.append(
            f"{variant.label}: {trace.heads} query heads share {trace.kv_heads} key/value "
            f"head{'s' if trace.kv_heads > 1 else ''}, so W_K and W_V have {trace.kv_heads} "
            f"cop{'ies' if trace.kv_heads > 1 else 'y'} and W_Q has {trace.heads}."
        )
    if note := look_of(trace.variant).weights_note(set(trace.params)):
        notes.append(note)
    where = origin(trace, names)
    return Built(figures, matrices, notes + ([f"Here: {where}."] if where else []), stacked=len(figures) > 1)


def build_qkv(trace, head: int, style: Style, query: int | None) -> Built:
    n = trace.n_tokens
    if trace.x is not None and not trace.params:  # no projections: one matrix plays all three parts
        values = as_numpy(trace.q[head])
        title = Title("Q", "K = V = X", shape_text(*values.shape))
        figures, matrices = laid_out([rows_panel(trace, values, "Q", title, style)], style)
        idea = "Without projections each token's query, key and value are all its own row of X."
        return Built(figures, matrices, idea=idea)
    parts, notes = [], []
    titles = look_of(trace.variant).qkv_titles  # how the variant makes them, where not X·W_Q, X·W_K, X·W_V
    titles = titles(trace.sizes) if callable(titles) else titles
    for i, (name, t) in enumerate((("Q", trace.q), ("K", trace.k), ("V", trace.v))):
        values = as_numpy(t[head])
        width = values.shape[1]
        # No head suffix: three of these sit side by side and the head is named above them.
        if trace.x is None:
            title = Title(name, shape=shape_text(n, width))
        elif titles:
            title = Title(*titles[i].split(" = ", 1), shape=shape_text(n, width))  # "V = c_KV·W_UV"
        else:
            d_model = trace.x.shape[1]
            rotated = "RoPE(X·W_{0})" if name != "V" and "q_rotated" in trace.parts else "X·W_{0}"
            title = Title(
                name,
                rotated.format(name),
                f"{shape_text(n, d_model)}·{shape_text(d_model, width)} = {shape_text(n, width)}",
            )
        subtitle = ""
        if name != "Q" and trace.kv_heads < trace.heads and trace.params:
            weight = "w_k" if name == "K" else "w_v"  # none where one vector is the key and the value (V4)
            subtitle = _copy_of(trace, weight, head)[1] if weight in trace.params else "read by every head"
        parts.append(rows_panel(trace, values, name, title, style, subtitle))
    if trace.x is None:
        notes.append(CAPTURED_NOTE)
    if trace.kv_heads < trace.heads:
        notes.append(
            f"This head reads key/value head {trace.kv_head_of[head] + 1}, with "
            f"{len(trace.heads_sharing(trace.kv_head_of[head])) - 1} other query head"
            f"{'s' if len(trace.heads_sharing(trace.kv_head_of[head])) > 2 else ''}: the same K and V, "
            "its own Q."
        )
    if "k_r" in trace.parts:  # MLA's rotary key: a content part and a rotary part side by side
        d_r = trace.parts["k_r"].shape[-1]
        notes.append(
            f"Each query and key is its content part (width {trace.d_k}) and its rotary part "
            f"(width {d_r}) side by side, so q·k = q^C·k^C + q^R·k^R; k^R is the same for every "
            "head."
        )
        if not has_rotary(trace):
            notes.append(
                "The positional encoding is not rotary here, so the rotary parts are not turned: choose "
                "*rotary* to see RoPE carry each token's position."
            )
    figures, matrices = laid_out(parts, style)
    return Built(figures, matrices, notes)
