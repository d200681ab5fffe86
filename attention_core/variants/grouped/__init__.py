"""MHA, GQA and MQA: g key/value heads, each read by h/g query heads (g = h, 1 < g < h, g = 1). They differ only in
how many key/value heads there are, so one folder holds the three: compute.py (how they compute), look.py (how each
is drawn and said, and GQA's slider).
"""

from __future__ import annotations

from attention_core.variants.grouped import compute, look
from attention_core.variants.grouped.compute import fit_kv_heads
from attention_core.variants.record import Variant


def _grouped(key: str, label: str, title: str, idea: str, kv_copies: str, formula: str, **own) -> Variant:
    """MHA, GQA and MQA differ only in how many key/value heads there are: W_K and W_V come in kv_copies."""
    return Variant(
        key,
        label,
        title,
        idea,
        weights=compute.weights(kv_copies),
        project=compute.project,
        unpack=compute.unpack,
        parts=compute.parts,
        cached=("k_kv", "v_kv"),
        formula=formula,
        **own,
    )


def on_gqa(key: str, label: str, title: str, idea: str, **own) -> Variant:
    """A variant built on GQA: its key/value heads (and their slider), and by default how it projects, how keys
    and values are unpacked for every token so far, and so its cache; `own` says what it adds (gated attention's
    gate, a learned sink's logit, differential attention's second map): its weights and parts, and its own
    project, unpack, cache, handed, sink, look, words and stages."""
    gqa = {"project": compute.project, "unpack": compute.unpack, "cached": ("k_kv", "v_kv"), "formula": "g·(d_k + d_v)"}
    return Variant(
        key,
        label,
        title,
        idea,
        **(gqa | own),
        settle=compute.settle_gqa,
        uses=("kv_heads",),  # the key/value heads are GQA's (their slider is in this folder)
    )


MHA = _grouped(
    "mha",
    "MHA",
    "Multi-head attention",
    "Every query head has a key and value head of its own: h of each (the original Transformer, GPT-2, BERT).",
    "heads",
    "h·(d_k + d_v)",
    settle=lambda f, top: {"kv_heads": f["heads"]},
    look=look.MHA,
)
GQA = _grouped(
    "gqa",
    "GQA",
    "Grouped-query attention",
    "g key/value heads, each read by a group of h/g query heads (Llama, SmolLM2): the cache keeps g heads, not h.",
    "kv_heads",
    "g·(d_k + d_v)",
    settle=compute.settle_gqa,
    uses=("kv_heads",),
    look=look.GQA,
    controls=(look.KV_HEADS,),
)
MQA = _grouped(
    "mqa",
    "MQA",
    "Multi-query attention",
    "One key and value head, read by every query head (Shazeer 2019): the smallest cache of the grouped kind.",
    "kv_heads",
    "d_k + d_v",
    settle=lambda f, top: {"kv_heads": 1},
    look=look.MQA,
)

__all__ = ["GQA", "MHA", "MQA", "fit_kv_heads", "on_gqa"]
