"""attention_core: every stage of scaled dot-product self-attention, with no Streamlit in it.

Layers, bottom up: `device` (where the maths runs), `tokens` (text -> X), `config` (knobs and
limits), `engine` (the maths), `trace` (the result object every view reads, with the alias
table of names), `scaling` (the √d_k experiment). Only `models` (real pretrained transformers)
imports transformers; import it explicitly.
"""

from attention_core.config import (
    MAX_DIM,
    MAX_HEADS,
    MAX_SEED,
    MAX_TOKENS,
    AttentionConfig,
    check_request,
    estimate_trace_bytes,
    memory_budget_bytes,
)
from attention_core.device import describe_device, resolve_device
from attention_core.engine import (
    MAX_TEXT_CHARS,
    attend,
    causal_mask,
    compute_attention,
    init_weights,
    masked_softmax,
    rerun_head,
    trace_sentence,
)
from attention_core.scaling import ScalingResult, scaling_experiment
from attention_core.tokens import embed, sinusoidal_positions, tokenize
from attention_core.trace import AttentionTrace, row_peakiness

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_DIM",
    "MAX_HEADS",
    "MAX_SEED",
    "MAX_TOKENS",
    "AttentionConfig",
    "AttentionTrace",
    "ScalingResult",
    "attend",
    "causal_mask",
    "check_request",
    "compute_attention",
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
    "sinusoidal_positions",
    "tokenize",
    "trace_sentence",
]
