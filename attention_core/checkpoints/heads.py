"""Cutting a layer's whole matrices into heads: W_Q [d, h·d_k] is h matrices [d, d_k] side by side, head i's
columns i·d_k ... (i+1)·d_k − 1, as nanoGPT's q.view(B, T, nh, hs) and transformers' view(..., -1, head_dim) read
them. Each function returns the sidebar's sizes and the variant's weights by name (attention_core/variants/)."""

from __future__ import annotations

import torch

from attention_core.variants import MLA, grouped_key


def _cut(total: int, parts: int, what: str) -> int:
    if parts < 1 or total % parts:
        raise ValueError(f"{what} has {total} columns, which {parts} heads do not share evenly")
    return total // parts


def grouped_heads(full, h: int) -> tuple[dict, dict]:
    q, k, v, o = full["q"], full["k"], full["v"], full["o"]
    d = q.shape[0]
    d_k = _cut(q.shape[1], h, "W_Q")
    g = _cut(k.shape[1], d_k, f"W_K (as keys of width {d_k})")
    d_v = _cut(v.shape[1], g, f"W_V (as {g} value heads)")
    if h % g or tuple(o.shape) != (h * d_v, d) or k.shape[0] != d or v.shape[0] != d:
        shapes = f"W_K {list(k.shape)}, W_V {list(v.shape)} and W_O {list(o.shape)}"
        raise ValueError(f"with {h} heads, {shapes} do not fit W_Q {list(q.shape)}")
    weights = {
        "w_q": q.reshape(d, h, d_k).permute(1, 0, 2),  # [h, d, d_k]: head i's columns i·d_k ... (i+1)·d_k − 1
        "w_k": k.reshape(d, g, d_k).permute(1, 0, 2),  # [g, d, d_k]
        "w_v": v.reshape(d, g, d_v).permute(1, 0, 2),  # [g, d, d_v]
        "w_o": o,  # [h·d_v, d]
    }
    sizes = {"variant": grouped_key(h, g), "d_model": d, "d_k": d_k, "d_v": d_v, "heads": h, "kv_heads": g}
    return sizes, {name: w.contiguous() for name, w in weights.items()}


def halves_from_neighbours(width: int) -> torch.Tensor:
    """Columns reordered so that RoPE's pairs (0, 1), (2, 3), ... (DeepSeek's complex numbers) become the pairs
    (i, i + width/2) this app turns: new column i is old 2i, new column width/2 + i is old 2i + 1. Each pair keeps
    its frequency, and q·k is unchanged (both sides are reordered alike)."""
    return torch.cat([torch.arange(0, width, 2), torch.arange(1, width, 2)])


def latent_heads(full, h: int) -> tuple[dict, dict]:
    q, dkv, gkv, ukv, o = full["q"], full["dkv"], full["gkv"], full["ukv"], full["o"]
    d, d_c = dkv.shape[0], gkv.numel()
    d_r = dkv.shape[1] - d_c
    if d_r < 0 or d_r % 2:
        raise ValueError(
            f"the latent's down-projection has {dkv.shape[1]} columns for a latent of {d_c}: the rest, the rotary "
            f"key's {d_r}, must be even and not negative"
        )
    d_k = _cut(q.shape[1], h, "the query's up-projection") - d_r
    d_v = _cut(ukv.shape[1], h, "W_UK and W_UV") - d_k
    if d_k < 1 or d_v < 1 or tuple(o.shape) != (h * d_v, d):
        shapes = f"the query's {list(q.shape)}, W_UK and W_UV's {list(ukv.shape)} and W_O's {list(o.shape)}"
        raise ValueError(f"with {h} heads, {shapes} do not agree")
    turn = halves_from_neighbours(d_r)
    per_head = q.reshape(q.shape[0], h, d_k + d_r).permute(1, 0, 2)  # [h, source, d_k + d_r]
    up = ukv.reshape(d_c, h, d_k + d_v).permute(1, 0, 2)  # [h, d_c, d_k + d_v]
    weights = {"w_dkv": dkv[:, :d_c], "g_kv": gkv, "w_uk": up[..., :d_k], "w_uv": up[..., d_k:], "w_o": o}
    weights["w_uq" if "dq" in full else "w_q"] = per_head[..., :d_k]
    if d_r:
        weights |= {"w_qr": per_head[..., d_k:][..., turn], "w_kr": dkv[:, d_c:][:, turn]}
    d_cq = 0
    if "dq" in full:
        weights |= {"w_dq": full["dq"], "g_q": full["gq"]}
        d_cq = full["dq"].shape[1]
    sizes = {"variant": MLA.key, "d_model": d, "d_k": d_k, "d_v": d_v, "heads": h, "kv_heads": h, "d_c": d_c}
    sizes |= {"d_cq": d_cq, "d_rope": d_r, "positional": "rotary" if d_r else "none"}
    return sizes, {name: w.contiguous() for name, w in weights.items()}
