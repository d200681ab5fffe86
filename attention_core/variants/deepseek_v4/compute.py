"""How DeepSeek-V4's attention computes, in its sliding-window layer (transformers' DeepseekV4Attention). Per
token, with h query heads of width d_k:

    c_Q = RMSNorm(X·W_QA)·g_QA        [n, d_cq]     the query latent, as MLA's (d_cq = 0: none, q from X·W_Q)
    q_h = RMSNorm(c_Q·W_QB,h)         [h, n, d_k]   each head's query, normalised again, with no gain
    kv  = RMSNorm(X·W_KV)·g_KV        [n, d_k]      ONE key/value vector a token, read as its key and its value
    RoPE on the last d_h^R dimensions of q and kv  (the rest unturned: partial RoPE)
    A_h = softmax([S'_h, s_h])[:-1]                a learned sink logit per head (gpt-oss's), dropped after it
    o_h = RoPE⁻¹(A_h·kv)                           the values carried the keys' turn: turned back at the query's
    out = [o_1 … o_h] in G groups: each group·W_OA,g (down to d_o), side by side ·W_OB (up to d_model)

K = V, and one head of it for every query head: the cache keeps d_k numbers a token and layer, the least of any
variant here. Turning the context back (position −i) leaves a value's contribution a function of the distance
alone, as the scores are. Every V4 layer keeps a sliding window of keys (128 tokens; here the sidebar's window);
two of its three kinds add compressed entries of older tokens (not built here yet).

transformers' module pairs neighbouring dimensions for RoPE (interleaved); here the halves are paired as in
rotary.py: the same rotation with the rotary columns reordered (tests/test_deepseek_v4.py maps one to the other).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core import rotary
from attention_core.checks import check_int, divisors
from attention_core.variants.record import (
    Projected,
    Sizes,
    WeightSpec,
    plural,
    rms_norm,
    rotary_parts,
    rotate_qk,
    without_q,
)

NORM_EPS = 1e-6  # every RMSNorm's ε (DeepseekV4Config.rms_norm_eps)


def _with_query_latent(s: Sizes) -> bool:
    return s.d_cq > 0


def _without_query_latent(s: Sizes) -> bool:
    return s.d_cq == 0


WEIGHTS = (
    WeightSpec("w_q", "W_Q", "heads", "d_model", "d_k", "each head's query, from X", present=_without_query_latent),
    WeightSpec("w_qa", "W_QA", "", "d_model", "d_cq", "down to the query latent c_Q", present=_with_query_latent),
    WeightSpec("g_qa", "g_QA", "", "d_cq", "d_cq", "RMSNorm's gain on c_Q", kind="gain", present=_with_query_latent),
    WeightSpec("w_qb", "W_QB", "heads", "d_cq", "d_k", "each head's query, up from c_Q", present=_with_query_latent),
    WeightSpec("w_kv", "W_KV", "", "d_model", "d_k", "the one key/value vector every head reads (K = V)"),
    WeightSpec("g_kv", "g_KV", "", "d_k", "d_k", "RMSNorm's gain on the key/value vector", kind="gain"),
    WeightSpec(
        "sink", "s", "", "heads", "heads", "each head's sink logit: a column in every row's softmax", kind="logit"
    ),
    WeightSpec("w_oa", "W_OA", "o_groups", "group", "d_o", "each group of heads' output, down to d_o"),
    WeightSpec("w_ob", "W_OB", "", "groups_out", "d_model", "every group's d_o side by side, up to d_model"),
)


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    """Each token's query per head and its one key/value vector, their last d_h^R dimensions turned by RoPE at
    their positions (both sides kept), and the angles its context is turned back by."""
    parts = {}
    if config.d_cq:
        parts["c_q"] = rms_norm(x @ w["w_qa"], w["g_qa"], NORM_EPS)  # [n, d_cq]
        q = parts["c_q"] @ w["w_qb"]  # [h, n, d_k]
    else:
        q = x @ w["w_q"]
    q = rms_norm(q, 1.0, NORM_EPS)  # each head's query over its d_k, with no gain
    kv = rms_norm(x @ w["w_kv"], w["g_kv"], NORM_EPS)  # [n, d_k]: the key and the value
    r = config.d_rope  # 0 without rotary positions (settle)
    if r:
        q_r, k_r = rotate_qk(q[..., -r:], kv[..., -r:], config, parts, start)  # [h, n, r], [n, r]
        q, kv = torch.cat([q[..., :-r], q_r], dim=-1), torch.cat([kv[..., :-r], k_r], dim=-1)
        parts["angles"] = rotary.angles(len(x), r, config.rope_base, x.dtype, x.device, start)  # [n, r/2]
    return parts | {"q": q, "kv_shared": kv}


def unpack(parts, w, config) -> Projected:
    """The one key/value vector of every token so far, as every head's key and as its value."""
    shared = parts["kv_shared"].expand(config.heads, *parts["kv_shared"].shape)  # [h, n, d_k]: one for all heads
    return Projected(parts["q"], shared, shared, (0,) * config.heads, without_q(parts))


