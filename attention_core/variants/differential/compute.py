"""How differential attention computes (Ye et al. 2024, "Differential Transformer", arXiv 2410.05258; transformers'
DiffLlamaAttention): grouped attention (MHA, GQA) whose every head makes two maps from two pairs of queries and keys
and hands on their difference:

    A₁ = softmax(Q₁K₁ᵀ/√d_k),  A₂ = softmax(Q₂K₂ᵀ/√d_k)     both scaled, bent and masked alike
    A = A₁ − λ·A₂                                          a row sums to 1 − λ; a weight may be negative
    λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init           λ_init = 0.8 − 0.6·exp(−0.3·l), 0.2 in layer l = 0
    handed_h = (1 − λ_init)·RMSNorm(A·V)                   each head's context normalised over d_v, with no gain

What both maps give a token cancels, as noise-cancelling headphones cancel what both microphones hear (trained,
the paper finds the difference sparser than either map). DiffLlama pairs its query heads h and h + H/2 into one
head (its value heads likewise, so each reads values 2·head_dim wide); here a head is one differential head: two
d_k-wide queries and keys and one value of d_v. The cache keeps both keys and the value: g·(2·d_k + d_v) a token.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_core.variants.grouped import compute as grouped
from attention_core.variants.record import Projected, WeightSpec, expand_kv, rms_norm, rotate_qk
from attention_core.variants.sizes import Sizes

LAYER = 0  # the one layer built here, numbered from 0 as DiffLlama numbers its layers
LAMBDA_INIT = 0.8 - 0.6 * math.exp(-0.3 * LAYER)  # DiffLlama's lambda_init_fn: 0.2 in the first layer
NORM_EPS = 1e-5  # the RMSNorm on each head's context (DiffLlamaConfig.rms_norm_eps)

W_Q, W_K, W_V, W_O = grouped.weights("kv_heads")
W_Q2 = WeightSpec("w_q2", "W_Q₂", "heads", "d_model", "d_k", "the second map's queries, per query head")
W_K2 = WeightSpec("w_k2", "W_K₂", "kv_heads", "d_model", "d_k", "the second map's keys, per key/value head")
LAMBDAS = tuple(
    WeightSpec(f"lambda_{side}{i}", f"λ_{side}{i}", "", "d_k", "d_k", f"λ's {side} vector, map {i}", kind="lambda")
    for i in (1, 2)
    for side in ("q", "k")
)
WEIGHTS = (W_Q, W_Q2, W_K, W_K2, W_V, *LAMBDAS, W_O)


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    """The grouped parts (the first map's q and k, and v), and the second map's query and key, turned by RoPE as
    the first's are (their turns are not kept twice)."""
    q2, k2 = rotate_qk(x @ w["w_q2"], x @ w["w_k2"], config, {}, start)  # [h, n, d_k], [g, n, d_k]
    return grouped.project(x, w, config, start) | {"q2": q2, "k2_kv": k2}


def unpack(parts, w, config) -> Projected:
    """GQA's keys and values for every token so far, and the second map's keys, expanded to one per query head."""
    projected = grouped.unpack(parts, w, config)
    k2 = expand_kv(parts["k2_kv"], config.heads // config.kv_heads)
    return dataclasses.replace(projected, parts=projected.parts | {"k2": k2})


def lambda_of(w) -> torch.Tensor:
    """λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init: one number, shared by every head of the layer."""
    first = torch.exp((w["lambda_q1"] * w["lambda_k1"]).sum())
    second = torch.exp((w["lambda_q2"] * w["lambda_k2"]).sum())
    return first - second + LAMBDA_INIT


def handed(context: torch.Tensor, parts) -> torch.Tensor:
    """(1 − λ_init)·RMSNorm(context), each head's row over its d_v (the paper's GroupNorm, one group a head)."""
    return (1 - LAMBDA_INIT) * rms_norm(context, 1.0, NORM_EPS)


def handed_slope(context: torch.Tensor, parts) -> torch.Tensor:
    """Σ_j |∂handed_i/∂context_j| of (1 − λ_init)·x / r, r = √(mean(x²) + ε) over d values: (1 − λ_init)/r times
    (1 + |x_i|·Σ_j |x_j| / (d·r²)), from ∂(x_i / r)/∂x_j = (δ_ij − x_i·x_j / (d·r²)) / r."""
    d = context.shape[-1]
    r = torch.sqrt(context.pow(2).mean(dim=-1, keepdim=True) + NORM_EPS)
    return (1 - LAMBDA_INIT) / r * (1 + context.abs() * context.abs().sum(dim=-1, keepdim=True) / (d * r**2))


def parts(s: Sizes) -> dict[str, int]:
    """Per token: GQA's parts, the second map's query, its key (cached, and expanded) and λ's column."""
    second = {"q2": s.heads * s.d_k, "k2_kv": s.kv_heads * s.d_k, "k2": s.heads * s.d_k, "lambda": s.heads}
    return grouped.parts(s) | second
