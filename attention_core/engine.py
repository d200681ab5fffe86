"""Scaled dot-product self-attention, one named stage at a time.

    Q = X·W_Q    K = X·W_K    V = X·W_V                 per head (or Q = K = V = X without projections)
    scores = Q·Kᵀ                                       how well each query matches each key
    scaled_scores = scores · scale,  scale = 1/√d_k     divides the scores' variance by d_k
    masked_scores = scaled_scores, -inf where masked    a causal mask hides the future
    weights = softmax(masked_scores) along each row     rows sum to 1
    context = weights·V                                 each row a weighted sum of value rows
    output = concat(context of every head)·W_O          back to d_model

Shapes use h heads, n tokens: X [n, d_model], Q/K [h, n, d_k], V [h, n, d_v].
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import torch

from attention_core.config import AttentionConfig, check_request, check_text
from attention_core.device import resolve_device
from attention_core.tokens import embed, tokenize
from attention_core.trace import AttentionTrace, concat_heads
from attention_core.weights import WEIGHT_NAMES, check_given_weights, init_weights


def causal_mask(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[n, n] bool, True where query i may attend to key j, i.e. j <= i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


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


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    mask: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """The stages after the projections, for q, k [h, n, d_k] and v [h, n, d_v].

    Returns scores, scaled_scores, masked_scores, weights [h, n, n] and context [h, n, d_v].
    Used by compute_attention and by views that re-run one head (e.g. a causal what-if).
    """
    scores = q @ k.transpose(-2, -1)  # [h, n, n]
    scaled_scores = scores if scale == 1.0 else scores * scale
    masked_scores, weights = masked_softmax(scaled_scores, mask)
    context = weights.to(v.dtype) @ v  # [h, n, d_v]
    return {
        "scores": scores,
        "scaled_scores": scaled_scores,
        "masked_scores": masked_scores,
        "weights": weights,
        "context": context,
    }


def trace_from_stages(
    tokens, q, k, v, stages: Mapping, *, scale: float, mask, device: str, label: str = ""
) -> AttentionTrace:
    """An AttentionTrace for attention computed elsewhere (a real model's layer, a re-run head).

    stages: scores, scaled_scores, masked_scores, weights, context (as attend returns them).
    X, the W matrices and the output are left None: they are not plain matrices there, or not recomputed.
    """
    return AttentionTrace(
        tokens=tuple(tokens),
        x=None,
        w_q=None,
        w_k=None,
        w_v=None,
        w_o=None,
        q=q,
        k=k,
        v=v,
        scale=scale,
        mask=mask,
        output=None,
        device=device,
        label=label,
        **stages,
    )


def rerun_head(trace: AttentionTrace, head: int, mask: torch.Tensor | None, label: str = "") -> AttentionTrace:
    """One head of a trace recomputed from its own q, k, v under another mask.

    For "what if this encoder head were causal?": the same q, k, v and scale, a causal mask.
    Returns a one-head trace (no X or W matrices: they are not recomputed), labelled `label`
    (default: the trace's label and the head).
    """
    if not 0 <= head < trace.n_heads:
        raise ValueError(f"head must be between 1 and {trace.n_heads}; got {head + 1}")
    q, k, v = (t[head : head + 1] for t in (trace.q, trace.k, trace.v))  # [1, n, d]
    stages = attend(q, k, v, scale=trace.scale, mask=mask)
    label = label or f"{trace.label} · head {head + 1}"
    return trace_from_stages(
        trace.tokens, q, k, v, stages, scale=trace.scale, mask=mask, device=trace.device, label=label
    )


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


def compute_attention(
    x,
    config: AttentionConfig,
    *,
    weights: Mapping | None = None,
    tokens: list[str] | None = None,
    memory_budget: int | None = None,
) -> AttentionTrace:
    """Run multi-head self-attention on X [n, d_model] and keep every stage.

    weights: optional {"w_q", "w_k", "w_v", "w_o"} matrices (any subset); the rest are drawn
    from config.seed. tokens: labels for the n rows (default "#0", "#1", ...).
    memory_budget: bytes; defaults to ATTENTION_MEMORY_BUDGET_MB (see config.py).
    Raises ValueError, naming the field and the allowed values, for any bad input.
    """
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
    params = {**dict.fromkeys(WEIGHT_NAMES), **init_weights(config), **typed}
    params = {name: None if w is None else w.to(device=device, dtype=dtype) for name, w in params.items()}
    x = x.to(device=device, dtype=dtype)

    if config.projections:
        q = x @ params["w_q"]  # [n, d_model] @ [h, d_model, d_k] -> [h, n, d_k]
        k = x @ params["w_k"]  # [h, n, d_k]
        v = x @ params["w_v"]  # [h, n, d_v]
    else:
        q = k = v = x.unsqueeze(0)  # [1, n, d_model]: every token compares its own vector with the others'
    scale = 1.0 / math.sqrt(config.d_k) if config.scaled else 1.0
    mask = causal_mask(n, device) if config.causal else None
    stages = attend(q, k, v, scale=scale, mask=mask)
    output = concat_heads(stages["context"]) @ params["w_o"] if config.projections else None  # [n, d_model]

    return AttentionTrace(
        tokens=tuple(tokens),
        x=x,
        **params,
        q=q,
        k=k,
        v=v,
        scale=scale,
        mask=mask,
        output=output,
        device=str(device),
        given=tuple(name for name in WEIGHT_NAMES if name in typed),
        drawn=f"{config.init} init, seed {config.seed}" if config.projections else "",
        **stages,
    )


def trace_sentence(
    text: str, config: AttentionConfig, *, positional: bool = True, x=None, weights: Mapping | None = None
) -> AttentionTrace:
    """Tokenize text, embed it (seeded by config.seed) and run compute_attention on it.

    x: a typed input matrix to use instead of the embedding (one row per token).
    weights: typed matrices, as compute_attention takes them.
    The single entry point of the from-scratch pages, the benchmarks and the tests.
    """
    check_text(text)
    if not isinstance(positional, bool):
        raise ValueError(f"positional must be True or False; got {positional!r}")
    tokens = tokenize(text)
    check_request(len(tokens), config)  # refuse before embedding thousands of rows
    if x is None:
        return compute_attention(embed(tokens, config.d_model, seed=config.seed, positional=positional), config,
                                 weights=weights, tokens=tokens)  # fmt: skip
    if len(x) != len(tokens):
        raise ValueError(f"X has {len(x)} rows but the sentence has {len(tokens)} tokens: X needs one row per token")
    trace = compute_attention(x, config, weights=weights, tokens=tokens)
    return dataclasses.replace(trace, given=("x", *trace.given))
