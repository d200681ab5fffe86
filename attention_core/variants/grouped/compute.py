"""How MHA, GQA and MQA compute: g key/value heads, each read by h/g query heads (g = h, 1 < g < h, g = 1)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.checks import check_int, divisors
from attention_core.variants.record import (
    Projected,
    Sizes,
    WeightSpec,
    default_kv_heads,
    expand_kv,
    plural,
    rotary_parts,
    rotate_qk,
    without_q,
)


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    q = x @ w["w_q"]  # [n, d] @ [h, d, d_k] -> [h, n, d_k]
    k_kv, v_kv = x @ w["w_k"], x @ w["w_v"]  # [g, n, d_k], [g, n, d_v]
    parts = {}
    q, k_kv = rotate_qk(q, k_kv, config, parts, start)
    return parts | {"q": q, "k_kv": k_kv, "v_kv": v_kv}  # the cache keeps keys as they meet the queries: rotated


def unpack(parts, w, config) -> Projected:
    groups = config.heads // config.kv_heads
    kv_head_of = tuple(head // groups for head in range(config.heads))
    k, v = expand_kv(parts["k_kv"], groups), expand_kv(parts["v_kv"], groups)  # one per query head
    return Projected(parts["q"], k, v, kv_head_of, without_q(parts))


def parts(s: Sizes) -> dict[str, int]:
    return {"k_kv": s.kv_heads * s.d_k, "v_kv": s.kv_heads * s.d_v} | rotary_parts(
        s, s.heads * s.d_k, s.kv_heads * s.d_k
    )


def weights(kv: str) -> tuple[WeightSpec, ...]:
    return (
        WeightSpec("w_q", "W_Q", "heads", "d_model", "d_k", "what each token asks, per query head"),
        WeightSpec("w_k", "W_K", kv, "d_model", "d_k", "what each token offers, per key/value head"),
        WeightSpec("w_v", "W_V", kv, "d_model", "d_v", "what each token passes on, per key/value head"),
        WeightSpec("w_o", "W_O", "", "concat", "d_model", "maps every head's context back to d_model"),
    )


def settle_gqa(f: Mapping[str, object], top: int) -> dict[str, object]:
    """GQA's key/value heads (by default the most that leave each two or more query heads) must divide the heads."""
    h = f["heads"]
    g = check_int("key/value heads", default_kv_heads(h) if f["kv_heads"] is None else f["kv_heads"], 1, h)
    if h % g:
        raise ValueError(
            f"key/value heads must divide the heads, so that each serves as many query heads: "
            f"{plural(h, 'head')} cannot be shared evenly by {g}; with {plural(h, 'head')} choose one of "
            f"{', '.join(map(str, divisors(h)))}"
        )
    return {"kv_heads": g}


def fit_kv_heads(heads: int, kv_heads: int) -> int:
    """Key/value heads for `heads` query heads to share: kv_heads where they divide the heads and are fewer (as
    many would be MHA), else the default (default_kv_heads)."""
    return kv_heads if kv_heads < heads and heads % kv_heads == 0 else default_kv_heads(heads)
