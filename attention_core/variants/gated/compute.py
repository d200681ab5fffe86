"""How gated attention computes: grouped attention (MHA, GQA), then each head's context multiplied, channel by
channel and token by token, by a gate in (0, 1) that the token makes from its own row of X:

    gate_h = σ(X·W_G,h)            [n, d_v] per head: σ(z) = 1 / (1 + e^(−z))
    handed_h = context_h ⊙ gate_h  what the head hands on to W_O, in place of its context

Qwen3-Next computes it so (its q_proj makes each head's query and gate side by side; `attn_output *
sigmoid(gate)` before o_proj), after the gated-attention paper (Qiu et al. 2025, arXiv 2505.06708): a head can now
pass on nothing from a token, where softmax alone must put each row's weight somewhere.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from attention_core.variants.grouped import compute as grouped
from attention_core.variants.record import WeightSpec
from attention_core.variants.sizes import Sizes

GATE = WeightSpec("w_g", "W_G", "heads", "d_model", "d_v", "each head's gate on its context, per channel")
W_Q, W_K, W_V, W_O = grouped.weights("kv_heads")
WEIGHTS = (W_Q, W_K, W_V, GATE, W_O)


def project(x, w, config, start) -> dict[str, torch.Tensor]:
    """The grouped parts, and each token's gate: its own, made from its row of X alone (a decoder makes it for the
    new token, and caches nothing more)."""
    gate = torch.sigmoid(x @ w["w_g"])  # [n, d] @ [h, d, d_v] -> [h, n, d_v]
    return grouped.project(x, w, config, start) | {"gate": gate}


def handed(context: torch.Tensor, parts: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return context * parts["gate"]  # [h, n, d_v] ⊙ [h, n, d_v]


def parts(s: Sizes) -> dict[str, int]:
    return grouped.parts(s) | {"gate": s.heads * s.d_v}
