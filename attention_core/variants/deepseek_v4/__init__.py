"""DeepSeek-V4's attention, its sliding-window layer (transformers' DeepseekV4Attention): every head's query from a
query latent, ONE key/value vector a token read as the key and as the value (K = V), partial RoPE turned back on the
output, a learned sink per head and a grouped low-rank output projection. The cache keeps d_k numbers a token.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said, its output's sliders, and its
stage, the context turned back, declared). Its sink's stage is the learned sink's (variants/look.py).
"""

from __future__ import annotations

from attention_core.variants.deepseek_v4 import compute, look
from attention_core.variants.look import SINK_STAGE
from attention_core.variants.record import Variant

DEEPSEEK_V4 = Variant(
    "deepseek_v4",
    "V4",
    "DeepSeek-V4's attention (its sliding-window layer)",
    "One key/value vector a token, read by every head as its key and as its value (K = V); partial RoPE, turned "
    "back on each head's context; a learned sink per head; the heads projected out in groups (DeepSeek-V4).",
    weights=compute.WEIGHTS,
    project=compute.project,
    unpack=compute.unpack,
    parts=compute.parts,
    cached=("kv_shared",),
    formula="d_k",
    settle=compute.settle,
    uses=("d_cq", "d_rope", "o_groups", "d_o"),
    rope_width="d_rope",
    handed=compute.turned_back,
    out=compute.grouped_output,
    sink="sink",
    look=look.LOOK,
    controls=look.CONTROLS,
    words=look.WORDS,
    own_stages=(SINK_STAGE, look.TURN_STAGE),
)

__all__ = ["DEEPSEEK_V4"]
