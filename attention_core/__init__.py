"""attention_core: every stage of scaled dot-product self-attention, with no Streamlit in it.

Layers, bottom up: `device` (where the maths runs), `tokens` (text -> X), `config` (knobs and
every request limit), `weights` (how W_Q, W_K, W_V, W_O are drawn or checked), `engine` (the
maths), `trace` (the result object every view reads, with the alias table of names), `scaling`
(the √d_k experiment), `matrices` (typed numbers), `lectures` (the lectures' own examples),
`training` (a tiny model whose attention layer is trained, for the Training page).
Only `models` (real pretrained transformers) imports transformers; import it explicitly.
"""

from attention_core.composed import causal_mask
from attention_core.config import (
    INIT_CHOICES,
    INITS,
    AttentionConfig,
    check_request,
    check_text,
    estimate_trace_bytes,
    memory_budget_bytes,
)
from attention_core.device import cpu_threads, describe_device, resolve_device
from attention_core.engine import (
    attend,
    compute_attention,
    masked_softmax,
    rerun_head,
    trace_sentence,
)
from attention_core.limits import MAX_DIM, MAX_HEADS, MAX_MODEL_TOKENS, MAX_SEED, MAX_TEXT_CHARS, MAX_TOKENS
from attention_core.scaling import (
    ScalingResult,
    ScoreVariance,
    SentenceScaling,
    scaling_experiment,
    score_variances,
    sentence_scaling,
)
from attention_core.tokens import embed, sinusoidal_positions, tokenize
from attention_core.trace import AttentionTrace, row_peakiness
from attention_core.weights import init_weights

__all__ = [
    "INITS",
    "INIT_CHOICES",
    "MAX_DIM",
    "MAX_HEADS",
    "MAX_MODEL_TOKENS",
    "MAX_SEED",
    "MAX_TEXT_CHARS",
    "MAX_TOKENS",
    "AttentionConfig",
    "AttentionTrace",
    "ScalingResult",
    "ScoreVariance",
    "SentenceScaling",
    "attend",
    "causal_mask",
    "check_request",
    "check_text",
    "compute_attention",
    "cpu_threads",
    "describe_device",
    "embed",
    "estimate_trace_bytes",
    "init_weights",
    "masked_softmax",
    "memory_budget_bytes",
    "rerun_head",
    "resolve_device",
    "row_peakiness",
    "scaling_experiment",
    "score_variances",
    "sentence_scaling",
    "sinusoidal_positions",
    "tokenize",
    "trace_sentence",
]
