"""DeepSeek's multi-head latent attention (DeepSeek-V2, section 2.1): every head's keys and values up-projected from
one small latent c_KV per token, and one rotary key k^R for all heads; the cache keeps only c_KV and k^R.

The variant's folder: compute.py (how it computes), look.py (how it is drawn and said, its sizes' sliders). Its
stages `latent` and `absorb` are drawn by figures/stages/ (a drawing of their own, not declared matrices).
"""

from __future__ import annotations

from attention_core.variants.mla import compute, look
from attention_core.variants.mla.compute import absorbed_scores, folded_with_rotated_keys, rotation_matrix
from attention_core.variants.record import Variant

MLA = Variant(
    "mla",
    "MLA",
    "Multi-head latent attention",
    "Every head's keys and values are made from one small latent c_KV per token, and one rotary key k^R carries "
    "the position for all heads: the cache keeps only c_KV and k^R.",
    weights=compute.WEIGHTS,
    project=compute.project,
    unpack=compute.unpack,
    parts=compute.parts,
    cached=("c_kv", "k_r"),
    formula="d_c + d_h^R",
    stages=("latent", "absorb"),
    settle=compute.settle,
    uses=("d_c", "d_cq", "d_rope"),
    rope_width="d_rope",
    qk=lambda s: (s.d_k + s.d_rope, "(d_k + d_h^R)") if s.d_rope else (s.d_k, "d_k"),  # q = [q^C, q^R]
    look=look.LOOK,
    controls=look.CONTROLS,
    words=look.WORDS,
)

__all__ = ["MLA", "absorbed_scores", "folded_with_rotated_keys", "rotation_matrix"]
