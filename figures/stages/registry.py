"""The registry: every stage in order (STAGES), the sets derived from it, and the view of one stage of one head."""

from __future__ import annotations

from attention_core.registry import put
from attention_core.variants import (
    VARIANTS,
)
from figures.cache import BYTES, CONTEXTS
from figures.glossary import link
from figures.stages.bent import bend_formula, build_bend, composed_formula, has_bend
from figures.stages.declared import declared_stages
from figures.stages.inputs import build_projections, build_qkv, build_x
from figures.stages.outputs import (
    build_absorb,
    build_cache,
    build_context,
    build_latent,
    build_output,
    build_rope,
)
from figures.stages.panels import Drawn
from figures.stages.records import Option, Stage, StageView, any_trace, brought_by_variant, from_scratch, has_rotary
from figures.stages.scores import build_mask, build_scaled, build_scores, build_weights
from figures.stages.tiles import BLOCKS, build_tiles
from figures.stages.tiles import applies as tiles_apply
from figures.style import (
    DEFAULT_STYLE,
    Style,
)

STAGES: list[Stage] = [
    Stage(
        "x",
        "X",
        "Input embeddings X",
        r"X \in \mathbb{R}^{n \times d_{model}}",
        "Each row is one token's vector: its meaning (and, with positional encoding, its position). "
        "No row knows anything about its neighbours yet.",
        from_scratch,
        build_x,
    ),
    Stage(
        "projections",
        "W_Q W_K W_V",
        "Projection matrices W_Q, W_K, W_V",
        r"W_Q, W_K \in \mathbb{R}^{d_{model} \times d_k}, \quad W_V \in \mathbb{R}^{d_{model} \times d_v}",
        "Three learned matrices, shared by every token: what to ask, what to advertise, what to share.",
        from_scratch,
        build_projections,
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
        build_latent,
        brought=True,
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
        build_rope,
        brought=True,
    ),
    Stage(
        "qkv",
        "Q K V",
        "Queries, keys and values",
        r"Q = X W_Q, \quad K = X W_K, \quad V = X W_V",
        f"Every token makes three cards ({link('Q, K, V')}): a query (what am I looking for?), a key "
        "(what do I offer?) and a value (what do I pass on?). All tokens at once, in one matrix product each.",
        any_trace,
        build_qkv,
    ),
    Stage(
        "scores",
        "QKᵀ",
        "Attention scores QKᵀ",
        r"S = Q K^{\top}, \qquad S_{ij} = q_i \cdot k_j",
        f"Row i, column j: how well token i's query matches token j's key. {link('Scores', 'scores vs weights')} "
        "are unbounded numbers, not yet percentages.",
        any_trace,
        build_scores,
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
        build_scaled,
        grid="scaled_scores",
    ),
    Stage(
        "bend",
        "bend",
        "Bend the scores",
        r"S'' = \operatorname{score\_mod}(S', h, i, j)",
        "A score_mod (PyTorch's FlexAttention) changes each scaled score before the mask and the softmax, from the "
        f"score, the head and the two positions: {link('ALiBi')}, a {link('soft cap')}, a relative position bias.",
        has_bend,
        build_bend,
        grid="bent_scores",
        own_formula=bend_formula,
    ),
    Stage(
        "mask",
        "mask",
        "Causal mask",
        r"M_{ij} = \begin{cases} S'_{ij} & j \le i \\ -\infty & j > i \end{cases}",
        f"A {link('causal mask')} hides from each token the tokens after it: −∞ before the softmax, "
        f"so exactly 0 after it. A {link('sliding window')} (the sidebar's w) also hides the ones too far back; "
        f"DSA's {link('top-k', 'sparse attention')} all but k.",
        any_trace,
        build_mask,
        grid="masked_scores",
        options=(Option("mask_block", "block size (queries × keys)", BLOCKS, "2"),),
        own_title=lambda trace: "Composed mask" if getattr(trace, "composed", "") else "",
        own_formula=composed_formula,
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
        build_weights,
        grid="weights",
    ),
    Stage(
        "context",
        "·V",
        "Context vectors",
        r"C = A V, \qquad c_i = \sum_j A_{ij}\, v_j",
        "Each token's new vector is a weighted sum of the value vectors, weighted by its row of attention.",
        any_trace,
        build_context,
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
        build_output,
    ),
    Stage(
        "absorb",
        "absorb W_UK",
        "MLA: absorbing W_UK into the query",
        r"q^C_h (c^{KV} W^{UK}_h)^{\top} = (q^C_h W^{UK\top}_h)\, c^{KV\top}",
        "Matrix products regroup: with W_UK folded into the query, the content scores come out the same, so a "
        "decoder compares each new query with the cached latents c_KV and never forms the keys.",
        brought_by_variant("absorb"),
        build_absorb,
        brought=True,
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
        build_cache,
        options=(
            Option("kv_bytes", "bytes per number", tuple(BYTES), "fp16/bf16"),
            Option("kv_context", "context length (tokens)", tuple(CONTEXTS), "32k"),
        ),
        brought=True,
    ),
    Stage(
        "tiles",
        "tiles",
        "In tiles, as a GPU computes it",
        r"\begin{aligned} m' &= \max(m, \max_j S_{ij}) \\ \ell &\leftarrow e^{m - m'}\ell + \textstyle\sum_j "
        r"e^{S_{ij} - m'} \\ O &\leftarrow e^{m - m'} O + \textstyle\sum_j e^{S_{ij} - m'} V_j \end{aligned}",
        "FlashAttention never writes the n×n matrix: it reads the keys a block at a time, keeping per query the top "
        "score m, the sum ℓ, the output O.",
        tiles_apply,
        build_tiles,
        options=(Option("tile_block", "keys per block", BLOCKS, "2"),),
        brought=True,
    ),
]
BY_KEY: dict[str, Stage] = {stage.key: stage for stage in STAGES}


