"""How MLA computes: keys and values up-projected from one small latent per token, a shared rotary key, and
absorption (the scores without ever forming K)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core import rotary
from attention_core.checks import check_int
from attention_core.variants.record import (
    Projected,
    Sizes,
    WeightSpec,
    rms_norm,
    rotary_parts,
    rotate_qk,
    without_q,
)


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    parts = {}
    if config.d_cq:
        c_q = rms_norm(x @ w["w_dq"], w["g_q"])  # [n, d_cq]
        q_c = c_q @ w["w_uq"]  # [h, n, d_k]
        parts["c_q"] = c_q
        source = c_q
    else:
        q_c = x @ w["w_q"]  # [h, n, d_k]
        source = x
    c_kv = rms_norm(x @ w["w_dkv"], w["g_kv"])  # [n, d_c]: all that this token's keys and values are made from
    parts |= {"q_c": q_c, "c_kv": c_kv, "q": q_c}
    if config.d_rope:
        q_r, k_r = rotate_qk(source @ w["w_qr"], x @ w["w_kr"], config, parts, start)  # [h, n, d_r], [n, d_r]
        parts |= {"q_r": q_r, "k_r": k_r, "q": torch.cat([q_c, q_r], dim=-1)}  # q: [h, n, d_k + d_r]
    return parts


def unpack(parts, w, config) -> Projected:
    """Keys and values up-projected from the latents (the way the trace shows them; a decoder can instead fold
    W_UK into the query: absorbed_scores)."""
    k_c = parts["c_kv"] @ w["w_uk"]  # [h, n, d_k]
    v_c = parts["c_kv"] @ w["w_uv"]  # [h, n, d_v]
    k = k_c
    if config.d_rope:
        k_r = parts["k_r"]  # [n, d_r]: one rotary key for all heads
        k = torch.cat([k_c, k_r.expand(config.heads, *k_r.shape)], dim=-1)  # q·k = q^C·k^C + q^R·k^R
    return Projected(parts["q"], k, v_c, tuple(range(config.heads)), without_q(parts) | {"k_c": k_c, "v_c": v_c})


def parts(s: Sizes) -> dict[str, int]:
    parts = {"q_c": s.heads * s.d_k, "c_kv": s.d_c, "k_c": s.heads * s.d_k, "v_c": s.heads * s.d_v}
    if s.d_cq:
        parts["c_q"] = s.d_cq
    if s.d_rope:
        parts |= {"q_r": s.heads * s.d_rope, "k_r": s.d_rope} | rotary_parts(s, s.heads * s.d_rope, s.d_rope)
    return parts


def _with_query_latent(s: Sizes) -> bool:
    return s.d_cq > 0


def _without_query_latent(s: Sizes) -> bool:
    return s.d_cq == 0


def _with_rope(s: Sizes) -> bool:
    return s.d_rope > 0


def _with_query_latent_and_rope(s: Sizes) -> bool:
    return s.d_cq > 0 and s.d_rope > 0


def _without_query_latent_with_rope(s: Sizes) -> bool:
    return s.d_cq == 0 and s.d_rope > 0


def settle(f: Mapping[str, object], top: int) -> dict[str, object]:
    """A key/value head per query head (made from the latent), and MLA's own widths checked."""
    d_rope = check_int("d_h^R (MLA's rotary width; 0: none)", f["d_rope"], 0, top)
    if d_rope % 2:
        raise ValueError(f"d_h^R (MLA's rotary width) must be even: RoPE turns pairs of dimensions; got {d_rope}")
    d_c = check_int("d_c (MLA's latent width)", f["d_c"], 1, top)
    d_cq = check_int("d_cq (MLA's query latent width; 0: none)", f["d_cq"], 0, top)
    return {"kv_heads": f["heads"], "d_c": d_c, "d_cq": d_cq, "d_rope": d_rope}


