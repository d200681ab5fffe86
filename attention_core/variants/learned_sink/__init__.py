"""Attention with a learned sink (gpt-oss): grouped attention whose every head adds a learned logit to each row's
softmax, a column no token owns, so a row's weights sum to less than 1. The cache is grouped attention's: the sink
is one number per head, not per token.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said, and its stage, declared).
"""

from __future__ import annotations

from attention_core.variants.grouped import compute as grouped
from attention_core.variants.learned_sink import compute, look
from attention_core.variants.record import Variant

SINK = Variant(
    "learned_sink",
    "Sink",
    "Attention with a learned sink",
    "Each head has a learned sink logit that joins every row's softmax and is dropped after it (gpt-oss): a row "
    "can give part of its attention to no token, where softmax alone must put it all on some token.",
    weights=compute.WEIGHTS,
    project=grouped.project,
    unpack=grouped.unpack,
    parts=compute.parts,
    cached=("k_kv", "v_kv"),
    formula="g·(d_k + d_v)",
    settle=grouped.settle_gqa,
    uses=("kv_heads",),  # its key/value heads are GQA's (their slider is in the grouped folder)
    sink=compute.SINK.name,
    look=look.LOOK,
    words=look.WORDS,
    own_stages=(look.SINK_STAGE,),
)

__all__ = ["SINK"]
