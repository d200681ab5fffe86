"""Scaled dot-product self-attention, one named stage at a time.

    Q = X·W_Q    K = X·W_K    V = X·W_V                 per head
    scores = Q·Kᵀ                                       how well each query matches each key
    scaled_scores = scores · scale,  scale = 1/√d_k     keeps the variance near 1
    masked_scores = scaled_scores, -inf where masked    a causal mask hides the future
    weights = softmax(masked_scores) along each row     rows sum to 1
    context = weights·V                                 each row a weighted sum of value rows
    output = concat(context of every head)·W_O          back to d_model

Shapes use h heads, n tokens: X [n, d_model], Q/K [h, n, d_k], V [h, n, d_v].
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import torch

from attention_core.config import AttentionConfig, check_request
from attention_core.device import resolve_device
from attention_core.tokens import embed, tokenize
from attention_core.trace import AttentionTrace

WEIGHT_NAMES = ("w_q", "w_k", "w_v", "w_o")


def weight_shapes(config: AttentionConfig) -> dict[str, tuple[int, ...]]:
    """The shape of each projection matrix for this config."""
    h, d = config.n_heads, config.d_model
    return {
        "w_q": (h, d, config.d_k),
        "w_k": (h, d, config.d_k),
        "w_v": (h, d, config.d_v),
        "w_o": (h * config.d_v, d),
    }


@functools.lru_cache(maxsize=16)
def _draw_weights(shapes: tuple, init: str, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    drawn = {}
    for name, shape in shapes:
        if init == "normal":
            drawn[name] = torch.randn(shape, generator=generator)
        else:  # xavier: U(-a, a), a = sqrt(6 / (fan_in + fan_out))
            fan_in, fan_out = shape[-2], shape[-1]
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            drawn[name] = (torch.rand(shape, generator=generator) * 2 - 1) * bound
    return drawn


def init_weights(config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Draw W_Q, W_K, W_V, W_O (float32, CPU) from a generator seeded by config.seed.

    A local CPU generator gives the same numbers on every device and in every thread; the
    global RNG would differ between CPU and CUDA and be shared between sessions. Draws are
    cached (drawing is most of the cost of a small trace); callers get their own copies.
    """
    shapes = tuple(weight_shapes(config).items())
    return {name: w.clone() for name, w in _draw_weights(shapes, config.init, config.seed).items()}


def _given_weights(given: Mapping, config: AttentionConfig) -> dict[str, torch.Tensor]:
    """Check user-given matrices; a single head's [d_model, d_k] may omit the head axis."""
    unknown = set(given) - set(WEIGHT_NAMES)
    if unknown:
        raise ValueError(f"weights has unknown names {sorted(unknown)}; allowed: {', '.join(WEIGHT_NAMES)}")
    shapes = weight_shapes(config)
    checked = {}
    for name, value in given.items():
        tensor = torch.as_tensor(value, dtype=torch.float64 if config.dtype == "float64" else torch.float32)
        if tensor.dim() == 2 and name != "w_o" and config.n_heads == 1:
            tensor = tensor.unsqueeze(0)
        if tuple(tensor.shape) != shapes[name]:
            raise ValueError(f"weights[{name!r}] should have shape {list(shapes[name])}; got {list(tensor.shape)}")
        if not torch.isfinite(tensor).all():
            raise ValueError(f"weights[{name!r}] contains NaN or infinity")
        checked[name] = tensor
    return checked


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
    h, n, d_v = v.shape
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
        concat=stages["context"].transpose(0, 1).reshape(n, h * d_v),  # [n, h*d_v]
        output=None,
        device=device,
        label=label,
        **stages,
    )


def rerun_head(trace: AttentionTrace, head: int, mask: torch.Tensor | None) -> AttentionTrace:
    """One head of a trace recomputed from its own q, k, v under another mask.

    For "what if this encoder head were causal?": the same q, k, v and scale, a causal mask.
    Returns a one-head trace (no X or W matrices: they are not recomputed).
    """
    if not 0 <= head < trace.n_heads:
        raise ValueError(f"head must be between 1 and {trace.n_heads}; got {head + 1}")
    q, k, v = (t[head : head + 1] for t in (trace.q, trace.k, trace.v))  # [1, n, d]
    stages = attend(q, k, v, scale=trace.scale, mask=mask)
    label = f"{trace.label} · head {head + 1}"
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
    params = init_weights(config)
    params.update(_given_weights(weights or {}, config))
    params = {name: value.to(device=device, dtype=dtype) for name, value in params.items()}
    x = x.to(device=device, dtype=dtype)

    q = x @ params["w_q"]  # [n, d_model] @ [h, d_model, d_k] -> [h, n, d_k]
    k = x @ params["w_k"]  # [h, n, d_k]
    v = x @ params["w_v"]  # [h, n, d_v]
    scale = 1.0 / math.sqrt(config.d_k) if config.scaled else 1.0
    mask = causal_mask(n, device) if config.causal else None
    stages = attend(q, k, v, scale=scale, mask=mask)
    concat = stages["context"].transpose(0, 1).reshape(n, config.n_heads * config.d_v)  # [n, h*d_v]
    output = concat @ params["w_o"]  # [n, d_model]

    return AttentionTrace(
        tokens=tuple(tokens),
        x=x,
        **params,
        q=q,
        k=k,
        v=v,
        scale=scale,
        mask=mask,
        concat=concat,
        output=output,
        device=str(device),
        **stages,
    )


MAX_TEXT_CHARS = 20_000


def trace_sentence(text: str, config: AttentionConfig, *, positional: bool = True) -> AttentionTrace:
    """Tokenize text, embed it (seeded by config.seed) and run compute_attention on it.

    The single entry point of the from-scratch pages, the benchmarks and the tests.
    """
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are allowed")
    if not isinstance(positional, bool):
        raise ValueError(f"positional must be True or False; got {positional!r}")
    tokens = tokenize(text)
    check_request(len(tokens), config)  # refuse before embedding thousands of rows
    x = embed(tokens, config.d_model, seed=config.seed, positional=positional)
    return compute_attention(x, config, tokens=tokens)
