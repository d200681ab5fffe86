"""Differential attention (Ye et al. 2024; DiffLlama): grouped attention whose every head takes two softmax maps and
hands on their difference, A₁ − λ·A₂, so noise both maps share cancels and a weight may be negative. The cache keeps
both keys: g·(2·d_k + d_v) per token.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said, and its stage, declared).
"""

from __future__ import annotations

from attention_core.variants.differential import compute, look
from attention_core.variants.grouped import on_gqa

DIFFERENTIAL = on_gqa(
    "differential",
    "Diff",
    "Differential attention",
    "Each head takes two softmax maps from two pairs of queries and keys and attends with their difference, "
    "A₁ − λ·A₂ (the Differential Transformer, DiffLlama): what both maps give a token cancels, and a weight may be "
    "negative.",
    weights=compute.WEIGHTS,
    project=compute.project,
    unpack=compute.unpack,
    parts=compute.parts,
    cached=("k_kv", "k2_kv", "v_kv"),
    formula="g·(2·d_k + d_v)",
    handed=compute.handed,
    handed_slope=compute.handed_slope,
    lambda_of=compute.lambda_of,
    maps=3,
    constants={"lambda_init": compute.LAMBDA_INIT, "norm_eps": compute.NORM_EPS},
    look=look.LOOK,
    words=look.WORDS,
    own_stages=(look.MAPS_STAGE,),
)

__all__ = ["DIFFERENTIAL"]
