"""How Q = K = V = X computes: no projections, each token compared with the others as it is."""

from __future__ import annotations

import torch

from attention_core import rotary
from attention_core.variants.record import Projected, rotate_qk, without_q


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    parts = {"kv": x}  # every token compares its own vector with the others'
    q, _ = rotate_qk(x.unsqueeze(0), x.unsqueeze(0), config, parts, start)  # [1, n, d]
    return parts | {"q": q}


def unpack(parts, w, config) -> Projected:
    kv = parts["kv"].unsqueeze(0)  # [1, n, d]: the keys are X (turned by RoPE, where it is on), the values X
    k = rotary.rotate(kv, config.rope_base) if config.positional == "rotary" else kv
    return Projected(parts["q"], k, kv, (0,), without_q(parts))
