"""How attention with a learned sink computes (gpt-oss): grouped attention (MHA, GQA) whose every head has one more
learned number, its sink logit s_h, that joins every row's softmax as a column no token owns:

    weights_ij = exp(m_ij) / (Σ_j' exp(m_ij') + exp(s_h))     m: the masked scaled scores of row i
    sink share_i = exp(s_h) / (Σ_j' exp(m_ij') + exp(s_h))     the part of the row that goes to no token

The sink's column is dropped after the softmax (engine.sink_softmax), so a row's weights sum to 1 − its share, and
the context is a weighted sum with less than the whole weight: a head can pass on little or nothing from a row.
transformers computes it so (GptOssAttention: `sinks`, one per head, concatenated to the logits, `probs[..., :-1]`).
Without a learned sink a model parks that weight on a real token (the first: the attention sink); with one it
need not.
"""

from __future__ import annotations

from attention_core.variants.grouped import compute as grouped
from attention_core.variants.record import Sizes, WeightSpec

SINK = WeightSpec(
    "sink", "s", "", "heads", "heads", "each head's sink logit: one more column in every row's softmax", kind="logit"
)
W_Q, W_K, W_V, W_O = grouped.weights("kv_heads")
WEIGHTS = (W_Q, W_K, W_V, SINK, W_O)


def parts(s: Sizes) -> dict[str, int]:
    return grouped.parts(s) | {"sink_logit": s.heads, "sink_share": s.heads}  # per token: each head's logit, share
