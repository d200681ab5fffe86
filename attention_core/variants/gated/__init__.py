"""Gated attention (Qwen3-Next; Qiu et al. 2025): grouped attention whose every head multiplies its context by a
sigmoid gate, per token and channel, before W_O. The cache is grouped attention's: the gate is each new token's own.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said, and its stage, declared).
"""

from __future__ import annotations

from attention_core.variants.gated import compute, look
from attention_core.variants.grouped import on_gqa

GATED = on_gqa(
    "gated",
    "Gated",
    "Gated attention",
    "Each head multiplies its context by a gate between 0 and 1, per token and channel, made from the token's own "
    "row of X (Qwen3-Next): a head can pass on nothing, where softmax alone must send its weight somewhere.",
    weights=compute.WEIGHTS,
    project=compute.project,
    parts=compute.parts,
    handed=compute.handed,
    look=look.LOOK,
    words=look.WORDS,
    own_stages=(look.GATE_STAGE,),
)

__all__ = ["GATED"]
