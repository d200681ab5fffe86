"""Attention variants as one registry: MHA, MQA, GQA, DeepSeek's multi-head latent attention (MLA), Q = K = V = X,
gated attention (Qwen3-Next), a learned sink (gpt-oss) and differential attention (DiffLlama).

A variant is one `Variant` record in VARIANTS, the way transformers picks an attention kernel by name from
ALL_ATTENTION_FUNCTIONS. It says
- which weight matrices it has (`WeightSpec`: name, true shape, what it does, and whether a decoder applies it
  to the new token only or to every cached one);
- how it makes every head's q, k and v from X, in two halves, as a decoder needs them: `project` makes what each
  token has of its own (its query, and what a KV cache keeps for it), row by row, so a decoder runs it on the new
  token alone; `unpack` makes the keys and values from what is kept, for every token so far. The full forward
  pass is unpack(project(X)) (`Variant.projection`); attention_core/decoding.py runs the same two one token at
  a time. What is made on the way is kept (`parts`);
- what a KV cache keeps for each token (`cached`, with its formula in the sizes' names), so that decoding need
  not recompute it;
- what each head hands on to W_O (`handed`: its context, or gated attention's context times its gate);
- how it is drawn and said (`look`, `words`), the sliders of its own sizes (`controls`), and the stages it brings
  (`own_stages`, declared as the parts they show; `stages`, drawn by a builder of figures/stages/).
After projecting, every variant meets the same stages (engine.attend): scores = q·kᵀ, scale, mask, softmax,
context. Adding a variant is a folder here and its entry in registry.py (docs/architecture.md, "A variant").

    MHA   every query head has its own key and value head                  g = h
    GQA   g key/value heads, each read by h/g query heads (Llama, SmolLM2)  1 < g < h
    MQA   one key/value head read by every query head                      g = 1
    MLA   keys and values are up-projected, per head, from one small latent c_KV per token, and a rotary key
          k^R shared by all heads carries the position (DeepSeek-V2, section 2.1); the cache keeps only c_KV, k^R
    Gated GQA whose every head multiplies its context by σ(X·W_G), per token and channel, before W_O
    Sink  GQA whose every head adds a learned logit to each row's softmax, a column no token owns
    Diff  GQA whose every head attends with the difference of two softmax maps, A₁ − λ·A₂

Sizes: n tokens, h = heads, g = kv_heads, d = d_model, d_k, d_v; MLA: d_c (c_KV's width), d_cq (c_Q's, 0 = no
query latent), d_r = d_rope (the rotary part of each query and key). Weights are stored at their true shapes
([g, d, d_k] for a GQA's W_K, as TransformerLens keeps them); k and v are expanded to one per query head only
where they meet the queries (`expand_kv`, also used for real models' grouped heads).

The rooms: record.py (what a variant is, and the pieces all share), sizes.py, look.py (how a variant is drawn and
said, as data), a folder per family (grouped/, mla/, identity/, gated/: each its __init__.py, compute.py and
look.py), registry.py (VARIANTS and what is derived from it), presets.py (published models' sizes).
"""

from attention_core.variants.grouped import GQA, MHA, MQA, fit_kv_heads
from attention_core.variants.identity import IDENTITY
from attention_core.variants.look import Look, OwnStage, Shown, StageText
from attention_core.variants.mla import MLA, absorbed_scores, folded_with_rotated_keys, rotation_matrix
from attention_core.variants.presets import PRESETS, Preset, cached_bytes
from attention_core.variants.record import (
    NORM_EPS,
    PARTS,
    SYMBOL_PATTERN,
    SYMBOLS,
    Projected,
    Sizes,
    Variant,
    WeightSpec,
    always,
    default_kv_heads,
    expand_kv,
    plural,
    rms_norm,
    rotary_parts,
    rotate_qk,
    without_q,
)
from attention_core.variants.registry import (
    DEFAULT,
    VARIANTS,
    grouped_key,
    look_of,
    part_words,
    register,
    sizes_only_some_use,
    variant_controls,
)

__all__ = [
    "DEFAULT",
    "GQA",
    "IDENTITY",
    "Look",
    "MHA",
    "MLA",
    "MQA",
    "NORM_EPS",
    "OwnStage",
    "PARTS",
    "PRESETS",
    "Preset",
    "Projected",
    "SYMBOLS",
    "SYMBOL_PATTERN",
    "Shown",
    "Sizes",
    "StageText",
    "VARIANTS",
    "Variant",
    "WeightSpec",
    "absorbed_scores",
    "always",
    "cached_bytes",
    "default_kv_heads",
    "expand_kv",
    "fit_kv_heads",
    "folded_with_rotated_keys",
    "grouped_key",
    "look_of",
    "part_words",
    "plural",
    "register",
    "rms_norm",
    "rotary_parts",
    "rotate_qk",
    "rotation_matrix",
    "sizes_only_some_use",
    "variant_controls",
    "without_q",
]