WEIGHTS = (
    WeightSpec(
        "w_q", "W_Q", "heads", "d_model", "d_k", "each head's content query, from X", present=_without_query_latent
    ),
    WeightSpec("w_dq", "W_DQ", "", "d_model", "d_cq", "down to the query latent c_Q", present=_with_query_latent),
    WeightSpec("g_q", "g_Q", "", "d_cq", "d_cq", "RMSNorm's gain on c_Q", kind="gain", present=_with_query_latent),
    WeightSpec(
        "w_uq", "W_UQ", "heads", "d_cq", "d_k", "each head's content query, up from c_Q", present=_with_query_latent
    ),
    WeightSpec(
        "w_qr",
        "W_QR",
        "heads",
        "d_model",
        "d_rope",
        "each head's rotary query, from X",
        present=_without_query_latent_with_rope,
    ),
    WeightSpec(
        "w_qr",
        "W_QR",
        "heads",
        "d_cq",
        "d_rope",
        "each head's rotary query, from c_Q",
        present=_with_query_latent_and_rope,
    ),
    WeightSpec("w_dkv", "W_DKV", "", "d_model", "d_c", "down to the key-value latent c_KV"),
    WeightSpec("g_kv", "g_KV", "", "d_c", "d_c", "RMSNorm's gain on c_KV", kind="gain"),
    WeightSpec("w_uk", "W_UK", "heads", "d_c", "d_k", "each head's content key, up from c_KV", applies="cached"),
    WeightSpec("w_uv", "W_UV", "heads", "d_c", "d_v", "each head's value, up from c_KV", applies="cached"),
    WeightSpec("w_kr", "W_KR", "", "d_model", "d_rope", "the rotary key shared by every head", present=_with_rope),
    WeightSpec("w_o", "W_O", "", "concat", "d_model", "maps every head's context back to d_model"),
)


def absorbed_scores(parts: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """MLA's content scores q^C·k^Cᵀ [h, n, n] computed the absorbed way: W_UK folded into the query,
    (q^C·W_UKᵀ)·c_KVᵀ, so that a decoder compares each query with the cached latents directly."""
    absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1)  # [h, n, d_k] @ [h, d_k, d_c] -> [h, n, d_c]
    return absorbed @ parts["c_kv"].T  # [h, n, d_c] @ [d_c, n] -> [h, n, n]


def rotation_matrix(position: int, width: int, base: float, dtype=torch.float64, device="cpu") -> torch.Tensor:
    """RoPE at one position as a [width, width] matrix M: a row vector x turns into x·M."""
    rows = torch.eye(width, dtype=dtype, device=device).unsqueeze(1).expand(width, position + 1, width)
    return rotary.rotate(rows, base)[:, position]  # row r: the unit vector e_r, turned as position `position` turns


def folded_with_rotated_keys(
    parts: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor], base: float, fold_at: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Why MLA's rotary key is kept apart. Were the content keys rotated, k_j = RoPE_j(c_j·W_UK), the content
    scores would be RoPE(q^C)·k_jᵀ. Returns (those scores, the same scores with W_UK and the keys' rotation
    folded into the query once, for keys at position `fold_at`), each [h, n, n]. They agree only in the column of
    that position: a fold of W_UK through a rotation would need another matrix for every key position."""
    q_c, c_kv, w_uk = parts["q_c"], parts["c_kv"], weights["w_uk"]
    q_rot = rotary.rotate(q_c, base)  # [h, n, d_k]
    exact = q_rot @ rotary.rotate(c_kv @ w_uk, base).transpose(-2, -1)  # [h, n, n]
    turn = rotation_matrix(fold_at, q_c.shape[-1], base, q_c.dtype, q_c.device)  # k = (c·W_UK)·M: kᵀ = Mᵀ·W_UKᵀ·cᵀ
    folded = (q_rot @ turn.T @ w_uk.transpose(-2, -1)) @ c_kv.T  # [h, n, d_c] @ [d_c, n]
    return exact, folded
