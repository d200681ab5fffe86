"""Attention with a learned sink (gpt-oss): grouped attention whose every head adds a learned logit to each row's
softmax, a column no token owns, so a row's weights sum to less than 1. The cache is grouped attention's: the sink
is one number per head, not per token.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said); its stage, the sink's share
of each row, is variants/look.py's SINK_STAGE, which DeepSeek-V4 shows too.
"""

from __future__ import annotations

from attention_core.variants.grouped import on_gqa
from attention_core.variants.learned_sink import compute, look
from attention_core.variants.look import SINK_STAGE

SINK = on_gqa(
    "learned_sink",
    "Sink",
    "Attention with a learned sink",
    "Each head has a learned sink logit that joins every row's softmax and is dropped after it (gpt-oss): a row "
    "can give part of its attention to no token, where softmax alone must put it all on some token.",
    weights=compute.WEIGHTS,
    parts=compute.parts,
    sink=compute.SINK.name,
    look=look.LOOK,
    words=look.WORDS,
    own_stages=(SINK_STAGE,),
)

__all__ = ["SINK"]