def turned_back(context: torch.Tensor, parts: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Each head's context with its last d_h^R dimensions turned back by its query's angles (RoPE at −i): the
    values were keys, turned at their own positions."""
    if "angles" not in parts:
        return context
    theta = parts["angles"].to(context.dtype)  # [n, r/2]
    r = 2 * theta.shape[-1]
    return torch.cat([context[..., :-r], rotary.turn(context[..., -r:], -theta)], dim=-1)


def grouped_output(concat: torch.Tensor, w: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """[n, h·d_k] -> [n, d_model]: the heads in G groups of h/G, each group's rows ·W_OA,g down to d_o, the G
    results side by side ·W_OB (a low-rank W_O, cheaper than one [h·d_k, d_model] matrix at V4's widths)."""
    groups = w["w_oa"].shape[0]
    grouped = concat.reshape(concat.shape[0], groups, -1).transpose(0, 1)  # [G, n, h·d_k/G]
    low = grouped @ w["w_oa"]  # [G, n, d_o]
    return low.transpose(0, 1).reshape(concat.shape[0], -1) @ w["w_ob"]


def parts(s: Sizes) -> dict[str, int]:
    """Per token: the key/value vector (cached), the query latent, RoPE's angles and both sides of its turn, and
    each head's sink logit and share."""
    latent = {"c_q": s.d_cq} if s.d_cq else {}
    rope = {"angles": s.d_rope // 2} if s.rotary else {}
    sink = {"sink_logit": s.heads, "sink_share": s.heads}  # per token: each head's logit, and the sink's share
    return {"kv_shared": s.d_k} | latent | rope | rotary_parts(s, s.heads * s.d_rope, s.d_rope) | sink


def settle(f: Mapping[str, object], top: int) -> dict[str, object]:
    """One key/value head, its vector the value too (d_v = d_k), and V4's own sizes checked; the rotary part is
    d_h^R with rotary positions, and none without."""
    d_k, heads = f["d_k"], f["heads"]
    d_rope = check_int("d_h^R (the rotary part of d_k; 0: none)", f["d_rope"], 0, d_k)
    if f["positional"] != "rotary":
        d_rope = 0  # nothing is turned, so nothing is turned back: equal layers, equal configs
    if d_rope % 2:
        raise ValueError(f"d_h^R (the rotary part of d_k) must be even: RoPE turns pairs of dimensions; got {d_rope}")
    groups = check_int("output groups", f["o_groups"], 1, heads)
    if heads % groups:
        raise ValueError(
            f"output groups must divide the heads, so that each group has as many: {plural(heads, 'head')} cannot "
            f"be split into {groups}; choose one of {', '.join(map(str, divisors(heads)))}"
        )
    d_o = check_int("d_o (each output group's width)", f["d_o"], 1, top)
    d_cq = check_int("d_cq (the query latent's width; 0: none)", f["d_cq"], 0, top)
    return {"kv_heads": 1, "d_v": d_k, "d_rope": d_rope, "o_groups": groups, "d_o": d_o, "d_cq": d_cq}
