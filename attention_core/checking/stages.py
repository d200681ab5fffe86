"""The stages a student's code may hand in: their order, the names three libraries give them, their layouts, and
the app's own values of each (float64), which the check compares with."""

from __future__ import annotations

import torch

from attention_core.trace import AttentionTrace

# The stages in the order attention computes them, and the names a student's code may give each. A name that two
# libraries use for different stages (transformers' attn_output is the output; TransformerLens's z the context)
# belongs to the one it means there.
# MLA's own stages come first (what q, k and v are made of), with DeepSeek's and transformers' names; the absorbed
# scores (q^C·W_UKᵀ)·c_KVᵀ after the scores, as their content part.
STAGES = ("q_c", "q_r", "c_kv", "k_c", "k_r", "q", "k", "v", "scores", "absorbed", "scaled_scores", "bent_scores",
          "masked_scores", "weights", "context", "output")  # fmt: skip
ALIASES: dict[str, tuple[str, ...]] = {
    "q_c": ("q_c", "q_nope", "q_pass"),
    "q_r": ("q_r", "q_pe", "q_rot"),
    "c_kv": ("c_kv", "compressed_kv", "kv_latent", "latent"),
    "k_c": ("k_c", "k_nope", "k_pass"),
    "k_r": ("k_r", "k_pe", "k_rot"),
    "absorbed": ("absorbed", "absorbed_scores", "scores_nope"),
    "q": ("q", "Q", "queries", "query", "hook_q", "query_states"),
    "k": ("k", "K", "keys", "key", "hook_k", "key_states"),
    "v": ("v", "V", "values", "value", "hook_v", "value_states"),
    "scores": ("scores", "attn_scores_raw", "qk", "QK"),
    "scaled_scores": ("scaled_scores", "scaled"),
    "bent_scores": ("bent_scores", "bent", "score_mod", "modded_scores"),
    "masked_scores": ("masked_scores", "masked", "attn_scores", "hook_attn_scores"),
    "weights": ("weights", "attention_weights", "attn_weights", "pattern", "hook_pattern", "attn", "A"),
    "context": ("context", "z", "hook_z", "context_vectors"),
    "output": ("output", "out", "attn_output", "attn_out", "hook_attn_out"),
}
BY_ALIAS = {alias: stage for stage, aliases in ALIASES.items() for alias in aliases}
PER_HEAD = ("q_c", "q_r", "k_c", "q", "k", "v", "context")  # [heads, n, width]
SQUARE = ("scores", "absorbed", "scaled_scores", "bent_scores", "masked_scores", "weights")  # [heads, n, n]
SHARED = ("c_kv", "k_r")  # [n, width]: one for every head (MLA's latent and its rotary key)


def stage_of(name: str) -> str | None:
    """The stage a student's array name stands for (None: not one the check knows)."""
    return BY_ALIAS.get(name) or BY_ALIAS.get(name.split(".")[-1])


def expected(trace: AttentionTrace) -> dict[str, torch.Tensor]:
    """The app's stages, in the layouts the check compares in (float64): those of every trace, and the parts of a
    variant that has them (MLA's)."""
    stages = {name: getattr(trace, name, None) for name in STAGES}
    parts = trace.parts
    stages.update({name: parts[name] for name in ("q_c", "q_r", "c_kv", "k_c", "k_r") if name in parts})
    if "q_c" in parts and "k_c" in parts:
        stages["absorbed"] = parts["q_c"] @ parts["k_c"].transpose(-2, -1)  # = (q^C·W_UKᵀ)·c_KVᵀ
    return {name: value.detach().double().cpu() for name, value in stages.items() if value is not None}
