"""Q = K = V = X: attention with no projections at all (lecture 003's first attempt). Its folder: compute.py (how it
computes) and look.py (how it is drawn and said)."""

from __future__ import annotations

from attention_core.variants.identity import compute, look
from attention_core.variants.record import Variant, rotary_parts

IDENTITY = Variant(
    "identity",
    "Q = K = V = X",
    "No projections",
    "Each token's query, key and value are its own row of X: lecture 003's first attempt, with nothing learned.",
    weights=(),
    project=compute.project,
    unpack=compute.unpack,
    parts=lambda s: {"kv": s.d_model} | rotary_parts(s, s.d_model, s.d_model),
    cached=("kv",),
    formula="d_model",
    settle=lambda f, top: {"d_k": f["d_model"], "d_v": f["d_model"], "heads": 1, "kv_heads": 1},  # X's widths
    qk=lambda s: (s.d_model, "d_model"),
    heads_name="",
    v_name="d_model",
    look=look.LOOK,
    words=look.WORDS,
)

__all__ = ["IDENTITY"]
