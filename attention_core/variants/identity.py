"""Q = K = V = X: attention with no projections at all (lecture 003's first attempt)."""

from __future__ import annotations

import torch

from attention_core import rotary
from attention_core.variants.record import Projected, Variant, rotary_parts, rotate_qk, without_q


def _project_identity(x, w, config, start) -> dict[str, torch.Tensor]:
    parts = {"kv": x}  # every token compares its own vector with the others'
    q, _ = rotate_qk(x.unsqueeze(0), x.unsqueeze(0), config, parts, start)  # [1, n, d]
    return parts | {"q": q}


def _unpack_identity(parts, w, config) -> Projected:
    kv = parts["kv"].unsqueeze(0)  # [1, n, d]: the keys are X (turned by RoPE, where it is on), the values X
    k = rotary.rotate(kv, config.rope_base) if config.positional == "rotary" else kv
    return Projected(parts["q"], k, kv, (0,), without_q(parts))


IDENTITY = Variant(
    "identity",
    "Q = K = V = X",
    "No projections",
    "Each token's query, key and value are its own row of X: lecture 003's first attempt, with nothing learned.",
    weights=(),
    project=_project_identity,
    unpack=_unpack_identity,
    parts=lambda s: {"kv": s.d_model} | rotary_parts(s, s.d_model, s.d_model),
    cached=("kv",),
    formula="d_model",
    settle=lambda f, top: {"d_k": f["d_model"], "d_v": f["d_model"], "heads": 1, "kv_heads": 1},  # X's widths
    qk=lambda s: (s.d_model, "d_model"),
    heads_name="",
    v_name="d_model",
)