def register_stage(stage: Stage, after: str | None = None) -> Stage:
    """Add a stage to the registry after the stage keyed `after` (at the end by default), or replace the one with
    its key: every page, slide, link check and heading reads STAGES when it runs, so a registered stage is shown
    wherever it applies."""
    return put(STAGES, BY_KEY, stage.key, stage, STAGES.index(BY_KEY[after]) + 1 if after else None)


def unregister_stage(key: str) -> None:
    STAGES.remove(BY_KEY.pop(key))


for _stage, _after in declared_stages():  # the stages the variants declare in their folders (gated: its gate)
    register_stage(_stage, after=_after)


def brought_stages() -> tuple[str, ...]:
    """The stages the roadmap's variants brought: the Multi-head page adds them after concat·W_O."""
    return tuple(stage.key for stage in STAGES if stage.brought)


def grid_stages(trace=None) -> tuple[Stage, ...]:
    """The stages with a map per head: the maps the Multi-head page offers for this trace (the bent scores only
    where it bends them); without a trace, those every trace has (the Compare page's, for two traces)."""
    return tuple(
        stage
        for stage in STAGES
        if stage.grid and (stage.applies(trace) if trace is not None else stage.applies is any_trace)
    )


def stage_choices() -> frozenset[str]:
    """What a page that shows stages keeps in its address for them: the query shown in detail, every option."""
    return frozenset({"query"}) | {option.key for stage in STAGES for option in stage.options}


def stages_for(trace) -> tuple[Stage, ...]:
    """The stages this trace shows: a real model's starts at Q, K, V; a variant's own where they apply."""
    return tuple(stage for stage in STAGES if stage.applies(trace))


def heading(key: str, trace=None) -> str:
    """ "5 · Scale by √d_k": numbered by the stage's place among the stages the trace shows (all, without one)."""
    keys = [stage.key for stage in (stages_for(trace) if trace is not None else STAGES)]
    index = keys.index(key) if key in keys else [stage.key for stage in STAGES].index(key)
    return f"{index + 1} · {BY_KEY[key].title_for(trace)}"


def stage_view(
    trace, key: str, head: int = 0, style: Style = DEFAULT_STYLE, query: int | None = None, options: dict | None = None
) -> StageView:
    """Build the view of one stage for one head (and, for a per-query stage, one query token in detail; for a
    stage with choices, `options` by key: missing ones take their defaults)."""
    if key not in BY_KEY:
        raise ValueError(f"stage must be one of {', '.join(BY_KEY)}; got {key!r}")
    if not 0 <= head < trace.heads:
        raise ValueError(f"head must be between 1 and {trace.heads}; got {head + 1}")
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
    return StageView(
        key,
        heading(key, trace),
        stage.formula_for(trace),
        explanation,
        list(built.figures),
        built.matrices,
        built.code,
        built.stacked or drawn.rows,
        built.shares,
    )
