"""Scaled dot-product self-attention, one named stage at a time.

    Q = X·W_Q    K = X·W_K    V = X·W_V                 per head: how the variant projects (attention_core/variants/:
                                                        MHA, GQA, MQA, MLA, or Q = K = V = X)
    scores = Q·Kᵀ                                       how well each query matches each key
    scaled_scores = scores · scale,  scale = 1/√d_k     divides the scores' variance by d_k (d_k: q's width)
    bent_scores = score_mod(scaled_scores)              with a bend only: ALiBi, a soft cap (bends.py)
    masked_scores = bent_scores, -inf where masked      a causal mask hides the future; pieces compose (composed.py)
    weights = softmax(masked_scores) along each row     rows sum to 1 (less a learned sink's share, gpt-oss)
    context = weights·V                                 each row a weighted sum of value rows
    output = concat(context of every head)·W_O          back to d_model

Shapes use h heads, n tokens: X [n, d_model], Q/K [h, n, d_k], V [h, n, d_v] (keys and values expanded to one
per query head where a variant shares them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from attention_core.bends import bend as bend_scores
from attention_core.bends import parse_bend
from attention_core.composed import Mask as Composed
from attention_core.composed import causal_mask, empty_row, parse_mask
from attention_core.config import AttentionConfig, check_request, check_text
from attention_core.device import resolve_device
from attention_core.masks import MASKS, Mask, oracle_indexer
from attention_core.tokens import embed, tokenize
from attention_core.trace import AttentionTrace, concat_heads
from attention_core.variants import VARIANTS, grouped_key
from attention_core.weights import check_given_weights, init_weights


def config_mask(
    n: int, config: AttentionConfig, device: torch.device | str = "cpu", tokens=None
) -> torch.Tensor | None:
    """The mask the config asks for, True where query i may see key j: None (no mask), causal, or causal with a
    sliding window and perhaps sinks (attention_core/masks.py); or a composition (composed.py; its document piece
    reads the tokens' sentences), with the causal mask where config.causal is on. A composition that leaves a
    query no key is refused, by the query."""
    if config.mask:
        tokens = [f"#{i}" for i in range(n)] if tokens is None else tokens
        mask = parse_mask(config.mask).kept(tokens, device)
        if config.causal:
            mask &= causal_mask(n, device)
        row = empty_row(mask)
        if row is not None:
            raise ValueError(
                f"mask {config.mask!r}{' with the causal mask' if config.causal else ''} leaves token {row + 1} "
                f"({str(tokens[row])[:20]!r}) no key to see: every query needs at least one (add '| causal', or "
                "widen a piece)"
            )
        return mask
    if not config.causal:
        return None
    if config.window:
        return sliding(config).kept(n, config.window).to(device)
    return causal_mask(n, device)


def composed_mask(config: AttentionConfig) -> str:
    """The composition the trace keeps to, as written: the config's, with the causal mask where config.causal adds
    it ("causal & (window 8 | sinks 4)"); "" without one."""
    if not config.mask:
        return ""
    composed = parse_mask(config.mask)
    if config.causal and not composed.causal:
        composed = Composed("and", parts=(Composed("piece", "causal"), composed))
    return composed.written()


def bend_of(config: AttentionConfig, heads: int, dtype: torch.dtype, device, queries=None, keys=None):
    """The config's score bend as a function of the scaled scores [h, n_q, n_k] (None without one); queries and
    keys: their positions where they are not 0 … n − 1 (a decoding step's row and its cache)."""
    bent = parse_bend(config.bend)
    if bent is None:
        return None
    mod = bent.mod(heads, config.seed, dtype, device)
    return lambda scaled: bend_scores(scaled, mod, queries, keys)


def sliding(config: AttentionConfig) -> Mask:
    """The config's sliding window as a record of masks.py: with its sinks, or alone."""
    return MASKS["sinks" if config.sinks else "window"]


def sparse_keys(scaled_scores: torch.Tensor, visible: torch.Tensor, k: int) -> torch.Tensor:
    """DSA's choice [n, n]: for each query the k keys of those `visible` leaves it that the oracle indexer
    (masks.oracle_indexer: Σ_h ReLU of every head's scaled scores [h, n, n]) scores highest, for all heads."""
    index = oracle_indexer(scaled_scores.masked_fill(~visible, float("-inf")))
    return MASKS["dsa"].kept(visible.shape[0], k, index.masked_fill(~visible, float("-inf"))) & visible


def masked_softmax(scaled_scores: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (masked_scores, weights) for scores [..., n, n_keys] and a bool mask or None.

    The softmax runs in at least float32 whatever the input dtype. A row whose keys are all
    masked would be 0/0 = NaN; it attends to nothing, so its weights are 0.
    """
    softmax_dtype = torch.promote_types(scaled_scores.dtype, torch.float32)
    if mask is None:
        return scaled_scores, torch.softmax(scaled_scores.to(softmax_dtype), dim=-1)
    masked_scores = scaled_scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked_scores.to(softmax_dtype), dim=-1)
    row_has_key = mask.any(dim=-1, keepdim=True)  # [n, 1]
    weights = torch.where(row_has_key, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    return masked_scores, weights


def sink_softmax(masked_scores: torch.Tensor, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A learned sink (gpt-oss): each head's logit s_h joins every row's softmax as one more column, and is dropped
    after it. Returns (weights [h, n, n_keys], the sink's share of each row [h, n, 1]):

        weights_ij = exp(m_ij) / (Σ_j' exp(m_ij') + exp(s_h)),   share_i = exp(s_h) / (Σ_j' exp(m_ij') + exp(s_h))

    so a row's weights sum to 1 − its share: the part of the row that goes to no token and passes on nothing. A
    row whose keys are all hidden gives the sink all of it (its weights are 0, as without a sink)."""
    dtype = torch.promote_types(masked_scores.dtype, torch.float32)
    column = sink.to(dtype).reshape(-1, 1, 1).expand(*masked_scores.shape[:-1], 1)  # [h, n, 1]: s_h in every row
    probabilities = torch.softmax(torch.cat([masked_scores.to(dtype), column], dim=-1), dim=-1)
    return probabilities[..., :-1], probabilities[..., -1:]


def own_softmax(variant, params: Mapping[str, torch.Tensor], parts: Mapping[str, torch.Tensor]) -> dict:
    """What a variant adds to the softmax, as attend takes it: a learned sink's logit per head (gpt-oss), or
    differential attention's second map, its queries, keys and λ (DiffLlama); nothing for the others."""
    if variant.sink:
        return {"sink": params[variant.sink]}
    if variant.lambda_of is not None:
        return {"second": (parts["q2"], parts["k2"], variant.lambda_of(params))}
    return {}


def own_parts(stages: dict[str, torch.Tensor], own: dict) -> dict[str, torch.Tensor]:
    """What attend made of a variant's own softmax, taken out of its stages as parts of the trace: the sink's logit
    and its share of each row [h, n, 1]; or the second map's scaled scores, both softmaxes and λ [h, n, 1]."""
    if "sink" in own:
        share = stages.pop("sink_share")  # [h, n, 1]; the logit beside it, the same in every row
        return {"sink_logit": own["sink"].reshape(-1, 1, 1).expand_as(share), "sink_share": share}
    if "second" in own:
        taken = {name: stages.pop(name) for name in ("scaled_scores_2", "weights_1", "weights_2")}
        lam = own["second"][2].reshape(-1, 1, 1).expand(*taken["weights_1"].shape[:-1], 1)  # λ, the same in every row
        return taken | {"lambda": lam}
    return {}


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    mask: torch.Tensor | None,
    softcap: float | None = None,
    bend=None,
    sink: torch.Tensor | None = None,
    second: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """The stages after the projections, for q, k [h, n, d_k] and v [h, n, d_v].

    Returns scores, scaled_scores, masked_scores, weights [h, n, n] and context [h, n, d_v].
    softcap: c where a model soft-caps its scaled scores to c·tanh(s/c), each within ±c (Gemma 2); the scaled
    scores are then the capped ones (a real model's, as transformers computes them).
    bend: a function of the scaled scores (bend_of: a score_mod) whose result, bent_scores, is masked instead.
    sink: each head's learned sink logit [h] (sink_softmax), where the variant has one: then sink_share [h, n, 1]
    is returned too.
    second: differential attention's second map (DiffLlama), its queries and keys [h, n, d_k] and λ: the weights
    are then softmax(first map) − λ·softmax(second), each map scaled, bent and masked alike; both softmaxes and
    the second map's scaled scores are returned too (weights_1, weights_2, scaled_scores_2).
    Used by compute_attention and by views that re-run one head (e.g. a causal what-if).
    """

    def scaled_of(q, k):
        scores = q @ k.transpose(-2, -1)  # [h, n, n]
        scaled = scores if scale == 1.0 else scores * scale
        return scores, softcap * torch.tanh(scaled / softcap) if softcap else scaled

    scores, scaled_scores = scaled_of(q, k)
    bent = {"bent_scores": bend(scaled_scores)} if bend else {}
    masked_scores, weights = masked_softmax(bent.get("bent_scores", scaled_scores), mask)
    shared = {}
    if sink is not None:
        weights, shared["sink_share"] = sink_softmax(masked_scores, sink)
    if second is not None:  # two maps, and their difference: A = A₁ − λ·A₂ (a weight may be negative)
        q2, k2, lam = second
        shared["scaled_scores_2"] = scaled_of(q2, k2)[1]
        scaled_2 = shared["scaled_scores_2"]
        shared["weights_2"] = masked_softmax(bend(scaled_2) if bend else scaled_2, mask)[1]
        shared["weights_1"] = weights
        weights = weights - lam.to(weights.dtype).reshape(-1, 1, 1) * shared["weights_2"]  # λ: one, or one a head
    context = weights.to(v.dtype) @ v  # [h, n, d_v]
    return {
        "scores": scores,
        "scaled_scores": scaled_scores,
        **bent,
        "masked_scores": masked_scores,
        "weights": weights,
        "context": context,
        **shared,
    }


def trace_from_stages(
    tokens,
    q,
    k,
    v,
    stages: Mapping,
    *,
    scale: float,
    mask,
    device: str,
    label: str = "",
    kv_head_of: tuple[int, ...] = (),
    softcap: float | None = None,
) -> AttentionTrace:
    """An AttentionTrace for attention computed elsewhere (a real model's layer, a re-run head).

    stages: scores, scaled_scores, masked_scores, weights, context (as attend returns them).
    kv_head_of: the key/value head each query head reads (k, v come expanded); the variant follows from it.
    X, the W matrices and the output are left out: they are not plain matrices there, or not recomputed.
    """
    kv_head_of = tuple(kv_head_of) or tuple(range(q.shape[0]))
    kv_heads = len(set(kv_head_of))
    variant = grouped_key(q.shape[0], kv_heads)
    return AttentionTrace(
        tokens=tuple(tokens),
        x=None,
        q=q,
        k=k,
        v=v,
        scale=scale,
        mask=mask,
        output=None,
        device=device,
        label=label,
        variant=variant,
        kv_head_of=kv_head_of,
        softcap=softcap,
        **stages,
    )


def rerun_head(trace: AttentionTrace, head: int, mask: torch.Tensor | None, label: str = "") -> AttentionTrace:
    """One head of a trace recomputed from its own q, k, v under another mask.

    For "what if this encoder head were causal?": the same q, k, v and scale, a causal mask.
    Returns a one-head trace (no X or W matrices: they are not recomputed), labelled `label`
    (default: the trace's label and the head).
    """
    if not 0 <= head < trace.heads:
        raise ValueError(f"head must be between 1 and {trace.heads}; got {head + 1}")
    q, k, v = (t[head : head + 1] for t in (trace.q, trace.k, trace.v))  # [1, n, d]
    stages = attend(q, k, v, scale=trace.scale, mask=mask, softcap=trace.softcap)
    label = label or f"{trace.label} · head {head + 1}"
    return trace_from_stages(
        trace.tokens,
        q,
        k,
        v,
        stages,
        scale=trace.scale,
        mask=mask,
        device=trace.device,
        label=label,
        softcap=trace.softcap,
    )  # one head: it reads its own key/value head


def _as_input_matrix(x, config: AttentionConfig) -> torch.Tensor:
    try:
        x = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"x must be a matrix of numbers [n, d_model]; could not read it ({error})") from None
    if x.dim() != 2:
        raise ValueError(f"x must be a matrix [n, d_model]; got shape {list(x.shape)}")
    if x.shape[1] != config.d_model:
        raise ValueError(f"x has {x.shape[1]} columns but d_model is {config.d_model}: they must match")
    if x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"x must hold real numbers; got {x.dtype}")
    if not torch.isfinite(x.double()).all():
        raise ValueError("x contains NaN or infinity")
    return x


def prepared(x, config: AttentionConfig, weights: Mapping | None, tokens, memory_budget: int | None = None):
    """X checked and on the config's device and dtype, the variant's weights (the typed ones, the rest drawn from
    config.seed) and the token labels (default "#0", "#1", ...): what compute_attention and decoding start from."""
    x = _as_input_matrix(x, config)
    n = x.shape[0]
    check_request(n, config, memory_budget)
    if tokens is None:
        tokens = [f"#{i}" for i in range(n)]
    if len(tokens) != n:
        raise ValueError(f"tokens has {len(tokens)} entries but x has {n} rows: one token per row")
    device = resolve_device(config.device)
    dtype = config.torch_dtype
    typed = check_given_weights(weights or {}, config)
    params = {name: w.to(device=device, dtype=dtype) for name, w in {**init_weights(config), **typed}.items()}
    return x.to(device=device, dtype=dtype), params, list(tokens)


def compute_attention(
    x,
    config: AttentionConfig,
    *,
    weights: Mapping | None = None,
    tokens: list[str] | None = None,
    memory_budget: int | None = None,
) -> AttentionTrace:
    """Run self-attention on X [n, d_model] as config.variant does it, and keep every stage.

    weights: optional matrices of the variant (any subset, by name: "w_q", ...; see attention_core/variants/); the
    rest are drawn from config.seed. tokens: labels for the n rows (default "#0", "#1", ...).
    memory_budget: bytes; defaults to ATTENTION_MEMORY_BUDGET_MB (see config.py).
    Raises ValueError, naming the field and the allowed values, for any bad input.
    """
    x, params, tokens = prepared(x, config, weights, tokens, memory_budget)
    n, device = x.shape[0], x.device
    variant = VARIANTS[config.variant]
    projected = variant.projection(x, params, config)  # q, k [h, n, d_k], v [h, n, d_v], parts
    scale = config.scale
    mask = config_mask(n, config, device, tokens)
    if config.causal and config.top_k:  # DSA: the keys the indexer scores highest, of those the mask leaves
        mask = mask & sparse_keys(projected.q @ projected.k.transpose(-2, -1) * scale, mask, config.top_k)
    bend = bend_of(config, projected.q.shape[0], projected.q.dtype, device)
    own = own_softmax(variant, params, projected.parts)
    stages = attend(projected.q, projected.k, projected.v, scale=scale, mask=mask, bend=bend, **own)
    parts = projected.parts | own_parts(stages, own)
    handed = variant.handed(stages["context"], parts)  # the context (gated attention: times its gate)
    output = variant.output(concat_heads(handed), params)  # [n, d_model]: concat·W_O

    return AttentionTrace(
        tokens=tuple(tokens),
        x=x,
        q=projected.q,
        k=projected.k,
        v=projected.v,
        scale=scale,
        mask=mask,
        output=output,
        top_k=config.top_k if config.causal else 0,
        composed=composed_mask(config),
        bend=config.bend,
        bend_seed=config.seed,
        device=str(device),
        given=tuple(name for name in params if name in (weights or {})),
        drawn=f"{config.init} init, seed {config.seed}" if params else "",
        variant=config.variant,
        params=params,
        parts=parts,
        kv_head_of=projected.kv_head_of,
        rope_base=config.rope_base if "q_rotated" in projected.parts else None,
        handed=None if handed is stages["context"] else handed,
        **stages,
    )


def trace_sentence(text: str, config: AttentionConfig, *, x=None, weights: Mapping | None = None) -> AttentionTrace:
    """Tokenize text, embed it (seeded by config.seed; sinusoidal positions added where config.positional says
    so) and run compute_attention on it.

    x: a typed input matrix to use instead of the embedding (one row per token).
    weights: typed matrices, as compute_attention takes them.
    The single entry point of the from-scratch pages, the benchmarks and the tests.
    """
    check_text(text)
    tokens = tokenize(text)
    check_request(len(tokens), config)  # refuse before embedding thousands of rows
    if x is None:
        sinusoidal = config.positional == "sinusoidal"
        return compute_attention(
            embed(tokens, config.d_model, seed=config.seed, positional=sinusoidal),
            config,
            weights=weights,
            tokens=tokens,
        )
    if len(x) != len(tokens):
        raise ValueError(f"X has {len(x)} rows but the sentence has {len(tokens)} tokens: X needs one row per token")
    trace = compute_attention(x, config, weights=weights, tokens=tokens)
    return dataclasses.replace(trace, given=("x", *trace.given))
